//! Lookups of table rows straight from the weight atlas (`gather_rows_into`) and the tied head
//! that reads the same table as B^T (`MatRhs::WeightRows`), against CPU references; the streamed
//! mode (only resident pages written) filled over two passes equals the whole lookup.

use vk_backend::kernels::{gather_rows_into, matmul, MatMulOpts, MatRhs, RowTable};
use vk_backend::layout::pack_matrix_kn;
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{AtlasConfig, Precision, QueueKind, Recorder, Tensor, WeightAtlas};

const ROWS: usize = 150;
const WIDTH: usize = 100;
/// Texels per atlas page (512 wide, 4 high): the table's 38 row blocks span two pages.
const TPP: usize = 512 * 4;

fn rounded(v: &[f32], p: Precision) -> Vec<f32> {
    match p {
        Precision::F32 => v.to_vec(),
        Precision::F16 => v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect(),
    }
}

fn table_atlas(p: Precision, table: &[f32]) -> WeightAtlas {
    let mut stream = pack_matrix_kn(table, ROWS, WIDTH).unwrap();
    let pages = (stream.len() / 4).div_ceil(TPP) as u32;
    assert_eq!(pages, 2, "the test wants a table on two pages");
    stream.resize(pages as usize * TPP * 4, 0.0);
    let atlas = WeightAtlas::new(
        &device(),
        AtlasConfig {
            slots: pages,
            precision: p,
            page_height: Some(4),
            logical_pages: pages,
        },
    )
    .unwrap();
    atlas.load_all_now(&stream).unwrap();
    atlas
}

fn lookup_ref(table: &[f32], ids: &[i64]) -> Vec<f64> {
    let mut out = Vec::new();
    for &id in ids {
        let r = if id < 0 { id + ROWS as i64 } else { id }.clamp(0, ROWS as i64 - 1) as usize;
        out.extend(table[r * WIDTH..(r + 1) * WIDTH].iter().map(|&v| v as f64));
    }
    out
}

const TABLE: RowTable = RowTable {
    texel_offset: 0,
    rows: ROWS,
    width: WIDTH,
};

#[test]
fn rows_come_from_the_atlas() {
    let d = device();
    let mut rng = Rng::new(7);
    for p in [Precision::F32, Precision::F16] {
        let table: Vec<f32> = (0..ROWS * WIDTH).map(|_| rng.uniform(-2.0, 2.0)).collect();
        let table = rounded(&table, p);
        let atlas = table_atlas(p, &table);
        // Both pages, a block straddling rows, a negative id, one past the end (clamped).
        let ids: Vec<i64> = vec![0, 3, 4, 149, -1, 77, 81, 148, 500, 12];
        let idf: Vec<f32> = ids.iter().map(|&i| i as f32).collect();
        let ids_t = Tensor::from_data(&d, "ids", &[2, 5], p, &idf).unwrap();
        let out = Tensor::new(&d, "out", &[2, 5, WIDTH], p).unwrap();
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        rec.use_weights(&atlas);
        gather_rows_into(&mut rec, TABLE, &ids_t, &out, false).unwrap();
        rec.submit_and_wait().unwrap();
        assert_close(
            &format!("lookup {p:?}"),
            &out.download().unwrap(),
            &lookup_ref(&table, &ids),
            0.0,
        );

        // Streamed: page 1 unmapped, then page 0 unmapped and page 1 back.
        let out2 = Tensor::new(&d, "out2", &[2, 5, WIDTH], p).unwrap();
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        rec.use_weights(&atlas);
        rec.update_page_table(&atlas, &[(1, None)]).unwrap();
        gather_rows_into(&mut rec, TABLE, &ids_t, &out2, true).unwrap();
        rec.update_page_table(&atlas, &[(0, None), (1, Some(1))])
            .unwrap();
        gather_rows_into(&mut rec, TABLE, &ids_t, &out2, true).unwrap();
        rec.submit_and_wait().unwrap();
        assert_close(
            &format!("lookup in two passes {p:?}"),
            &out2.download().unwrap(),
            &lookup_ref(&table, &ids),
            0.0,
        );
    }
    assert_no_validation_messages(&d);
}

#[test]
fn tied_head_reads_the_table_as_b_transposed() {
    let d = device();
    let mut rng = Rng::new(11);
    for p in [Precision::F32, Precision::F16] {
        let table: Vec<f32> = (0..ROWS * WIDTH).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let table = rounded(&table, p);
        let atlas = table_atlas(p, &table);
        for m in [1usize, 3] {
            let a: Vec<f32> = (0..m * WIDTH).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let a = rounded(&a, p);
            let at = Tensor::from_data(&d, "a", &[m, WIDTH], p, &a).unwrap();
            let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
            rec.use_weights(&atlas);
            let b = MatRhs::WeightRows {
                texel_offset: 0,
                k: WIDTH,
                n: ROWS,
            };
            let out = matmul(&mut rec, &at, b, &MatMulOpts::default(), "logits").unwrap();
            rec.submit_and_wait().unwrap();
            let mut want = vec![0f64; m * ROWS];
            for i in 0..m {
                for r in 0..ROWS {
                    want[i * ROWS + r] = (0..WIDTH)
                        .map(|k| a[i * WIDTH + k] as f64 * table[r * WIDTH + k] as f64)
                        .sum();
                }
            }
            let tol = match p {
                Precision::F32 => 1e-4,
                Precision::F16 => 3e-3,
            };
            assert_close(
                &format!("head {p:?} M={m}"),
                &out.download().unwrap(),
                &want,
                tol,
            );
        }
    }
    assert_no_validation_messages(&d);
}
