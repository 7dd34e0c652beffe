//! Weight atlas: pages uploaded into slots, page-table remapping, `fetch_weight` read back through
//! the `weight_copy` kernel and compared with the host texels (rounded to the atlas precision).

use vk_backend::kernels::weight_copy_into;
use vk_backend::layout::{pack_matrix_kn, texels_to_bytes};
use vk_backend::testing::{assert_no_validation_messages, device, Rng};
use vk_backend::{AtlasConfig, Precision, QueueKind, Recorder, Tensor, WeightAtlas, UNMAPPED};

/// Reads `texels` weight texels from `offset` via fetch_weight; returns 4 values per texel.
fn read_weights(atlas: &WeightAtlas, offset: u32, texels: usize) -> Vec<f32> {
    read_weights_as(atlas, offset, texels, atlas.precision())
}

/// [`read_weights`] into a tensor of precision `out` (fp32 over an fp16 atlas: the mixed variant).
fn read_weights_as(atlas: &WeightAtlas, offset: u32, texels: usize, out: Precision) -> Vec<f32> {
    let d = device();
    // [1, 4, 1, T]: one layer, texel x holds channels 0..3 = RGBA.
    let t = Tensor::new(&d, "weights view", &[1, 4, 1, texels], out).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    rec.use_weights(atlas);
    weight_copy_into(&mut rec, offset, &t).unwrap();
    rec.submit_and_wait().unwrap();
    let nchw = t.download().unwrap();
    (0..texels)
        .flat_map(|x| (0..4).map(move |c| (x, c)))
        .map(|(x, c)| nchw[c * texels + x])
        .collect()
}

/// An fp16 atlas of two 1024-texel slots addressing `logical_pages` pages.
fn small_f16_atlas(logical_pages: u32) -> WeightAtlas {
    WeightAtlas::new(
        &device(),
        AtlasConfig {
            slots: 2,
            precision: Precision::F16,
            page_height: Some(2),
            logical_pages,
        },
    )
    .unwrap()
}

#[test]
fn pages_load_and_read_back() {
    let d = device();
    for (p, page_height) in [(Precision::F16, Some(4)), (Precision::F32, None)] {
        let atlas = WeightAtlas::new(
            &d,
            AtlasConfig {
                slots: 3,
                precision: p,
                page_height,
                logical_pages: 8,
            },
        )
        .unwrap();
        let tpp = atlas.texels_per_page() as usize;
        // A packed matrix spanning more than two pages.
        let (k, n) = (13usize, (2 * tpp + 100).div_ceil(4));
        let b = Rng::new(3).vec(k * n, -1.0, 1.0);
        let packed = pack_matrix_kn(&b, k, n).unwrap();
        let texels = packed.len() / 4;
        assert!(texels > 2 * tpp);
        atlas.load_all_now(&packed).unwrap();
        let got = read_weights(&atlas, 0, texels);
        // Independent check of layout + paging: element B[kk, nn] sits at texel (kk/4)*N + nn.
        for kk in 0..k {
            for nn in 0..n {
                let v = got[((kk / 4) * n + nn) * 4 + kk % 4];
                assert_eq!(v, p.round(b[kk * n + nn]), "B[{kk},{nn}] {p:?}");
            }
        }
        assert_eq!(atlas.page_table()[..3], [0, 1, 2]);
    }
    assert_no_validation_messages(&d);
}

#[test]
fn remap_and_unmapped_pages() {
    let d = device();
    let p = Precision::F16;
    let atlas = small_f16_atlas(4);
    let tpp = atlas.texels_per_page() as usize;
    let page = |seed: u64| Rng::new(seed).vec(tpp * 4, -2.0, 2.0);
    let (p0, p3) = (page(10), page(13));
    // Logical page 3 -> slot 0, logical page 0 -> slot 1.
    atlas.load_page_now(3, 0, &texels_to_bytes(&p3, p)).unwrap();
    atlas.load_page_now(0, 1, &texels_to_bytes(&p0, p)).unwrap();
    assert_eq!(atlas.page_table(), vec![1, UNMAPPED, UNMAPPED, 0]);
    let round = |v: &[f32]| v.iter().map(|&x| p.round(x)).collect::<Vec<_>>();
    assert_eq!(read_weights(&atlas, 0, tpp), round(&p0));
    assert_eq!(read_weights(&atlas, 3 * tpp as u32, tpp), round(&p3));
    // Unmapped page 1 reads zeros.
    assert!(read_weights(&atlas, tpp as u32, tpp)
        .iter()
        .all(|&v| v == 0.0));
    // Evict page 3 and map page 2 to its slot without touching contents: page 2 now reads p3's data.
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    rec.update_page_table(&atlas, &[(3, None), (2, Some(0))])
        .unwrap();
    rec.submit_and_wait().unwrap();
    assert_eq!(read_weights(&atlas, 2 * tpp as u32, tpp), round(&p3));
    assert!(read_weights(&atlas, 3 * tpp as u32, 4)
        .iter()
        .all(|&v| v == 0.0));
    // Bad input is rejected clearly.
    assert!(atlas.load_page_now(9, 0, &texels_to_bytes(&p0, p)).is_err());
    assert!(atlas.load_page_now(0, 5, &texels_to_bytes(&p0, p)).is_err());
    assert!(atlas.load_page_now(0, 0, &[0u8; 8]).is_err());
    assert_no_validation_messages(&d);
}

