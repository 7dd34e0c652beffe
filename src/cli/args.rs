//! What every subcommand shares: argument parsers (sizes, `NAME=VALUE` pairs), the check that an
//! output path can be written before any GPU work, and progress output (a spinner on a
//! terminal, a plain line per phase otherwise).
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// `--cap 24MiB`, `--page-size 1.5MiB`, `12MB`, `1048576`: the one size syntax.
pub fn parse_size_arg(s: &str) -> Result<u64, scheduler::PlanError> {
    scheduler::parse_size(s)
}

/// `NAME=PATH`.
pub fn parse_named_path(s: &str) -> Result<(String, PathBuf)> {
    match s.split_once('=') {
        Some((n, p)) if !n.is_empty() && !p.is_empty() => Ok((n.into(), PathBuf::from(p))),
        _ => bail!("`{s}` is not NAME=FILE"),
    }
}

/// `40us`, `6.1ms`, `1.5s` (µs also as `µs`): a duration in seconds.
pub fn parse_duration_arg(s: &str) -> Result<f64> {
    let t = s.trim();
    let (num, scale) = [("µs", 1e-6), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .iter()
        .find_map(|(u, k)| t.strip_suffix(u).map(|n| (n, *k)))
        .ok_or_else(|| anyhow::anyhow!("`{s}` is not a duration (e.g. 40us, 6.1ms, 1.5s)"))?;
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * scale),
        _ => bail!("`{s}` is not a duration (e.g. 40us, 6.1ms, 1.5s)"),
    }
}

/// `NAME=DURATION`, e.g. `lm=6.1ms`.
pub fn parse_named_duration(s: &str) -> Result<(String, f64)> {
    match s.split_once('=') {
        Some((n, d)) if !n.is_empty() => Ok((n.into(), parse_duration_arg(d)?)),
        _ => bail!("`{s}` is not NAME=DURATION (e.g. lm=6.1ms)"),
    }
}

/// Fails unless a file can be created at `path` (its folder exists and it is not a folder).
pub fn check_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!("{}: is a directory, not a file", path.display());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        bail!(
            "{}: the folder {} does not exist",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Fails unless `dir` is (or can be made) a folder.
pub fn check_output_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!("{}: exists and is not a folder", dir.display());
    }
    Ok(())
}

/// Says what a long command is doing: a spinner line on a terminal, one plain line per change
/// of phase on stderr otherwise.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    last: std::sync::Mutex<String>,
}

impl Progress {
    pub fn new() -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new_spinner();
            b.enable_steady_tick(std::time::Duration::from_millis(120));
            b
        });
        Progress {
            bar,
            last: std::sync::Mutex::new(String::new()),
        }
    }

    /// The current activity, e.g. "compiling model `det`" or "planned: request 3/4".
    pub fn say(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.set_message(msg.to_string()),
            None => {
                // Off a terminal: one line per phase (the text before the counter).
                let phase = msg.split(": request").next().unwrap_or(msg).to_string();
                let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
                if *last != phase {
                    eprintln!("{msg}");
                    *last = phase;
                }
            }
        }
    }

    /// Runs `f` with the spinner hidden (for printing).
    pub fn suspend<T>(&self, f: impl FnOnce() -> T) -> T {
        match &self.bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

/// `dir/name.svg` → `dir/name-POLICY.svg` (one file per policy of a comparison).
pub fn per_policy(path: &Path, policy: texstream::Policy) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "residency".into(), |s| s.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}-{}.svg", policy.name()))
}
