//! The CPU signal processing behind the audio steps: resampling (rubato's sinc resampler),
//! Whisper's log-mel front end (realfft), and Silero VAD's speech segments from per-chunk
//! probabilities. The steps (`pipeline::steps::audio`) are built from these.
pub mod logmel;
pub mod resample;
pub mod segments;

pub use logmel::{log_mel, mel_filters, LogMelError, WHISPER_FRAMES, WHISPER_SAMPLES};
pub use resample::{resample, ResampleError};
pub use segments::{speech_segments, SegmentRules};
