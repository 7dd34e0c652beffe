//! Temp files of the packed writer's atomic rename (`.NAME.tmpPID.N` next to the target): the ones
//! being written right now, so that an interrupted process can remove them, and the sweep of
//! those left behind by writers that died (killed before the interrupt handler ran).
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Temp files this process is writing; each removed from the list once renamed or removed.
static IN_PROGRESS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The temp file a writer of `target` with process id `pid` uses: numbered per write, since two
/// engines in one process may compile the same model at once.
pub fn temp_path(target: &Path, pid: u32) -> PathBuf {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir_of(target).join(format!("{}{pid}.{n}", temp_prefix(target)))
}

fn dir_of(target: &Path) -> &Path {
    target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn temp_prefix(target: &Path) -> String {
    let name = target
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    format!(".{name}.tmp")
}

/// A temp file registered as in progress for as long as the guard lives.
pub(crate) struct InProgress {
    path: PathBuf,
}

impl InProgress {
    pub(crate) fn register(path: &Path) -> InProgress {
        lock().push(path.to_path_buf());
        InProgress {
            path: path.to_path_buf(),
        }
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        lock().retain(|p| p != &self.path);
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic while the list was held leaves it intact (pushes and retains are atomic enough).
    IN_PROGRESS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes every temp file this process is writing. For the CLI's interrupt handler, which runs
/// on its own thread (not in signal context) and exits right after; a writer still going gets
/// an I/O error at its rename.
pub fn remove_in_progress() -> usize {
    lock()
        .drain(..)
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

/// Removes the temp files next to `target` whose writer process no longer exists (a writer
/// killed mid-write, e.g. by SIGKILL or a power cut). Returns how many it removed. Files of live
/// processes, including this one, are left alone; errors reading the directory are ignored
/// (the write that follows reports its own).
pub fn remove_stale(target: &Path) -> usize {
    let prefix = temp_prefix(target);
    let Ok(entries) = std::fs::read_dir(dir_of(target)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .map(|rest| rest.split('.').next().unwrap_or(rest))
            .and_then(|digits| digits.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id()
            && !process_alive(pid)
            && std::fs::remove_file(entry.path()).is_ok()
        {
            log::info!("removed stale temp file {}", entry.path().display());
            removed += 1;
        }
    }
    removed
}

/// Whether a process with this id exists (signal 0 checks without sending anything; EPERM
/// means it exists but belongs to someone else).
fn process_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(e) => e != nix::errno::Errno::ESRCH,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_progress_files_are_removed_and_stale_ones_swept() {
        let dir = std::env::temp_dir().join(format!("texstream-temp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("m.tspk");
        let mine = temp_path(&target, std::process::id());
        std::fs::write(&mine, b"partial").unwrap();
        // (Not `remove_in_progress`: it would take other tests' temp files too.)
        let guard = InProgress::register(&mine);
        assert!(lock().contains(&mine));
        drop(guard);
        assert!(!lock().contains(&mine));
        std::fs::remove_file(&mine).unwrap();
        // A child that has exited and been reaped is a dead writer.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = temp_path(&target, dead);
        std::fs::write(&stale, b"partial").unwrap();
        let live = temp_path(&target, 1);
        std::fs::write(&live, b"partial").unwrap();
        let other = dir.join(".other.tspk.tmp7");
        std::fs::write(&other, b"partial").unwrap();
        assert_eq!(remove_stale(&target), 1);
        assert!(!stale.exists() && live.exists() && other.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
