//! Packed model round trip, corruption detection, and a numeric check of import + BN folding +
//! bias/activation fusion + weight packing: the test unpacks the weights from the packed pages by
//! the texel-convention formulas and runs an f64 reference forward pass, compared with ONNX
//! Runtime's output (tests/data/import/tiny_conv_ref.json from scripts/make_test_models.py).
use std::path::PathBuf;

use texstream::ir::passes::optimize;
use texstream::ir::{Activation, Op};
use texstream::onnx::{import, ImportOptions};
use texstream::packed::format::COMPILER_REVISION;
use texstream::packed::{
    pack_graph, parse_header, PackOptions, PackedError, PackedModel, Precision, WeightKind,
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(name)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("texstream-packed-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn compile(
    batch: usize,
    precision: Precision,
    page_bytes: u64,
    out: &std::path::Path,
) -> PackedModel {
    let mut o = ImportOptions::default();
    o.add_input_spec(&format!("x={batch}x3x8x8")).unwrap();
    let mut m = import(&fixture("tiny_conv.onnx"), &o).unwrap();
    let r = optimize(&mut m.graph);
    assert_eq!((r.bn_folded, r.activations_fused), (1, 1), "{r:?}");
    let meta = m.metadata().clone();
    pack_graph(
        m.graph,
        "tiny_conv.onnx",
        r,
        meta,
        PackOptions {
            page_bytes,
            ..PackOptions::new(precision)
        },
    )
    .unwrap()
    .write(out)
    .unwrap();
    PackedModel::open(out).unwrap()
}

/// All weight-space texels of the model, as f32 RGBA values.
fn weight_space(pm: &PackedModel) -> Vec<f32> {
    let mut bytes = Vec::new();
    let mut page = vec![0u8; pm.page_bytes() as usize];
    for i in 0..pm.page_count() {
        pm.read_page(i, &mut page).unwrap();
        bytes.extend_from_slice(&page);
    }
    match pm.header().precision {
        Precision::F16 => bytes
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Precision::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    }
}

fn texel(ws: &[f32], t: u64, j: usize) -> f64 {
    ws[(t as usize) * 4 + j] as f64
}

#[test]
fn folded_and_packed_weights_reproduce_onnxruntime() {
    let text = std::fs::read_to_string(fixture("tiny_conv_ref.json")).unwrap();
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    let x: Vec<f64> = r["x"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let want: Vec<f64> = r["y"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    for (precision, tol) in [(Precision::F32, 1e-5), (Precision::F16, 3e-3)] {
        let out = tmp(&format!("tiny_{precision:?}.tspk"));
        let pm = compile(2, precision, 512 * 16 * 8, &out);
        let g = pm.graph();
        let ws = weight_space(&pm);
        let step = |op: &str| pm.steps().iter().find(|s| s.op == op).unwrap();
        let conv = step("Conv");
        assert!(matches!(
            g.nodes[conv.node].op,
            Op::Conv {
                activation: Activation::Relu,
                ..
            }
        ));
        let w_of = |slot: usize, s: &texstream::packed::StepInfo| {
            &pm.weights()[s.weights.iter().find(|w| w.0 == slot).unwrap().1]
        };
        let (wf, bias) = (w_of(1, conv), w_of(2, conv));
        assert_eq!(
            wf.kind,
            WeightKind::ConvFilter {
                o: 8,
                i_per_group: 3,
                kh: 3,
                kw: 3
            }
        );
        let mm = step("MatMul");
        let fc = w_of(1, mm);
        assert_eq!(fc.kind, WeightKind::MatrixKN { k: 128, n: 5 });
        // f64 reference: conv 3x3 stride 2 pad 1 (+folded bias), relu, flatten, fc, softmax.
        let mut y = Vec::new();
        for n in 0..2 {
            let mut feat = vec![0f64; 128];
            for o in 0..8 {
                for oy in 0..4 {
                    for ox in 0..4 {
                        let mut acc = texel(&ws, bias.texel_offset + o as u64 / 4, o % 4);
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (iy, ix) =
                                    (oy as i64 * 2 - 1 + ky as i64, ox as i64 * 2 - 1 + kx as i64);
                                if !(0..8).contains(&iy) || !(0..8).contains(&ix) {
                                    continue;
                                }
                                for i in 0..3 {
                                    let t =
                                        wf.texel_offset + (((o * 3 + ky) * 3 + kx) + i / 4) as u64;
                                    acc += texel(&ws, t, i % 4)
                                        * x[((n * 3 + i) * 8 + iy as usize) * 8 + ix as usize];
                                }
                            }
                        }
                        feat[(o * 4 + oy) * 4 + ox] = acc.max(0.0);
                    }
                }
            }
            let logits: Vec<f64> = (0..5)
                .map(|j| {
                    (0..128)
                        .map(|k| {
                            feat[k] * texel(&ws, fc.texel_offset + (k / 4 * 5 + j) as u64, k % 4)
                        })
                        .sum()
                })
                .collect();
            let m = logits.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
            let s: f64 = e.iter().sum();
            y.extend(e.iter().map(|v| v / s));
        }
        for (i, (a, b)) in y.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() < tol,
                "{precision:?} y[{i}] = {a}, onnxruntime {b}"
            );
        }
        assert_eq!(
            pm.header().metadata.get("character").map(|s| s.as_str()),
            Some("a\nb\nc")
        );
        std::fs::remove_file(&out).unwrap();
    }
}

