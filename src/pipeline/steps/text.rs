//! Text steps: tokenizing and detokenizing with a Hugging Face `tokenizer.json` (the
//! `tokenizers` crate), and chat prompt templates.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::workload::ChatFormat;

/// Why a tokenizer could not be loaded or used.
#[derive(Debug, thiserror::Error)]
pub enum TextStepError {
    #[error("tokenizer {path} cannot be loaded: {msg} (paths are relative to the workload file)")]
    Load { path: PathBuf, msg: String },
    #[error("tokenizing: {0}")]
    Encode(String),
    #[error("detokenizing: {0}")]
    Decode(String),
}

/// A loaded tokenizer, shared by the steps and requests that use it.
#[derive(Clone)]
pub struct SharedTokenizer {
    path: PathBuf,
    inner: Arc<tokenizers::Tokenizer>,
}

impl std::fmt::Debug for SharedTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokenizer({})", self.path.display())
    }
}

impl SharedTokenizer {
    /// Loads `tokenizer.json` at `path`.
    pub fn load(path: &Path) -> Result<SharedTokenizer, TextStepError> {
        let load_err = |msg: String| TextStepError::Load {
            path: path.to_path_buf(),
            msg,
        };
        if !path.is_file() {
            return Err(load_err("no such file".into()));
        }
        let t = tokenizers::Tokenizer::from_file(path).map_err(|e| load_err(e.to_string()))?;
        Ok(SharedTokenizer {
            path: path.to_path_buf(),
            inner: Arc::new(t),
        })
    }

    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, TextStepError> {
        self.inner
            .encode(text, add_special_tokens)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| TextStepError::Encode(e.to_string()))
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, TextStepError> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| TextStepError::Decode(e.to_string()))
    }
}

/// `text` as the user's message in `format`, after `system`'s message if given, ending where
/// the assistant's reply starts.
pub fn chat_prompt(format: ChatFormat, system: Option<&str>, text: &str) -> String {
    match format {
        ChatFormat::ChatML => {
            let mut s = String::new();
            if let Some(sys) = system {
                s += &format!("<|im_start|>system\n{sys}<|im_end|>\n");
            }
            s += &format!("<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n");
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_wraps_the_message_and_opens_the_reply() {
        assert_eq!(
            chat_prompt(ChatFormat::ChatML, Some("Be brief."), "Hi"),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
             <|im_start|>assistant\n"
        );
        assert_eq!(
            chat_prompt(ChatFormat::ChatML, None, "Hi"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn a_missing_tokenizer_is_named() {
        let e = SharedTokenizer::load(Path::new("/no/such/tokenizer.json")).unwrap_err();
        assert!(e.to_string().contains("/no/such/tokenizer.json"), "{e}");
    }
}
