//! Runs the checked-in fuzz corpus (fuzz/corpus/import) and deterministic mutations of it through
//! the importer, passes and packer: every input must give Ok or an error, never a panic.
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use texstream::ir::passes::optimize;
use texstream::onnx::{import_bytes, ImportOptions};
use texstream::packed::{pack_graph, PackOptions};

fn corpus() -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/import");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    assert!(v.len() >= 10, "corpus went missing");
    v
}

/// Import + passes + pack; returns whether the import succeeded. Panics propagate.
fn run(bytes: &[u8]) -> bool {
    let mut opts = ImportOptions::default();
    opts.add_input_spec("x=1x3x8x8").unwrap();
    match import_bytes(
        bytes,
        Path::new("fuzz.onnx"),
        Path::new("/nonexistent"),
        &opts,
    ) {
        Ok(mut m) => {
            let r = optimize(&mut m.graph);
            let _ = pack_graph(
                m.graph,
                "fuzz",
                r,
                Default::default(),
                PackOptions::default(),
            );
            true
        }
        Err(e) => {
            assert!(
                e.to_string().contains("fuzz.onnx"),
                "error does not name the file: {e}"
            );
            false
        }
    }
}

#[test]
fn corpus_never_panics() {
    for (p, b) in corpus() {
        let r = catch_unwind(AssertUnwindSafe(|| run(&b)));
        assert!(r.is_ok(), "panic on {}", p.display());
    }
}

#[test]
fn mutations_never_panic() {
    let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut ok = 0;
    for (p, base) in corpus().into_iter().filter(|(_, b)| b.len() > 64) {
        for i in 0..1000 {
            let mut b = base.clone();
            match next() % 4 {
                0 => {
                    for _ in 0..1 + next() % 8 {
                        let k = (next() as usize) % b.len();
                        b[k] = next() as u8;
                    }
                }
                1 => b.truncate((next() as usize) % b.len()),
                2 => {
                    let k = (next() as usize) % b.len();
                    b.insert(k, next() as u8);
                }
                _ => {
                    // Overwrite a varint-ish byte with a large value.
                    let k = (next() as usize) % b.len();
                    b[k] = 0xff;
                }
            }
            let r = catch_unwind(AssertUnwindSafe(|| run(&b)));
            match r {
                Ok(true) => ok += 1,
                Ok(false) => {}
                Err(_) => {
                    let dump = std::env::temp_dir().join(format!("texstream-crash-{i}.onnx"));
                    std::fs::write(&dump, &b).unwrap();
                    panic!(
                        "panic on mutation {i} of {} (saved to {})",
                        p.display(),
                        dump.display()
                    );
                }
            }
        }
    }
    println!("{ok} mutants imported successfully");
}