#[test]
fn compensated_pages_add_the_scaled_remainder() {
    let d = device();
    let p = Precision::F16;
    let atlas = small_f16_atlas(2);
    let tpp = atlas.texels_per_page() as usize;
    // The hi values sit in the page's first sixteenth, the lo remainders x 2048 in the next.
    let region = tpp / 16;
    let exact = Rng::new(21).vec(region * 4, -3.0, 3.0);
    let mut page = Rng::new(22).vec(tpp * 4, -2.0, 2.0);
    for (i, &v) in exact.iter().enumerate() {
        let hi = half::f16::from_f32(v).to_f32();
        page[i] = hi;
        page[region * 4 + i] = (v - hi) * 2048.0;
    }
    let bytes = texels_to_bytes(&page, p);
    atlas.mark_compensated(&[1]).unwrap();
    // The same bytes as plain page 0 and compensated page 1.
    atlas.load_page_now(0, 0, &bytes).unwrap();
    atlas.load_page_now(1, 1, &bytes).unwrap();
    let plain = read_weights_as(&atlas, 0, tpp, Precision::F32);
    let comp = read_weights_as(&atlas, tpp as u32, tpp, Precision::F32);
    for (i, &v) in exact.iter().enumerate() {
        let hi = half::f16::from_f32(v).to_f32();
        assert_eq!(plain[i], hi, "plain page, value {i}");
        let err = (comp[i] as f64 - v as f64).abs();
        assert!(
            err <= 1e-6 * (v as f64).abs().max(1e-3),
            "compensated value {i}: {} vs {v} (hi alone {hi})",
            comp[i]
        );
    }
    // Outside the region, both pages read the stored fp16 values unchanged.
    for i in region * 8..tpp * 4 {
        let want = p.round(page[i]);
        assert_eq!(plain[i], want, "plain page, value {i}");
        assert_eq!(comp[i], want, "compensated page, value {i}");
    }
    assert!(atlas.mark_compensated(&[2]).is_err());
    assert_no_validation_messages(&d);
}

#[test]
fn pages_stack_in_layers_where_slots_outnumber_the_layers() {
    // A device that admits 2 array layers: 5 slots of 4-row pages stack 4 to a layer.
    let d = vk_backend::Device::new(&vk_backend::DeviceOptions {
        limits_override: Some(vk_backend::ImageLimits {
            max_image_dimension_2d: u32::MAX,
            max_image_array_layers: 2,
        }),
        ..vk_backend::DeviceOptions::from_env()
    })
    .unwrap();
    let p = Precision::F16;
    let config = AtlasConfig {
        slots: 5,
        precision: p,
        page_height: Some(4),
        logical_pages: 6,
    };
    let atlas = WeightAtlas::new(&d, config).unwrap();
    assert_eq!(atlas.pages_per_layer(), 4);
    assert_eq!(atlas.image().extent(), [512, 16, 2]);
    assert_eq!(atlas.slot_origin(4), (1, 0));
    assert_eq!(atlas.slot_origin(3), (0, 12));
    let needs = WeightAtlas::memory_needs(&d, &config).unwrap();
    // What the budget counts is the stacked image (2 layers of 16 rows of 512 fp16 texels).
    assert!(needs.image_bytes >= 2 * 16 * 512 * 8, "{needs:?}");
    assert_eq!(needs.image_bytes, atlas.image().allocated_bytes());

    let tpp = atlas.texels_per_page() as usize;
    let pages: Vec<Vec<f32>> = (0..6)
        .map(|i| Rng::new(40 + i).vec(tpp * 4, -2.0, 2.0))
        .collect();
    // Logical page i in slot (3 i + 1) % 5, page 5 unmapped; page 2 compensated.
    atlas.mark_compensated(&[2]).unwrap();
    // Only the first sixteenth of a compensated page holds compensated texels.
    let tpp64 = atlas.texels_per_page() as u64;
    assert!(atlas.is_compensated_texel(2 * tpp64));
    assert!(atlas.is_compensated_texel(2 * tpp64 + tpp64 / 16 - 1));
    assert!(!atlas.is_compensated_texel(2 * tpp64 + tpp64 / 16));
    assert!(!atlas.is_compensated_texel(tpp64));
    assert!(!atlas.is_compensated_texel(u64::MAX));
    for (i, page) in pages.iter().enumerate().take(5) {
        let slot = (3 * i as u32 + 1) % 5;
        atlas
            .load_page_now(i as u32, slot, &texels_to_bytes(page, p))
            .unwrap();
    }
    let round = |v: &[f32]| v.iter().map(|&x| p.round(x)).collect::<Vec<_>>();
    for (i, page) in pages.iter().enumerate().take(5) {
        let got = {
            let t = Tensor::new(&d, "weights view", &[1, 4, 1, tpp], p).unwrap();
            let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
            rec.use_weights(&atlas);
            weight_copy_into(&mut rec, (i * tpp) as u32, &t).unwrap();
            rec.submit_and_wait().unwrap();
            let nchw = t.download().unwrap();
            (0..tpp)
                .flat_map(|x| (0..4).map(move |c| (x, c)))
                .map(|(x, c)| nchw[c * tpp + x])
                .collect::<Vec<_>>()
        };
        if i == 2 {
            // The compensated region adds the scaled next sixteenth: only check past it.
            let region = tpp / 16 * 4;
            assert_eq!(got[2 * region..], round(&page[2 * region..]), "page {i}");
        } else {
            assert_eq!(got, round(page), "page {i} (slot {})", (3 * i + 1) % 5);
        }
    }
    // Slots past the last layer, and atlases larger than the device can stack, are refused.
    assert!(atlas
        .load_page_now(0, 5, &texels_to_bytes(&pages[0], p))
        .is_err());
    let too_many = AtlasConfig {
        slots: 1 << 20,
        page_height: Some(1 << 12),
        ..config
    };
    let e = WeightAtlas::new(&d, too_many)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("at most"), "{e}");
    assert_no_validation_messages(&d);
}
