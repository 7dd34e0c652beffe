//! Hot reload: watches the directory of the workload file and of every model file it names
//! (editors save by writing a temp file and renaming it over the old one, which a watch on the
//! file itself would lose), debounces the events, and when the workload file or one of its
//! model sources really changed (length, modification time, inode, or for the workload file
//! its bytes) calls [`Engine::reload`]. A valid change is swapped in between requests; an
//! invalid one keeps the old plan serving and is logged, counted by the engine and shown at
//! `GET /v1/status` with its `file:line:col` or the model file and why.
//!
//! Only sources are compared: the packed files the engine compiles from ONNX sources are its
//! own output, so a reload that compiles does not trigger another one.
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use notify::RecursiveMode;
use notify_debouncer_full::{new_debouncer, DebounceEventResult};
use serde::Serialize;

use super::error::ServeError;
use crate::workload::{load_workload, ModelSource};
use crate::Engine;

/// What the watcher has seen, for `GET /v1/status`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WatchStatus {
    /// Directories watched.
    pub directories: Vec<PathBuf>,
    /// Files whose changes trigger a reload.
    pub files: Vec<PathBuf>,
    /// Reloads the watcher started.
    pub reloads_started: u64,
}

/// A running watcher; dropping it stops it.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub status: Arc<Mutex<WatchStatus>>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                log::error!("the reload watcher panicked");
            }
        }
    }
}

/// A file as (canonical directory, name), so the same file spelled two ways compares equal
/// and a deleted file can still be named.
type FileKey = (PathBuf, OsString);

fn key(path: &Path) -> Option<FileKey> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some((
        std::fs::canonicalize(dir).ok()?,
        path.file_name()?.to_owned(),
    ))
}

/// The workload file and the model sources it names (the ones a person edits or replaces).
fn sources(workload: &Path) -> Option<Vec<PathBuf>> {
    let w = load_workload(workload).ok()?;
    let mut files = vec![workload.to_path_buf()];
    for m in &w.spec.models {
        match &m.source {
            ModelSource::Onnx(p) | ModelSource::Packed(p) => files.push(w.resolve(p)),
            ModelSource::Synthetic(_) => {}
        }
    }
    Some(files)
}

/// What identifies a file's version: the workload file by its bytes, model files by length,
/// modification time and inode (they can be large).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Version {
    Missing,
    Bytes(Vec<u8>),
    Meta(u64, Option<SystemTime>, u64),
}

fn version(path: &Path, read_bytes: bool) -> Version {
    use std::os::unix::fs::MetadataExt;
    if read_bytes {
        return std::fs::read(path).map_or(Version::Missing, Version::Bytes);
    }
    match std::fs::metadata(path) {
        Ok(m) => Version::Meta(m.len(), m.modified().ok(), m.ino()),
        Err(_) => Version::Missing,
    }
}

/// Debounce periods an empty workload file is waited on before it is read (see `start`).
const EMPTY_WAITS: u32 = 10;

