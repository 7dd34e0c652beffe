//! Sample-rate conversion with rubato's asynchronous sinc resampler at its documented
//! high-quality defaults (`SincInterpolationParameters::default()`: a 256-tap windowed sinc,
//! Blackman-Harris² window, cutoff chosen to keep aliasing below the window's sidelobes,
//! 128× oversampling, cubic interpolation between the sinc points). The whole signal is
//! converted at once (`process_all`), and output sample `j` is the signal at `j / to_hz`
//! seconds: `ceil(len · to / from)` samples.
//!
//! rubato trims its filter delay in whole output samples (`output_delay()`: ⌊128 · ratio⌋), but
//! the delay is `sinc_len / 2` input samples less one output sample (128 · ratio − 1), rarely a
//! whole number, which would shift the output by a fraction of a sample (0.13 at 22050 →
//! 16000 Hz). So the input gets the few leading zeros that make the delay whole, and the rest
//! of it is trimmed here. What is left is a lead of 1/128 input sample (one step of the sinc
//! table), at every ratio; the tests below measure it.
use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Async, FixedAsync, Resampler, SincInterpolationParameters};

/// Most output samples one conversion makes (an hour at 384 kHz): bounds the allocation.
pub const MAX_RESAMPLED: u64 = 384_000 * 3600;

/// Why audio could not be resampled.
#[derive(Debug, thiserror::Error)]
pub enum ResampleError {
    #[error("sample rate {0} Hz: rates must be 1..=384000 Hz")]
    Rate(u32),
    #[error("resampling {samples} samples from {from} Hz to {to} Hz would make more than {MAX_RESAMPLED}")]
    TooLong { samples: usize, from: u32, to: u32 },
    #[error("the resampler: {0}")]
    Construct(#[from] rubato::ResamplerConstructionError),
    #[error("the resampler: {0}")]
    Process(#[from] rubato::ResampleError),
    #[error("the resampler's buffer: {0}")]
    Buffer(#[from] rubato::audioadapter_buffers::SizeError),
}

/// `samples` at `from` Hz, resampled to `to` Hz (a copy when the rates are equal).
pub fn resample(samples: &[f32], from: u32, to: u32) -> Result<Vec<f32>, ResampleError> {
    for r in [from, to] {
        if !(1..=384_000).contains(&r) {
            return Err(ResampleError::Rate(r));
        }
    }
    if from == to || samples.is_empty() {
        return Ok(samples.to_vec());
    }
    let out_len = (samples.len() as u64 * to as u64).div_ceil(from as u64);
    if out_len > MAX_RESAMPLED {
        return Err(ResampleError::TooLong {
            samples: samples.len(),
            from,
            to,
        });
    }
    let ratio = to as f64 / from as f64;
    let params = SincInterpolationParameters::default();
    let mut r = Async::<f32>::new_sinc(ratio, 1.0, &params, 1024, 1, FixedAsync::Input)?;
    // The leading zeros `lead` that make the delay (128 + lead) · ratio − 1 a whole number of
    // output samples, `whole` of which are left after rubato's trim.
    let half = (params.sinc_len / 2) as u64;
    let m = from as u64 / gcd(from as u64, to as u64);
    let trimmed = r.output_delay() as u64;
    let mut lead = (m - half % m) % m;
    while (half + lead) * to as u64 / (from as u64) < trimmed + 1 {
        lead += m;
    }
    let whole = ((half + lead) * to as u64 / from as u64 - 1 - trimmed) as usize;
    let lead = lead as usize;
    let mut padded = vec![0f32; lead + samples.len() + params.sinc_len];
    padded[lead..lead + samples.len()].copy_from_slice(samples);
    let input = InterleavedSlice::new(&padded, 1, padded.len())?;
    let mut out = r.process_all(&input, padded.len(), None)?.take_data();
    out.drain(..whole.min(out.len()));
    out.resize(out_len as usize, 0.0);
    Ok(out)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tone_keeps_its_frequency_and_level() {
        let (from, to) = (22_050u32, 16_000u32);
        let f = 440.0f64;
        let x: Vec<f32> = (0..22_050)
            .map(|n| (2.0 * std::f64::consts::PI * f * n as f64 / from as f64).sin() as f32 * 0.5)
            .collect();
        let y = resample(&x, from, to).unwrap();
        assert_eq!(y.len(), 16_000);
        // Away from the edges the output is the same tone sampled at 16 kHz.
        let worst = (2000..14_000)
            .map(|n| {
                let want = (2.0 * std::f64::consts::PI * f * n as f64 / to as f64).sin() * 0.5;
                (y[n] as f64 - want).abs()
            })
            .fold(0.0, f64::max);
        assert!(worst < 1e-3, "worst {worst}");
        // Upsampling keeps the timing too.
        let z = resample(&y, to, 48_000).unwrap();
        assert_eq!(z.len(), 48_000);
        let worst = (6000..42_000)
            .map(|n| {
                let want = (2.0 * std::f64::consts::PI * f * n as f64 / 48_000.0).sin() * 0.5;
                (z[n] as f64 - want).abs()
            })
            .fold(0.0, f64::max);
        assert!(worst < 2e-3, "worst {worst}");
    }

    /// The phase of a 1 kHz tone after resampling: the output's lag behind the ideal, in input
    /// samples, and its gain.
    fn lag_and_gain(from: u32, to: u32) -> (f64, f64) {
        let f = 1000.0f64;
        let w = |n: usize, rate: u32| 2.0 * std::f64::consts::PI * f * n as f64 / rate as f64;
        let x: Vec<f32> = (0..from as usize * 2)
            .map(|n| w(n, from).sin() as f32)
            .collect();
        let y = resample(&x, from, to).unwrap();
        let n = y.len();
        let (mut s, mut c) = (0.0, 0.0);
        for (j, &v) in y.iter().enumerate().take(3 * n / 4).skip(n / 4) {
            s += v as f64 * w(j, to).sin();
            c += v as f64 * w(j, to).cos();
        }
        let lag_out = (-c).atan2(s) / (2.0 * std::f64::consts::PI * f) * to as f64;
        (
            lag_out * from as f64 / to as f64,
            (s * s + c * c).sqrt() / (n as f64 / 4.0),
        )
    }

    #[test]
    fn the_output_is_aligned_to_the_input_at_every_ratio() {
        for (from, to) in [
            (22_050, 16_000),
            (44_100, 16_000),
            (48_000, 16_000),
            (8_000, 16_000),
            (16_000, 48_000),
            (11_025, 16_000),
        ] {
            let (lag, gain) = lag_and_gain(from, to);
            assert!(
                (lag + 1.0 / 128.0).abs() < 1e-3,
                "{from} -> {to}: lag {lag} input samples"
            );
            assert!((gain - 1.0).abs() < 1e-4, "{from} -> {to}: gain {gain}");
        }
    }

    #[test]
    fn bad_rates_are_errors() {
        assert!(matches!(
            resample(&[0.0], 0, 16_000),
            Err(ResampleError::Rate(0))
        ));
        assert_eq!(resample(&[0.25], 16_000, 16_000).unwrap(), vec![0.25]);
    }
}
