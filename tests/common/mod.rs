//! Helpers the integration tests share: the repository root, the reference venv's python, the
//! engine options of a test, and the cap check after an engine's requests.
// Each test binary uses some of these.
#![allow(dead_code)]
use std::path::PathBuf;

/// The repository root (the root package's manifest directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The python that runs the reference scripts (`TEXSTREAM_PYTHON`, else `.venv/bin/python`);
/// None, and a SKIPPED line, when there is none.
pub fn python() -> Option<PathBuf> {
    let p = std::env::var_os("TEXSTREAM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"));
    if !p.exists() {
        eprintln!("SKIPPED: no python venv (.venv/bin/python or TEXSTREAM_PYTHON)");
        return None;
    }
    Some(p)
}

/// Engine options for a test: the device the environment picks, `cap` (None: the workload's),
/// `policy`, and no calibration (plans keep the packed models' step costs).
pub fn opts(cap: Option<u64>, policy: texstream::Policy) -> texstream::EngineOptions {
    texstream::EngineOptions {
        cap,
        policy: Some(policy),
        calibrate_after: 0,
        ..texstream::EngineOptions::from_env()
    }
}

/// Asserts that the engine's device peak stayed within its cap, and prints what it streamed.
pub fn assert_cap_held(e: &texstream::Engine, what: &str) {
    let s = e.stats();
    assert!(
        s.peak_device_bytes <= s.cap_bytes,
        "{what}: peak {} over cap {}",
        s.peak_device_bytes,
        s.cap_bytes
    );
    eprintln!(
        "{what}: cap {} peak {} streamed {} B, {} re-plans",
        s.cap_bytes,
        s.peak_device_bytes,
        s.bytes_streamed,
        s.replans.total()
    );
}