/// Starts watching `workload` for `engine`.
pub fn start(
    engine: Arc<Engine>,
    workload: &Path,
    debounce: Duration,
) -> Result<Watcher, ServeError> {
    let workload = std::path::absolute(workload).map_err(|e| ServeError::Watch {
        path: workload.to_path_buf(),
        source: notify::Error::io(e),
    })?;
    let (tx, rx) = mpsc::channel::<DebounceEventResult>();
    let mut debouncer = new_debouncer(debounce, None, tx).map_err(|source| ServeError::Watch {
        path: workload.clone(),
        source,
    })?;
    let status = Arc::new(Mutex::new(WatchStatus::default()));
    let mut state = State {
        workload: workload.clone(),
        files: Vec::new(),
        keys: BTreeSet::new(),
        dirs: BTreeSet::new(),
        seen: BTreeMap::new(),
    };
    state.refresh(
        &mut |d| debouncer.watch(d, RecursiveMode::NonRecursive),
        &status,
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_c = stop.clone();
    let status_c = status.clone();
    let thread = std::thread::Builder::new()
        .name("texstream-reload".into())
        .spawn(move || {
            while !stop_c.load(Ordering::Relaxed) {
                let events = match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(Ok(events)) => events,
                    Ok(Err(errors)) => {
                        for e in errors {
                            log::warn!("watching for workload changes: {e}");
                        }
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                };
                let relevant = events.iter().any(|e| {
                    e.paths.is_empty()
                        || e.paths
                            .iter()
                            .any(|p| key(p).is_some_and(|k| state.keys.contains(&k)))
                });
                if !relevant {
                    continue;
                }
                // A workload file rewritten in place is empty between its truncation and its
                // write, and a busy machine can stretch that past the debounce: wait while it
                // is empty, up to EMPTY_WAITS debounce periods (still empty then, it is
                // reloaded and refused like any other bad file).
                for _ in 0..EMPTY_WAITS {
                    if !std::fs::metadata(&state.workload).is_ok_and(|m| m.len() == 0) {
                        break;
                    }
                    std::thread::sleep(debounce);
                }
                // Versions are taken before the reload: a change made while it runs shows
                // up as a difference next time.
                let now = state.versions();
                if now == state.seen {
                    continue;
                }
                state.seen = now;
                lock(&status_c).reloads_started += 1;
                match engine.reload(&state.workload) {
                    Ok(()) => log::info!("reloaded {}", state.workload.display()),
                    Err(e) => log::warn!(
                        "reloading {} failed; the previous workload keeps serving: {e}",
                        state.workload.display()
                    ),
                }
                if let Err(e) = state.refresh(
                    &mut |d| debouncer.watch(d, RecursiveMode::NonRecursive),
                    &status_c,
                ) {
                    log::warn!("{e}");
                }
            }
            debouncer.stop();
        })
        .map_err(|e| ServeError::Watch {
            path: workload.clone(),
            source: notify::Error::io(e),
        })?;
    Ok(Watcher {
        stop,
        thread: Some(thread),
        status,
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The watcher thread's view of what to watch.
struct State {
    workload: PathBuf,
    /// The workload file first, then its model sources.
    files: Vec<PathBuf>,
    keys: BTreeSet<FileKey>,
    dirs: BTreeSet<PathBuf>,
    /// Versions of `files` when the last reload started (or the watcher did).
    seen: BTreeMap<PathBuf, Version>,
}

impl State {
    fn versions(&self) -> BTreeMap<PathBuf, Version> {
        self.files
            .iter()
            .map(|f| (f.clone(), version(f, *f == self.workload)))
            .collect()
    }

    /// Re-reads which files the workload names (keeping the old list while it does not parse)
    /// and watches any new directory.
    fn refresh(
        &mut self,
        watch: &mut dyn FnMut(&Path) -> notify::Result<()>,
        status: &Mutex<WatchStatus>,
    ) -> Result<(), ServeError> {
        match sources(&self.workload) {
            Some(files) => self.files = files,
            None if self.files.is_empty() => self.files = vec![self.workload.clone()],
            None => {}
        }
        self.keys = self.files.iter().filter_map(|f| key(f)).collect();
        // A file the workload names for the first time is taken as it is now.
        let now = self.versions();
        self.seen.retain(|f, _| now.contains_key(f));
        for (f, v) in now {
            self.seen.entry(f).or_insert(v);
        }
        for (dir, _) in self.keys.clone() {
            if self.dirs.contains(&dir) {
                continue;
            }
            watch(&dir).map_err(|source| ServeError::Watch {
                path: dir.clone(),
                source,
            })?;
            self.dirs.insert(dir);
        }
        let mut s = lock(status);
        s.directories = self.dirs.iter().cloned().collect();
        s.files = self.files.clone();
        Ok(())
    }
}
