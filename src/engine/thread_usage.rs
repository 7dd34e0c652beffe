//! The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), and from
//! `getrusage(RUSAGE_THREAD)` its time in the kernel, minor page faults and context switches, to
//! tell a host phase that computes from one that waits: recording that takes longer under
//! streaming than resident, for the same steps, either burns more CPU (in the driver, or in the
//! kernel for it) or blocks somewhere.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_loop_counts_cpu_time_and_a_sleep_a_wait() {
        let a = ThreadUsage::now();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 30 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let b = ThreadUsage::now();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let c = ThreadUsage::now();
        assert!(b.since(&a).cpu_s > 0.01, "{:?}", b.since(&a));
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
}
