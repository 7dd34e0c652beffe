//! The `Generate` step: autoregressive decoding through a decoder that keeps its key/value
//! cache on the device. One model call per position: the prompt's tokens first (each call
//! writes its keys and values at its position; only the last one's logits are read back), then
//! each picked token, until a stop token or `max_tokens`. Before every call it tells the runner
//! how many calls are left, so residency planning follows the real reply length.
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::exec::ModelCall;
use super::value::{Tensor, TensorData};
use crate::workload::{DecoderPorts, Sampling};
use scheduler::Stage;

/// What one `Generate` step was given.
pub struct GenerateCall<'a> {
    pub model: usize,
    /// Tokens already in the cache at positions `0..history` (a conversation's earlier turns):
    /// decoding feeds the prompt from position `history` on.
    pub history: usize,
    pub prompt: &'a [u32],
    /// Model inputs that stay the same for every call.
    pub fixed: Vec<(&'a str, &'a Tensor)>,
    pub max_tokens: u32,
    /// Calls the planner expects for the whole step (prompt and reply).
    pub expected_runs: u32,
    pub stop: &'a [u32],
    pub sampling: &'a Sampling,
    pub ports: &'a DecoderPorts,
    pub cache_len: usize,
}

/// A conversation between requests (`Generate { conversation: true }`): the tokens whose keys and
/// values the decoder's cache holds (positions `0..history.len()`), the token the next turn
/// feeds first, and how many times the model had run after this conversation's last call (when
/// another request has run the model since, its cache rows are overwritten and the next turn
/// feeds the whole history again).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conversation {
    pub history: Vec<u32>,
    pub pending: Option<u32>,
    pub model_uses: Option<u64>,
}

impl Conversation {
    /// The next turn, `prompt` after this conversation, for a cache of `cache_len` positions:
    /// (tokens the cache already holds, tokens to feed). A turn that would not fit (with
    /// `max_tokens` of reply) starts over with just `prompt`. `uses` is the model's run count
    /// now.
    pub fn next_turn(
        &self,
        prompt: &[u32],
        max_tokens: u32,
        cache_len: usize,
        uses: Option<u64>,
    ) -> (usize, Vec<u32>) {
        let mut feed: Vec<u32> = self.pending.into_iter().collect();
        feed.extend_from_slice(prompt);
        if self.history.len() + feed.len() + max_tokens as usize > cache_len {
            return (0, prompt.to_vec());
        }
        if uses.is_some() && uses == self.model_uses {
            return (self.history.len(), feed);
        }
        let mut all = self.history.clone();
        all.extend(feed);
        (0, all)
    }
}

/// Why decoding stopped before a reply.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error(
        "a prompt of {prompt} tokens plus max_tokens {max} does not fit the model's cache of \
         {cache} positions"
    )]
    TooLong {
        prompt: usize,
        max: u32,
        cache: usize,
    },
    #[error("token id {0} is too large for the device's exact integers")]
    TokenRange(u32),
    #[error("the model returned no logits")]
    NoLogits,
    #[error(transparent)]
    Tensor(#[from] super::value::TensorError),
    #[error(transparent)]
    Model(Box<dyn std::error::Error + Send + Sync>),
}

/// The reply's token ids (without the stop token) and the model calls made.
pub struct Reply {
    pub tokens: Vec<u32>,
    pub runs: u32,
    /// The last token picked, which no call has fed (the stop token, or the reply's last when it
    /// reached `max_tokens`); a conversation's next turn feeds it first.
    pub pending: Option<u32>,
}

/// A model call for the executor: `call(inputs, outputs, rest)`.
pub type CallModel<'r> = dyn FnMut(ModelCall<'_>) -> Result<Vec<Tensor>, GenerateError> + 'r;