#[test]
fn round_trip_and_layout() {
    let out = tmp("rt.tspk");
    // Small pages (one 512-texel row of fp16) so weights span several pages.
    let pm = compile(1, Precision::F16, 512 * 8, &out);
    let h = pm.header();
    assert_eq!(h.page_bytes, 4096);
    assert_eq!(h.texels_per_page, 512);
    // Small tensors (here the conv bias) are stored compensated: hi fp16 values in the first
    // sixteenth of a compensated page (32 texels), lo remainders x 2048 in the next. Every other
    // weight follows in first-use order, past that reserved region, without overlaps.
    let region = 512 / 16;
    let in_region = |w: &texstream::packed::WeightEntry| {
        h.compensated_pages.iter().any(|&p| {
            let r0 = p as u64 * 512;
            w.texel_offset >= r0 && w.texel_offset + w.texels <= r0 + region
        })
    };
    let (comp, normal): (Vec<_>, Vec<_>) = h.weights.iter().partition(|w| in_region(w));
    assert_eq!(h.compensated_pages.len(), 1);
    assert_eq!(comp.len(), 1, "{comp:?}");
    assert!(matches!(comp[0].kind, WeightKind::Vector { c: 8 }));
    let mut next = 0;
    for w in &normal {
        assert!(w.texel_offset >= next, "{w:?}");
        for &p in &h.compensated_pages {
            let r0 = p as u64 * 512;
            assert!(
                w.texel_offset + w.texels <= r0 || w.texel_offset >= r0 + 2 * region,
                "{w:?} overlaps the reserved region of page {p}"
            );
        }
        next = w.texel_offset + w.texels;
    }
    let end = h
        .weights
        .iter()
        .map(|w| w.texel_offset + w.texels)
        .chain(
            h.compensated_pages
                .iter()
                .map(|&p| p as u64 * 512 + 2 * region),
        )
        .max()
        .unwrap();
    assert_eq!(h.page_count, end.div_ceil(512));
    let ws = weight_space(&pm);
    for t in comp[0].texel_offset..comp[0].texel_offset + comp[0].texels {
        for j in 0..4 {
            let (hi, lo) = (texel(&ws, t, j), texel(&ws, t + region, j));
            // The remainder is below half an fp16 step of hi (or hi is exact).
            assert!(
                lo.abs() / 2048.0 <= hi.abs() * 2f64.powi(-11) + 1e-12,
                "{hi} {lo}"
            );
        }
    }
    assert!((0..comp[0].texels).any(|t| texel(&ws, comp[0].texel_offset + t + region, 0) != 0.0));
    // Every step's pages are exactly the pages its weights touch.
    for s in &h.steps {
        let mut want: Vec<u32> = s
            .weights
            .iter()
            .flat_map(|&(_, wi)| {
                let w = &h.weights[wi];
                (w.texel_offset / 512..=(w.texel_offset + w.texels - 1) / 512).map(|p| p as u32)
            })
            .collect();
        want.sort_unstable();
        want.dedup();
        assert_eq!(s.pages, want, "{}", s.name);
    }
    let len = std::fs::metadata(&out).unwrap().len();
    assert_eq!(
        len % 4096,
        0,
        "data section is 4 KiB aligned and pages are whole"
    );
    let mut buf = vec![0u8; 4096];
    assert!(matches!(
        pm.read_page(h.page_count, &mut buf),
        Err(PackedError::PageRange { .. })
    ));
    let mut small = vec![0u8; 10];
    assert!(pm.read_page(0, &mut small).is_err());
    // Concurrent reads through &self.
    let pm = std::sync::Arc::new(pm);
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let pm = pm.clone();
            std::thread::spawn(move || {
                let mut b = vec![0u8; 4096];
                for i in 0..pm.page_count() {
                    pm.read_page(i, &mut b).unwrap();
                }
            })
        })
        .collect();
    for t in hs {
        t.join().unwrap();
    }
    let prof = pm.load_profile(
        "tiny",
        texstream::packed::CostModel {
            flops_per_s: 1e9,
            bytes_per_s: 1e9,
        },
    );
    assert_eq!(prof.page_bytes, 4096);
    assert!(prof
        .steps
        .iter()
        .any(|s| !s.pages.is_empty() && s.compute_s > 0.0 && s.activation_bytes > 0));
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn corruption_is_detected_and_names_the_file() {
    let out = tmp("corrupt.tspk");
    let _ = compile(1, Precision::F16, 512 * 8, &out);
    let good = std::fs::read(&out).unwrap();
    for (what, bytes) in [
        ("data byte", {
            let mut b = good.clone();
            let i = b.len() - 100;
            b[i] ^= 0x40;
            b
        }),
        ("header byte", {
            let mut b = good.clone();
            b[80] ^= 0x01;
            b
        }),
    ] {
        std::fs::write(&out, &bytes).unwrap();
        let e = PackedModel::open(&out)
            .err()
            .unwrap_or_else(|| panic!("{what} flip not detected"));
        assert!(matches!(e, PackedError::Checksum { .. }), "{what}: {e}");
        assert!(e.to_string().contains("corrupt.tspk"), "{e}");
    }
    std::fs::write(&out, &good[..good.len() - 4096]).unwrap();
    let e = PackedModel::open(&out).err().unwrap();
    assert!(
        matches!(e, PackedError::Corrupt { .. }) && e.to_string().contains("truncated"),
        "{e}"
    );
    std::fs::write(
        &out,
        b"PK\x03\x04 not a packed model at all, just some bytes here.......................",
    )
    .unwrap();
    assert!(matches!(
        PackedModel::open(&out),
        Err(PackedError::BadMagic { .. })
    ));
    std::fs::remove_file(&out).unwrap();
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

#[test]
fn pages_carry_checksums_verified_when_read() {
    let out = tmp("pagecrc.tspk");
    let pm = compile(1, Precision::F16, 512 * 8, &out);
    let good = std::fs::read(&out).unwrap();
    let count = pm.page_count();
    assert!(count >= 2, "want several pages, got {count}");
    assert_eq!(u32::from_le_bytes(good[12..16].try_into().unwrap()), 1);
    assert_eq!(pm.header().page_crcs.len() as u64, count);
    drop(pm);
    let (data_offset, page_bytes) = (u64_at(&good, 24), u64_at(&good, 32));
    let mut page = vec![0u8; page_bytes as usize];

    // A flipped byte in page k: the full check refuses the file, the lazy open does not read
    // pages, and only reading page k fails.
    let k = count - 1;
    let mut b = good.clone();
    b[(data_offset + k * page_bytes + 10) as usize] ^= 0x40;
    std::fs::write(&out, &b).unwrap();
    let e = PackedModel::open(&out)
        .err()
        .expect("page flip not detected");
    assert!(matches!(e, PackedError::Checksum { .. }), "{e}");
    let lazy = PackedModel::open_lazy(&out).unwrap();
    let e = lazy
        .read_page(k, &mut page)
        .expect_err("page flip not read");
    assert!(
        matches!(e, PackedError::PageChecksum { page, .. } if page == k),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("pagecrc.tspk") && msg.contains(&format!("page {k} checksum")),
        "{msg}"
    );
    for i in (0..count).filter(|&i| i != k) {
        lazy.read_page(i, &mut page).unwrap();
    }
    drop(lazy);

    // A flipped header byte fails the lazy open's header checksum.
    let mut b = good.clone();
    b[80] ^= 0x01;
    std::fs::write(&out, &b).unwrap();
    let e = PackedModel::open_lazy(&out)
        .err()
        .expect("header flip not detected");
    assert!(matches!(e, PackedError::Checksum { .. }), "{e}");
    assert!(e.to_string().contains("pagecrc.tspk"), "{e}");

    // A file without the flag (as written before it) is fully verified by the lazy open, and
    // so still refused with a flipped page...
    let mut old = good.clone();
    old[12..16].fill(0);
    old[52..56].fill(0);
    let hl = u64_at(&old, 16) as usize;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&old[..48]);
    crc.update(&old[64..64 + hl]);
    crc.update(&old[data_offset as usize..]);
    let sum = crc.finalize().to_le_bytes();
    old[48..52].copy_from_slice(&sum);
    let mut b = old.clone();
    b[(data_offset + k * page_bytes + 10) as usize] ^= 0x40;
    std::fs::write(&out, &b).unwrap();
    let e = PackedModel::open_lazy(&out)
        .err()
        .expect("unflagged page flip");
    assert!(matches!(e, PackedError::Checksum { .. }), "{e}");
    // ...and its pages read as written.
    std::fs::write(&out, &old).unwrap();
    let pm = PackedModel::open_lazy(&out).unwrap();
    for i in 0..count {
        pm.read_page(i, &mut page).unwrap();
        let at = (data_offset + i * page_bytes) as usize;
        assert_eq!(page, old[at..at + page_bytes as usize], "page {i}");
    }
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn write_replaces_atomically() {
    let out = tmp("atomic.tspk");
    let a = compile(1, Precision::F16, 4096, &out);
    let ino_before = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&out).unwrap());
    let b = compile(2, Precision::F16, 4096, &out);
    let ino_after = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&out).unwrap());
    assert_ne!(ino_before, ino_after, "rewritten by rename, not in place");
    // The old handle still reads its own (unlinked) file.
    let mut buf = vec![0u8; 4096];
    a.read_page(0, &mut buf).unwrap();
    b.read_page(0, &mut buf).unwrap();
    let leftovers = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                // Only this file's: other tests write next to it at the same time.
                .starts_with(".atomic.tspk.tmp")
        })
        .count();
    assert_eq!(leftovers, 0);
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn inconsistent_headers_are_refused_with_the_reason() {
    let out = tmp("inconsistent.tspk");
    let pm = compile(1, Precision::F16, 512 * 8, &out);
    let header = pm.header().clone();
    let mut data = Vec::new();
    let mut page = vec![0u8; pm.page_bytes() as usize];
    for i in 0..pm.page_count() {
        pm.read_page(i, &mut page).unwrap();
        data.extend_from_slice(&page);
    }
    drop(pm);
    // Each edit keeps a valid checksum (the file is rewritten), so only the header checks see it.
    let mut wrong_shape = header.clone();
    wrong_shape.graph.outputs[0].shape = Some(vec![7]);
    let mut wrong_page = header.clone();
    wrong_page.compensated_pages = vec![wrong_page.page_count as u32];
    for (h, want) in [(wrong_shape, "port"), (wrong_page, "compensated page")] {
        texstream::packed::Packed {
            header: h,
            data: data.clone(),
        }
        .write(&out)
        .unwrap();
        let e = PackedModel::open(&out).err().expect("refused").to_string();
        assert!(e.contains(want) && e.contains("inconsistent.tspk"), "{e}");
    }
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn an_older_compilers_header_asks_for_a_recompile() {
    let out = tmp("older.tspk");
    let pm = compile(1, Precision::F16, 512 * 8, &out);
    let mut v = serde_json::to_value(pm.header()).unwrap();
    drop(pm);
    std::fs::remove_file(&out).unwrap();
    // A header of revision 16, whose ops this build no longer reads (an unknown op name).
    v["compiler_revision"] = 16.into();
    v["graph"]["nodes"][0]["op"] = "NoSuchOp".into();
    let e = parse_header(&out, &serde_json::to_vec(&v).unwrap()).unwrap_err();
    assert!(
        matches!(e, PackedError::Outdated { found: 16, .. })
            && e.to_string().contains("older texstream")
            && e.to_string().contains("older.tspk"),
        "{e}"
    );
    // The same damage at the current revision is corruption.
    v["compiler_revision"] = COMPILER_REVISION.into();
    let e = parse_header(&out, &serde_json::to_vec(&v).unwrap()).unwrap_err();
    assert!(matches!(e, PackedError::Corrupt { .. }), "{e}");
}

#[test]
fn a_newer_compilers_header_is_refused_not_misread() {
    let out = tmp("newer.tspk");
    let pm = compile(1, Precision::F16, 512 * 8, &out);
    let mut v = serde_json::to_value(pm.header()).unwrap();
    drop(pm);
    std::fs::remove_file(&out).unwrap();
    // A field this build does not know parses (serde skips it), so the revision decides.
    v["compiler_revision"] = (COMPILER_REVISION + 1).into();
    v["graph"]["nodes"][0]["field_of_a_later_revision"] = true.into();
    let e = parse_header(&out, &serde_json::to_vec(&v).unwrap()).unwrap_err();
    assert!(
        matches!(e, PackedError::Newer { found, .. } if found == COMPILER_REVISION + 1)
            && e.to_string().contains("newer texstream")
            && e.to_string().contains("newer.tspk"),
        "{e}"
    );
}
