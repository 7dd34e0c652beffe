//! Record once, replay per run (`runtime/replay.rs`): an executable's second and later runs
//! submit the second run's recording again. Replayed runs must equal runs that record every
//! dispatch, bit for bit, as the inputs change and as state (a decoder's key/value cache) carries
//! from run to run; the recorded path itself is held to ONNX Runtime by `exporter_sweep.rs` and
//! `decoder_cache.rs` (whose 64-token greedy decoding now runs replayed).
mod common;
use common::root;

use texstream::compile::Compiler;
use texstream::packed::Precision;
use texstream::runtime::npy::read_npy;
use texstream::runtime::{BuildOptions, Executable, HostTensor};

fn build(
    device: &vk_backend::Device,
    packed: &texstream::packed::Packed,
    replay: bool,
) -> Executable {
    let opts = BuildOptions {
        replay,
        ..BuildOptions::default()
    };
    Executable::with_options(device, &packed.header, packed, &opts).expect("build")
}

fn bits(out: &[(String, HostTensor)]) -> Vec<(String, Vec<u32>)> {
    out.iter()
        .map(|(n, t)| (n.clone(), t.data.iter().map(|v| v.to_bits()).collect()))
        .collect()
}

#[test]
fn replayed_runs_equal_recorded_runs_as_the_inputs_change() {
    let dir = root().join("tests/data/exporter_sweep/shufflenet_v2");
    let input = read_npy(&dir.join("inputs/input.npy")).expect("input");
    let device = vk_backend::testing::device();
    for precision in [Precision::F32, Precision::F16] {
        let packed = Compiler::new(&dir.join("torchscript-op18/model.onnx"))
            .precision(precision)
            .input_shape("input", input.shape.clone())
            .compile()
            .expect("compile")
            .packed;
        let name = packed.header.graph.inputs[0].name.clone();
        let mut replayed = build(&device, &packed, true);
        let mut recorded = build(&device, &packed, false);
        let variants: Vec<Vec<f32>> = vec![
            input.data.clone(),
            input.data.iter().map(|v| 0.5 * v + 0.1).collect(),
            (0..input.data.len())
                .map(|i| (i as f32 * 0.37).sin())
                .collect(),
            input.data.clone(),
        ];
        let mut seen = Vec::new();
        for (i, data) in variants.iter().enumerate() {
            let feeds = vec![(
                name.clone(),
                HostTensor::new(input.shape.clone(), data.clone()),
            )];
            let a = bits(&replayed.run(&feeds).expect("replayed run"));
            assert_eq!(replayed.last_timings.replayed, i > 0, "run {i}");
            let b = bits(&recorded.run(&feeds).expect("recorded run"));
            assert!(!recorded.last_timings.replayed);
            assert_eq!(
                a, b,
                "{precision:?} run {i}: replayed and recorded outputs differ"
            );
            seen.push(a);
        }
        // The inputs really reach the replayed runs: different inputs, different outputs, and
        // the first input again gives the first outputs again.
        assert_ne!(seen[0], seen[1]);
        assert_ne!(seen[1], seen[2]);
        assert_eq!(seen[0], seen[3]);
    }
    assert!(
        device.validation_messages().is_empty(),
        "{:?}",
        device.validation_messages()
    );
}

/// Greedy decoding of the tiny Llama, one token a run with its cache kept in place: every
/// step's logits, replayed, equal those of runs that record, bit for bit, over two
/// conversations with the state reset between them.
#[test]
fn a_decoder_replayed_keeps_its_cache_from_run_to_run() {
    let max_len = 64;
    let packed = Compiler::new(&root().join("tests/data/tiny_llama/decoder.onnx"))
        .precision(Precision::F32)
        .kv_cache(max_len, "position_ids")
        .input_shape("input_ids", vec![1, 1])
        .input_shape("position_ids", vec![1, 1])
        .input_shape("attention_mask", vec![1, max_len])
        .compile()
        .expect("compile")
        .packed;
    let device = vk_backend::testing::device();
    let ints = |shape: Vec<usize>, v: &[i64]| {
        HostTensor::new(shape, v.iter().map(|&x| x as f32).collect())
    };
    let mut logits = Vec::new();
    for replay in [true, false] {
        let mut exe = build(&device, &packed, replay);
        let mut steps = Vec::new();
        for prompt in [[5i64, 17, 3], [9, 2, 40]] {
            exe.reset_state().expect("reset");
            let mut token = prompt[0];
            for pos in 0..12usize {
                if pos < prompt.len() {
                    token = prompt[pos];
                }
                let feeds = vec![
                    ("input_ids".to_string(), ints(vec![1, 1], &[token])),
                    ("position_ids".to_string(), ints(vec![1, 1], &[pos as i64])),
                    (
                        "attention_mask".to_string(),
                        ints(vec![1, max_len], &vec![1; max_len]),
                    ),
                ];
                let out = exe.run(&feeds).expect("run");
                let l = &out.iter().find(|(n, _)| n == "logits").expect("logits").1;
                token = l
                    .data
                    .iter()
                    .enumerate()
                    .fold((0, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b })
                    .0 as i64;
                steps.push(l.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
            }
        }

        logits.push(steps);
    }
    vk_backend::testing::assert_no_validation_messages(&device);
    assert_eq!(logits[0].len(), 24);
    for (i, (a, b)) in logits[0].iter().zip(&logits[1]).enumerate() {
        assert_eq!(a, b, "step {i}: replayed logits differ from recorded ones");
    }
}