/// Decodes. `later` is the planner's view of the request's model runs after this step.
pub fn generate(
    g: &GenerateCall<'_>,
    later: &[Stage],
    call: &mut CallModel<'_>,
    stopped: &dyn Fn() -> bool,
) -> Result<Reply, GenerateError> {
    if g.prompt.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    if g.history + g.prompt.len() + g.max_tokens as usize > g.cache_len {
        return Err(GenerateError::TooLong {
            prompt: g.history + g.prompt.len(),
            max: g.max_tokens,
            cache: g.cache_len,
        });
    }
    // Every position may attend to every written one; the graph's own mask hides the rest.
    let mask = Tensor::new(vec![1, g.cache_len], TensorData::I64(vec![1; g.cache_len]))?;
    let mut sampler = Sampler::new(g.sampling);
    let mut reply = Vec::new();
    let mut token = g.prompt[0];
    let mut runs = 0u32;
    let mut pending = None;
    for i in 0.. {
        if i > 0 && stopped() {
            pending = None;
            break;
        }
        if i < g.prompt.len() {
            token = g.prompt[i];
        }
        let pos = g.history + i;
        if token > 1 << 24 {
            return Err(GenerateError::TokenRange(token));
        }
        let ids = Tensor::new(vec![1, 1], TensorData::I64(vec![token as i64]))?;
        let at = Tensor::new(vec![1, 1], TensorData::I64(vec![pos as i64]))?;
        let mut inputs = vec![
            (g.ports.input_ids.as_str(), &ids),
            (g.ports.position_ids.as_str(), &at),
            (g.ports.attention_mask.as_str(), &mask),
        ];
        inputs.extend(g.fixed.iter().copied());
        // Calls left: the rest of the prompt, then the expected reply (at least this call).
        let prompt_left = (g.prompt.len() - 1).saturating_sub(i) as u32;
        let reply_calls = g
            .expected_runs
            .saturating_sub(g.prompt.len() as u32 - 1)
            .max(1);
        let reply_left = reply_calls.saturating_sub(reply.len() as u32).max(1);
        let mut rest = vec![Stage {
            model: g.model,
            count: prompt_left + reply_left,
        }];
        rest.extend_from_slice(later);
        // A prompt token before the last only writes its keys and values: its logits are not
        // read back.
        let prompt_only = i + 1 < g.prompt.len();
        let outputs = if prompt_only {
            Vec::new()
        } else {
            vec![g.ports.logits.as_str()]
        };
        let outs = call(ModelCall {
            model: g.model,
            inputs,
            outputs,
            rest,
        })?;
        runs += 1;
        if prompt_only {
            continue;
        }
        let logits = outs.first().ok_or(GenerateError::NoLogits)?.to_f32()?;
        token = sampler.pick(&logits);
        pending = Some(token);
        if g.stop.contains(&token) {
            break;
        }
        reply.push(token);
        if reply.len() as u32 >= g.max_tokens {
            break;
        }
    }
    Ok(Reply {
        tokens: reply,
        runs,
        pending,
    })
}

/// Picks the next token from a logits row (the last `vocab` values of the model's output).
struct Sampler<'a> {
    sampling: &'a Sampling,
    rng: Option<ChaCha8Rng>,
}

impl<'a> Sampler<'a> {
    fn new(sampling: &'a Sampling) -> Self {
        let rng = match sampling {
            Sampling::Greedy => None,
            Sampling::Sample { seed, .. } => Some(ChaCha8Rng::seed_from_u64(*seed)),
        };
        Sampler { sampling, rng }
    }

    fn pick(&mut self, logits: &[f32]) -> u32 {
        match (self.sampling, self.rng.as_mut()) {
            (
                Sampling::Sample {
                    temperature, top_k, ..
                },
                Some(rng),
            ) => sample(logits, *temperature, *top_k as usize, rng),
            _ => argmax(logits),
        }
    }
}

/// The first index of the largest value (NaN never wins).
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] || v[best].is_nan() {
            best = i;
        }
    }
    best as u32
}

/// A draw from the softmax at `temperature` over the `k` largest logits (ties by lower id).
fn sample(logits: &[f32], temperature: f32, k: usize, rng: &mut ChaCha8Rng) -> u32 {
    let mut order: Vec<usize> = (0..logits.len()).filter(|&i| !logits[i].is_nan()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    order.truncate(k.max(1));
    let Some(&top) = order.first() else {
        return 0;
    };
    let t = temperature as f64;
    let weights: Vec<f64> = order
        .iter()
        .map(|&i| ((logits[i] as f64 - logits[top] as f64) / t).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut u = rng.random::<f64>() * total;
    for (&i, w) in order.iter().zip(&weights) {
        if u < *w {
            return i as u32;
        }
        u -= w;
    }
    order[order.len() - 1] as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_first_largest() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -1.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 0.5, 0.2]), 1);
    }

    #[test]
    fn sampling_is_reproducible_and_stays_in_the_top_k() {
        let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32).collect();
        let draw = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..200)
                .map(|_| sample(&logits, 0.8, 3, &mut rng))
                .collect::<Vec<_>>()
        };
        let a = draw(7);
        assert_eq!(a, draw(7));
        // The three largest logits are the 6s at 6, 13 and 20 (lowest ids first).
        assert!(a.iter().all(|t| [6, 13, 20].contains(t)), "{a:?}");
        assert!([6, 13, 20].iter().all(|t| a.contains(t)));
    }
}
