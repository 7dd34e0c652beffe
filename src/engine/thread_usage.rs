//! The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), and from
//! `getrusage(RUSAGE_THREAD)` its time in the kernel, minor page faults and context switches, to
//! tell a host phase that computes from one that waits: recording that takes longer under
//! streaming than resident, for the same steps, either burns more CPU (in the driver, or in the
//! kernel for it) or blocks somewhere.
//!
//! [`process_threads`] reads every thread of the process from `/proc` (Linux): its CPU time,
//! its wait for a core, the core it last ran on and how often it moved, to tell whether the
//! engine's threads crowd one another's cores.

use nix::sys::resource::{getrusage, UsageWho};
use nix::time::{clock_gettime, ClockId};

/// A reading of the thread's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadUsage {
    /// User plus system CPU time, seconds.
    pub cpu_s: f64,
    /// Of it, the time in the kernel (system calls, page faults), seconds.
    pub sys_s: f64,
    /// Page faults served without I/O (first touches of fresh memory among them).
    pub minor_faults: u64,
    /// Times the thread gave up the CPU to wait (a lock, a syscall that blocks).
    pub waits: u64,
    /// Times the scheduler took the CPU from it.
    pub preempted: u64,
}

impl ThreadUsage {
    /// Now, or zeros where the platform does not say.
    pub fn now() -> ThreadUsage {
        let cpu_s = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
            .map_or(0.0, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9);
        match getrusage(UsageWho::RUSAGE_THREAD) {
            Ok(u) => ThreadUsage {
                cpu_s,
                sys_s: {
                    let t = u.system_time();
                    t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6
                },
                minor_faults: u.minor_page_faults().max(0) as u64,
                waits: u.voluntary_context_switches().max(0) as u64,
                preempted: u.involuntary_context_switches().max(0) as u64,
            },
            Err(_) => ThreadUsage {
                cpu_s,
                ..ThreadUsage::default()
            },
        }
    }

    /// What changed from `earlier` to `self`.
    pub fn since(&self, earlier: &ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            cpu_s: (self.cpu_s - earlier.cpu_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            waits: self.waits.saturating_sub(earlier.waits),
            preempted: self.preempted.saturating_sub(earlier.preempted),
        }
    }
}

/// One of the process's threads, as `/proc/self/task` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadCpu {
    /// The thread's name (at most 15 bytes: the kernel cuts longer ones).
    pub name: String,
    /// Time on a core since the thread started, seconds (`schedstat`).
    pub cpu_s: f64,
    /// Time it was runnable but waited for a core, seconds (`schedstat`).
    pub run_delay_s: f64,
    /// The core it ran on last (`stat`, field 39).
    pub last_core: Option<u32>,
    /// Times it moved to another core (`sched`; absent where the kernel does not say).
    pub migrations: Option<u64>,
}

impl ThreadCpu {
    fn read(task: &std::path::Path) -> Option<ThreadCpu> {
        let name = std::fs::read_to_string(task.join("comm")).ok()?;
        let schedstat = std::fs::read_to_string(task.join("schedstat")).ok()?;
        let mut fields = schedstat.split_whitespace().map(|f| f.parse::<u64>().ok());
        let cpu_ns = fields.next()??;
        let run_delay_ns = fields.next()??;
        // The name in `stat` is in parentheses and may hold spaces: count fields after it.
        let stat = std::fs::read_to_string(task.join("stat")).ok()?;
        let last_core = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(36)?.parse().ok());
        let migrations = std::fs::read_to_string(task.join("sched"))
            .ok()
            .and_then(|sched| {
                sched.lines().find_map(|l| {
                    let (key, value) = l.split_once(':')?;
                    (key.trim() == "se.nr_migrations").then(|| value.trim().parse().ok())?
                })
            });
        Some(ThreadCpu {
            name: name.trim_end().to_string(),
            cpu_s: cpu_ns as f64 * 1e-9,
            run_delay_s: run_delay_ns as f64 * 1e-9,
            last_core,
            migrations,
        })
    }
}

