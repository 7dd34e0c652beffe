//! The text steps on SmolLM2's tokenizer.json (committed in tests/data/text): `ChatTemplate`'s
//! ChatML prompt, `Tokenize`'s ids against `scripts/bpe_reference.py` (GPT-2's byte-level BPE
//! written out in plain Python, not the `tokenizers` crate), `Detokenize` back to the prompt,
//! and a tokenizer file that does not exist failing at load with the step's location.
mod common;
use common::{python, root};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use texstream::pipeline::{execute, ModelCall, ModelRunner, PipelineGraph};
use texstream::workload::{load_workload, parse_workload};
use texstream::{Tensor, Value};

struct NoModels;

impl ModelRunner for NoModels {
    fn run_model(
        &mut self,
        _: ModelCall<'_>,
    ) -> Result<Vec<Tensor>, Box<dyn std::error::Error + Send + Sync>> {
        Err("this pipeline runs no model".into())
    }
}

fn reference_ids(py: &Path, text: &str) -> Vec<u32> {
    let o = Command::new(py)
        .arg(root().join("scripts/bpe_reference.py"))
        .arg(root().join("tests/data/text/smollm2-tokenizer.json"))
        .arg(text)
        .output()
        .expect("run bpe_reference.py");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn chatml_prompt_tokenizes_like_byte_level_bpe_and_detokenizes_back() {
    let w = load_workload(&root().join("tests/data/text/chat.ron")).unwrap();
    let g = PipelineGraph::build(&w, &w.spec.pipelines[0], &[]).unwrap();
    let question = "What is 12+30? Don't hurry, and  answer in words.";
    let inputs = BTreeMap::from([("question".to_string(), Value::Text(question.into()))]);
    let ex = execute(&g, inputs, &mut NoModels, &|| None).unwrap();
    let text = |k: &str| match ex.outputs.get(k) {
        Some(Value::Text(t)) => t.clone(),
        other => panic!("{k}: {other:?}"),
    };
    let prompt = text("prompt");
    assert_eq!(
        prompt,
        format!(
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n\
             {question}<|im_end|>\n<|im_start|>assistant\n"
        )
    );
    let Some(Value::Tokens(ids)) = ex.outputs.get("ids") else {
        panic!("no ids");
    };
    // The special tokens of SmolLM2's vocabulary: <|im_start|> 1, <|im_end|> 2.
    assert_eq!(ids[0], 1);
    assert_eq!(ids.iter().filter(|&&i| i == 2).count(), 2);
    assert_eq!(text("echo"), prompt);
    match python() {
        Some(py) => assert_eq!(*ids, reference_ids(&py, &prompt)),
        None => eprintln!("SKIPPED the BPE reference"),
    }
}

#[test]
fn a_missing_tokenizer_fails_at_load_with_its_location() {
    let text = std::fs::read_to_string(root().join("tests/data/text/chat.ron"))
        .unwrap()
        .replacen(
            r#"Tokenize(input: "prompt", output: "ids", tokenizer: "smollm2-tokenizer.json")"#,
            r#"Tokenize(input: "prompt", output: "ids", tokenizer: "missing.json")"#,
            1,
        );
    let path = root().join("tests/data/text/bad-chat.ron");
    let w = parse_workload(&text, &path).unwrap();
    let e = PipelineGraph::build(&w, &w.spec.pipelines[0], &[])
        .unwrap_err()
        .to_string();
    let at = text.find("Tokenize(").unwrap();
    let line = text[..at].matches('\n').count() + 1;
    let col = at - text[..at].rfind('\n').unwrap();
    let want = format!(
        "{}:{line}:{col}: pipeline `prompt` step 1 (Tokenize)",
        path.display()
    );
    assert!(e.starts_with(&want), "{e}");
    assert!(
        e.contains("missing.json") && e.contains("no such file"),
        "{e}"
    );
}
