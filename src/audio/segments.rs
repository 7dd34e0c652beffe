//! Speech segments from per-chunk speech probabilities, by the rules of the silero-vad
//! package's `get_speech_timestamps` (without a maximum segment length):
//!
//! - speech starts at the first chunk whose probability is at least `threshold`;
//! - it ends where the probability falls below `neg_threshold` (default `threshold − 0.15`, at
//!   least 0.01) and stays below `threshold` for `min_silence_ms`; the end is where it fell;
//! - segments of `min_speech_ms` or less are dropped; one still open at the end of the audio
//!   ends there;
//! - each segment is widened by `speech_pad_ms` on each side, or, where two are closer than
//!   twice that, both are widened to meet halfway.

/// The rules' parameters, in silero-vad's units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SegmentRules {
    pub threshold: f32,
    pub neg_threshold: Option<f32>,
    pub min_speech_ms: u32,
    pub min_silence_ms: u32,
    pub speech_pad_ms: u32,
}

impl Default for SegmentRules {
    /// silero-vad's defaults.
    fn default() -> Self {
        SegmentRules {
            threshold: 0.5,
            neg_threshold: None,
            min_speech_ms: 250,
            min_silence_ms: 100,
            speech_pad_ms: 30,
        }
    }
}

/// The speech segments, as `[start, end)` sample ranges, of audio of `len` samples at `rate`
/// Hz whose chunks of `chunk` samples had the speech probabilities `probs`.
pub fn speech_segments(
    probs: &[f32],
    chunk: usize,
    len: usize,
    rate: u32,
    rules: &SegmentRules,
) -> Vec<(usize, usize)> {
    let ms = |v: u32| rate as f64 * v as f64 / 1000.0;
    let (min_speech, min_silence, pad) = (
        ms(rules.min_speech_ms),
        ms(rules.min_silence_ms),
        ms(rules.speech_pad_ms),
    );
    let neg = rules
        .neg_threshold
        .unwrap_or((rules.threshold - 0.15).max(0.01));
    let mut speeches: Vec<(usize, usize)> = Vec::new();
    let mut start: Option<usize> = None;
    // Where the probability last fell below `neg` during speech (0: not since speech rose).
    let mut temp_end = 0usize;
    for (i, &p) in probs.iter().enumerate() {
        let cur = chunk * i;
        if p >= rules.threshold && temp_end != 0 {
            temp_end = 0;
        }
        let Some(s) = start else {
            if p >= rules.threshold {
                start = Some(cur);
            }
            continue;
        };
        if p < neg {
            if temp_end == 0 {
                temp_end = cur;
            }
            if ((cur - temp_end) as f64) < min_silence {
                continue;
            }
            if (temp_end - s) as f64 > min_speech {
                speeches.push((s, temp_end));
            }
            start = None;
            temp_end = 0;
        }
    }
    if let Some(s) = start {
        if len.saturating_sub(s) as f64 > min_speech {
            speeches.push((s, len));
        }
    }
    // Padding (Python's int() of the float arithmetic, and // on the integer gaps).
    let n = speeches.len();
    for i in 0..n {
        if i == 0 {
            speeches[0].0 = (speeches[0].0 as f64 - pad).max(0.0) as usize;
        }
        if i + 1 < n {
            let gap = speeches[i + 1].0 - speeches[i].1;
            if (gap as f64) < 2.0 * pad {
                speeches[i].1 += gap / 2;
                speeches[i + 1].0 -= gap / 2;
            } else {
                speeches[i].1 = (speeches[i].1 as f64 + pad).min(len as f64) as usize;
                speeches[i + 1].0 = (speeches[i + 1].0 as f64 - pad).max(0.0) as usize;
            }
        } else {
            speeches[i].1 = (speeches[i].1 as f64 + pad).min(len as f64) as usize;
        }
    }
    speeches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_blips_are_dropped_and_close_segments_meet_halfway() {
        let r = SegmentRules::default();
        // 512-sample chunks at 16 kHz: 32 ms each. 0.1 s of speech is too short (≤ 250 ms).
        let mut p = vec![0.0f32; 10];
        p.extend([0.9; 3]);
        p.extend([0.0; 20]);
        assert!(speech_segments(&p, 512, p.len() * 512, 16_000, &r).is_empty());
        // Two long runs 5 chunks (160 ms > 100 ms of silence) apart: two segments, each
        // padded by 30 ms (480 samples).
        let mut p = vec![0.0f32; 5];
        p.extend([0.9; 10]);
        p.extend([0.0; 5]);
        p.extend([0.9; 10]);
        p.extend([0.0; 10]);
        let s = speech_segments(&p, 512, p.len() * 512, 16_000, &r);
        assert_eq!(
            s,
            vec![
                (5 * 512 - 480, 15 * 512 + 480),
                (20 * 512 - 480, 30 * 512 + 480)
            ]
        );
        // Silence shorter than 100 ms (3 chunks: 96 ms) does not split.
        let mut p = vec![0.9f32; 10];
        p.extend([0.0; 3]);
        p.extend([0.9; 10]);
        let s = speech_segments(&p, 512, p.len() * 512, 16_000, &r);
        assert_eq!(s, vec![(0, p.len() * 512)]);
        // Closer than twice the padding: they meet halfway. Two silent chunks (1024 samples)
        // end a segment under a 20 ms silence rule, and 40 ms of padding (640) each side
        // would overlap.
        let close = SegmentRules {
            min_silence_ms: 20,
            speech_pad_ms: 40,
            ..r
        };
        let mut p = vec![0.9f32; 10];
        p.extend([0.0; 2]);
        p.extend([0.9; 10]);
        let s = speech_segments(&p, 512, p.len() * 512, 16_000, &close);
        assert_eq!(s, vec![(0, 11 * 512), (11 * 512, p.len() * 512)]);
    }
}