/// Every thread of this process that `/proc/self/task` lists and lets read, in thread-id order;
/// empty where there is no `/proc`. Threads that end while it reads are left out.
pub fn process_threads() -> Vec<ThreadCpu> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut tasks: Vec<(u64, std::path::PathBuf)> = dir
        .filter_map(|e| {
            let e = e.ok()?;
            Some((e.file_name().to_str()?.parse().ok()?, e.path()))
        })
        .collect();
    tasks.sort();
    tasks
        .iter()
        .filter_map(|(_, p)| ThreadCpu::read(p))
        .collect()
}

/// One line for the engine's threads (named `texstream-*`) that ran at least a millisecond and
/// any other thread (the caller's, the driver's) that ran 10: CPU ms, the core last run on, the
/// wait for a core and the moves between cores. Empty where no thread could be read.
pub fn threads_line(threads: &[ThreadCpu]) -> String {
    let worth_a_mention = |t: &&ThreadCpu| {
        let least_s = if t.name.starts_with("texstream-") {
            1e-3
        } else {
            1e-2
        };
        t.cpu_s >= least_s
    };
    let parts: Vec<String> = threads
        .iter()
        .filter(worth_a_mention)
        .map(|t| {
            let core = t.last_core.map_or("?".into(), |c| c.to_string());
            let moves = match t.migrations {
                None => String::new(),
                Some(1) => ", 1 move".into(),
                Some(m) => format!(", {m} moves"),
            };
            format!(
                "{} {:.0} ms on core {core} (waited {:.1} ms{moves})",
                t.name,
                t.cpu_s * 1e3,
                t.run_delay_s * 1e3
            )
        })
        .collect();
    if parts.is_empty() {
        // No `/proc` (not Linux): nothing to say.
        return String::new();
    }
    format!("threads (CPU since start): {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins until the calling thread's own clock has moved 20 ms (on a loaded machine 30 ms of
    /// wall time gave it 5 ms of CPU), or 5 s have passed: a clock that never counts fails the
    /// caller's check.
    fn spin_20ms_of_cpu() {
        let (a, t) = (ThreadUsage::now(), std::time::Instant::now());
        let mut x = 0u64;
        while ThreadUsage::now().since(&a).cpu_s < 0.02 && t.elapsed().as_secs() < 5 {
            for _ in 0..10_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
        }
        std::hint::black_box(x);
    }

    #[test]
    fn a_busy_loop_counts_cpu_time_and_a_sleep_a_wait() {
        let a = ThreadUsage::now();
        spin_20ms_of_cpu();
        let b = ThreadUsage::now();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let c = ThreadUsage::now();
        assert!(b.since(&a).cpu_s >= 0.02, "{:?}", b.since(&a));
        assert!(c.since(&b).waits >= 1, "{:?}", c.since(&b));
        assert!(c.since(&b).cpu_s < 0.004, "{:?}", c.since(&b));
        // Touching fresh pages faults them in, in the kernel: 16 384 faults of 4 KiB, or 32 where
        // transparent huge pages back the vector; the kernel's share is part of the CPU time
        // (with tick-based accounting it may read 0 for so short a burst).
        let d = ThreadUsage::now();
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        let e = ThreadUsage::now().since(&d);
        assert!(e.minor_faults >= 32 && e.sys_s <= e.cpu_s + 1e-3, "{e:?}");
    }

    #[test]
    fn a_named_busy_thread_shows_its_cpu_time_and_core() {
        let spin = std::thread::Builder::new()
            .name("texstream-probe".into())
            .spawn(|| {
                spin_20ms_of_cpu();
                // Read while alive: the kernel drops an ended thread's entry.
                process_threads()
            })
            .expect("spawn");
        let threads = spin.join().expect("join");
        let probe = threads
            .iter()
            .find(|t| t.name == "texstream-probe")
            .unwrap_or_else(|| panic!("not listed: {threads:?}"));
        // schedstat counts nanoseconds on a core; the busy loop ran 20 ms of its own clock.
        assert!(probe.cpu_s > 0.015 && probe.cpu_s < 6.0, "{probe:?}");
        assert!(probe.last_core.is_some(), "{probe:?}");
        let line = threads_line(&threads);
        assert!(line.contains("texstream-probe"), "{line}");
    }
}
