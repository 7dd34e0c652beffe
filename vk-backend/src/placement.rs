//! Which host cores the threads that drive a device run on ([`ThreadPlacement`]).
//!
//! A device's interrupts land on the cores its MSI vectors are routed to. On a virtual machine
//! with a passed-through GPU (the H100s of session 52, 16 vCPUs under KVM) a thread sharing the
//! vCPU that took the GPU's 6-7 thousand interrupts a second needed two (the recording thread)
//! to five (the copy thread) times its CPU time, and a streamed run whose recording thread the
//! scheduler happened to put there ran at up to 1.6× its bound instead of 1.1-1.2×. So the
//! threads that record, submit and copy keep off the cores that service the device's busy
//! interrupt vectors, as long as that leaves them at least [`MIN_CORES_LEFT`] cores, and follow
//! the vectors if a balancer moves them ([`ThreadPlacement::refresh`]).
//!
//! Linux only (sysfs, procfs and `sched_setaffinity`); elsewhere, and for devices without a
//! PCI address (lavapipe), nothing is avoided.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A PCI function's address (`VK_EXT_pci_bus_info`), written as sysfs names it:
/// `0000:00:06.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciAddress {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// Fewer cores than this left after avoiding the interrupts' cores: avoid nothing (the threads
/// would queue behind each other instead).
pub const MIN_CORES_LEFT: usize = 2;

/// How often [`ThreadPlacement::refresh`] reads the interrupts' cores again: a balancer such as
/// `irqbalance` may move a vector while a service runs for hours.
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// Where a device's host threads run, as read once: every core the process may use, less those
/// servicing the device's interrupts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPlacement {
    /// Cores the device's busy interrupt vectors are routed to, sorted.
    pub interrupt_cores: Vec<usize>,
    /// Cores the device's threads are kept to; empty: every core the process may use.
    pub thread_cores: Vec<usize>,
}

impl HostPlacement {
    fn from_parts(
        interrupt_cores: Vec<usize>,
        allowed: &[usize],
        avoid: bool,
        min_left: usize,
    ) -> HostPlacement {
        let rest: Vec<usize> = allowed
            .iter()
            .copied()
            .filter(|c| !interrupt_cores.contains(c))
            .collect();
        let useful = avoid && rest.len() < allowed.len() && rest.len() >= min_left.max(1);
        HostPlacement {
            interrupt_cores,
            thread_cores: if useful { rest } else { Vec::new() },
        }
    }

    /// One line for a run's report: what was avoided, or why not.
    pub fn describe(&self) -> String {
        let list = |v: &[usize]| {
            v.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        match (
            self.interrupt_cores.is_empty(),
            self.thread_cores.is_empty(),
        ) {
            (true, _) => "no device interrupt cores found".into(),
            (false, false) => format!(
                "engine threads kept off core {} (the device's interrupts)",
                list(&self.interrupt_cores)
            ),
            (false, true) => format!(
                "the device's interrupts on core {}; engine threads not kept off them",
                list(&self.interrupt_cores)
            ),
        }
    }
}

/// Where a placement reads a device's interrupts instead of the device's own PCI address and
/// the machine's `/sys` and `/proc` (for tests: lavapipe has no PCI address, and a two-core CI
/// machine leaves one core).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptSource {
    pub pci: PciAddress,
    /// The roots standing in for `/sys` and `/proc`.
    pub sys: PathBuf,
    pub proc: PathBuf,
    /// The fewest cores the threads must keep ([`MIN_CORES_LEFT`] on a real machine).
    pub min_cores_left: usize,
}

/// A device's placement kept current: the threads placed by it, and the interrupt cores read
/// again every [`REFRESH_EVERY`] ([`ThreadPlacement::refresh`]), the threads moved if they
/// changed. One per device; its threads hold a [`PlacedThread`] while they run.
#[derive(Debug)]
pub struct ThreadPlacement {
    pci: Option<PciAddress>,
    sys: PathBuf,
    proc: PathBuf,
    /// The cores the process could use when the device opened.
    allowed: Vec<usize>,
    avoid: bool,
    min_left: usize,
    refresh_every: Duration,
    state: Mutex<PlacementState>,
}

#[derive(Debug)]
struct PlacementState {
    current: HostPlacement,
    /// Kernel thread ids of the live placed threads.
    threads: Vec<i32>,
    read_at: Instant,
}

impl ThreadPlacement {
    /// The placement for a device at `pci` (or none: nothing is avoided), from the machine's
    /// sysfs and procfs and the cores the calling thread may use. `avoid`: keep threads off the
    /// interrupts' cores (false: only report them).
    /// `source` replaces the device's own address and the machine's roots (tests).
    pub fn for_device(
        pci: Option<PciAddress>,
        avoid: bool,
        source: Option<&InterruptSource>,
    ) -> Arc<ThreadPlacement> {
        match source {
            Some(s) => Self::with_roots(
                Some(s.pci),
                &s.sys,
                &s.proc,
                current_thread_cores(),
                avoid,
                s.min_cores_left,
                REFRESH_EVERY,
            ),
            None => Self::with_roots(
                pci,
                Path::new(SYS),
                Path::new(PROC),
                current_thread_cores(),
                avoid,
                MIN_CORES_LEFT,
                REFRESH_EVERY,
            ),
        }
    }

    fn with_roots(
        pci: Option<PciAddress>,
        sys: &Path,
        proc: &Path,
        allowed: Vec<usize>,
        avoid: bool,
        min_left: usize,
        refresh_every: Duration,
    ) -> Arc<ThreadPlacement> {
        let p = ThreadPlacement {
            pci,
            sys: sys.to_path_buf(),
            proc: proc.to_path_buf(),
            allowed,
            avoid,
            min_left,
            refresh_every,
            state: Mutex::new(PlacementState {
                current: HostPlacement::default(),
                threads: Vec::new(),
                read_at: Instant::now(),
            }),
        };
        p.state.lock().current = p.read();
        Arc::new(p)
    }

    fn read(&self) -> HostPlacement {
        let cores = match self.pci {
            Some(a) => interrupt_cores(&self.sys, &self.proc, a),
            None => Vec::new(),
        };
        HostPlacement::from_parts(cores, &self.allowed, self.avoid, self.min_left)
    }

    /// The placement as last read.
    pub fn current(&self) -> HostPlacement {
        self.state.lock().current.clone()
    }

    /// Keeps the calling thread to the placement's cores, now and after every change
    /// [`ThreadPlacement::refresh`] finds, until the returned guard drops. Failures are logged,
    /// not returned: placement only ever helps.
    pub fn place_current_thread(self: &Arc<Self>) -> PlacedThread {
        let tid = current_thread_id();
        let mut st = self.state.lock();
        if let Some(tid) = tid {
            // Unplaced, a new thread keeps the cores it inherited.
            if !st.current.thread_cores.is_empty() {
                self.apply(tid, &st.current);
            }
            st.threads.push(tid);
        }
        PlacedThread {
            placement: self.clone(),
            tid,
        }
    }

    /// Reads the interrupts' cores again if [`REFRESH_EVERY`] has passed, and moves every
    /// placed thread if the placement changed. Cheap otherwise (a clock read); the engine calls
    /// it before each request. Returns whether the placement changed.
    pub fn refresh(&self) -> bool {
        let mut st = self.state.lock();
        if st.read_at.elapsed() < self.refresh_every {
            return false;
        }
        st.read_at = Instant::now();
        let next = self.read();
        if next == st.current {
            return false;
        }
        log::info!(
            "texstream: the device's interrupts moved: {} (was: {})",
            next.describe(),
            st.current.describe()
        );
        for &tid in &st.threads {
            self.apply(tid, &next);
        }
        st.current = next;
        true
    }

    /// Keeps thread `tid` of this process to `p`'s cores, or lets it use every core the
    /// process could when `p` avoids nothing.
    fn apply(&self, tid: i32, p: &HostPlacement) {
        let cores = if p.thread_cores.is_empty() {
            &self.allowed
        } else {
            &p.thread_cores
        };
        if cores.is_empty() {
            return;
        }
        if let Err(e) = set_thread_cores(tid, cores) {
            log::warn!("texstream: cannot keep a thread off the device's interrupt cores: {e}");
        }
    }
}

/// A thread kept to a [`ThreadPlacement`]'s cores; dropping it (as the thread ends) stops the
/// placement from moving it, so a later thread that reuses its id is never touched.
#[derive(Debug)]
pub struct PlacedThread {
    placement: Arc<ThreadPlacement>,
    tid: Option<i32>,
}

impl Drop for PlacedThread {
    fn drop(&mut self) {
        if let Some(tid) = self.tid {
            self.placement.state.lock().threads.retain(|&t| t != tid);
        }
    }
}

/// The machine's sysfs and procfs roots.
const SYS: &str = "/sys";
const PROC: &str = "/proc";

/// [`interrupt_cores`] of the device at `pci` on this machine.
pub fn machine_interrupt_cores(pci: PciAddress) -> Vec<usize> {
    interrupt_cores(Path::new(SYS), Path::new(PROC), pci)
}

/// A vector that has taken this many interrupts since boot shows which of the device's vectors
/// the driver really uses; below it (a machine just started) every vector counts.
pub const BUSY_VECTOR_MIN: u64 = 1000;

/// The cores the device at `pci`'s busy interrupt vectors are routed to, read from `sys` and
/// `proc` (the roots of sysfs and procfs; tests point them at a copy): each vector in
/// `bus/pci/devices/ADDR/msi_irqs/` (or the legacy `irq`), its core from
/// `irq/N/effective_affinity_list` (`smp_affinity_list` where the kernel has no effective one).
/// A driver may set up many vectors and use one (the H100's eight, on eight cores, and only the
/// first fired): where `interrupts` shows a vector past [`BUSY_VECTOR_MIN`], only the vectors
/// with at least a tenth of the busiest one's count are kept. Unreadable entries are skipped.
pub fn interrupt_cores(sys: &Path, proc: &Path, pci: PciAddress) -> Vec<usize> {
    let dev = sys.join("bus/pci/devices").join(pci.to_string());
    let mut irqs: Vec<u32> = std::fs::read_dir(dev.join("msi_irqs"))
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    if irqs.is_empty() {
        if let Some(n) = read_trimmed(&dev.join("irq")).and_then(|s| s.parse().ok()) {
            irqs.push(n);
        }
    }
    irqs.retain(|&n| n > 0);
    let counts = std::fs::read_to_string(proc.join("interrupts"))
        .map(|t| interrupt_counts(&t))
        .unwrap_or_default();
    let count = |n: u32| counts.get(&n).copied().unwrap_or(0);
    let busiest = irqs.iter().map(|&n| count(n)).max().unwrap_or(0);
    if busiest >= BUSY_VECTOR_MIN {
        irqs.retain(|&n| count(n) >= busiest / 10);
    }
    let mut cores: Vec<usize> = Vec::new();
    for irq in irqs {
        let dir = proc.join("irq").join(irq.to_string());
        let list = read_trimmed(&dir.join("effective_affinity_list"))
            .filter(|s| !s.is_empty())
            .or_else(|| read_trimmed(&dir.join("smp_affinity_list")));
        if let Some(l) = list {
            cores.extend(parse_cpu_list(&l));
        }
    }
    cores.sort_unstable();
    cores.dedup();
    cores
}

/// Each numbered interrupt's count since boot, summed over cores, from `/proc/interrupts`'
/// text (a header of CPU names, then `N: count count ... description` rows).
pub fn interrupt_counts(text: &str) -> std::collections::HashMap<u32, u64> {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |h| h.split_whitespace().count());
    lines
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let n = parts.next()?.strip_suffix(':')?.parse::<u32>().ok()?;
            let total = parts.take(cpus).map_while(|c| c.parse::<u64>().ok()).sum();
            Some((n, total))
        })
        .collect()
}

fn read_trimmed(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// A kernel CPU list (`0-3,8,10-11`) as cores; malformed parts are skipped.
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    // Bounded: a CPU list never names more cores than the machine has.
                    if b >= a && b - a < 65_536 {
                        out.extend(a..=b);
                    }
                }
            }
            None => out.extend(part.parse::<usize>().ok()),
        }
    }
    out
}

/// The cores the calling thread may run on (empty where that cannot be read).
pub fn current_thread_cores() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{sched_getaffinity, CpuSet};
        use nix::unistd::Pid;
        match sched_getaffinity(Pid::from_raw(0)) {
            Ok(set) => (0..CpuSet::count())
                .filter(|&c| set.is_set(c).unwrap_or(false))
                .collect(),
            Err(_) => Vec::new(),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

/// This thread's kernel id (what `sched_setaffinity` takes for one thread).
fn current_thread_id() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        Some(nix::unistd::gettid().as_raw())
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(target_os = "linux")]
fn set_thread_cores(tid: i32, cores: &[usize]) -> nix::Result<()> {
    use nix::sched::{sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    for &c in cores {
        set.set(c)?;
    }
    sched_setaffinity(Pid::from_raw(tid), &set)
}

#[cfg(not(target_os = "linux"))]
fn set_thread_cores(_tid: i32, _cores: &[usize]) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: PciAddress = PciAddress {
        domain: 0,
        bus: 0,
        device: 6,
        function: 0,
    };

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpu_list("14"), vec![14]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
        assert_eq!(parse_cpu_list("x,3-1,5"), vec![5]);
    }

    #[test]
    fn pci_addresses_print_as_sysfs_names_them() {
        assert_eq!(GPU.to_string(), "0000:00:06.0");
        let a = PciAddress {
            domain: 1,
            bus: 0xa1,
            device: 0x1f,
            function: 7,
        };
        assert_eq!(a.to_string(), "0001:a1:1f.7");
    }

    /// A fake sysfs and procfs: the device's three MSI vectors, routed to core 14, core 3 (no
    /// effective list: its smp list) and core 7, and an unrelated interrupt on core 5.
    fn fake_machine(tag: &str, counts: [u64; 3]) -> (std::path::PathBuf, std::path::PathBuf) {
        let root = std::env::temp_dir().join(format!("ts-placement-{tag}-{}", std::process::id()));
        let (sys, proc) = (root.join("sys"), root.join("proc"));
        let msi = sys.join("bus/pci/devices/0000:00:06.0/msi_irqs");
        std::fs::create_dir_all(&msi).unwrap();
        let vectors = [
            (45, Some("14"), "0-15"),
            (46, None, "3"),
            (47, Some("7"), "0-15"),
        ];
        for (irq, eff, smp) in vectors.into_iter().chain([(48, Some("5"), "5")]) {
            let d = proc.join("irq").join(irq.to_string());
            std::fs::create_dir_all(&d).unwrap();
            if let Some(e) = eff {
                std::fs::write(d.join("effective_affinity_list"), format!("{e}\n")).unwrap();
            }
            std::fs::write(d.join("smp_affinity_list"), format!("{smp}\n")).unwrap();
        }
        for (irq, ..) in vectors {
            std::fs::write(msi.join(irq.to_string()), "msix\n").unwrap();
        }
        let mut text = String::from("           CPU0       CPU1\n");
        for ((irq, ..), c) in vectors.iter().zip(counts) {
            text += &format!(
                " {irq}: {} {}  PCI-MSIX-0000:00:06.0 0-edge nvidia\n",
                c / 2,
                c - c / 2
            );
        }
        text +=
            " 48: 99999 0  PCI-MSIX-0000:00:01.0 0-edge virtio\nLOC: 5 5 Local timer interrupts\n";
        std::fs::write(proc.join("interrupts"), text).unwrap();
        (root, sys)
    }

    #[test]
    fn interrupt_cores_follow_the_devices_busy_vectors() {
        // A machine just started: every vector's core.
        let (root, sys) = fake_machine("fresh", [12, 0, 3]);
        let proc = root.join("proc");
        assert_eq!(interrupt_cores(&sys, &proc, GPU), vec![3, 7, 14]);
        let other = PciAddress { device: 7, ..GPU };
        assert!(interrupt_cores(&sys, &proc, other).is_empty());
        std::fs::remove_dir_all(&root).unwrap();
        // After a run: only the vectors the driver used (a tenth of the busiest or more).
        let (root, sys) = fake_machine("used", [102_879, 12, 20_000]);
        assert_eq!(interrupt_cores(&sys, &root.join("proc"), GPU), vec![7, 14]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The H100 virtual machine of session 52 after 17 streamed processes: its eight vectors
    /// (42-49) sit on cores 14, 15 and 0-5, and only the first fired (about 1.9 M times), so
    /// only core 14 is avoided.
    #[test]
    fn the_h100_machines_interrupts_avoid_only_core_14() {
        let (root, sys) = fake_machine("h100", [0, 0, 0]);
        let proc = root.join("proc");
        let msi = sys.join("bus/pci/devices/0000:00:06.0/msi_irqs");
        std::fs::remove_dir_all(&msi).unwrap();
        std::fs::create_dir_all(&msi).unwrap();
        for (irq, core) in (42..50).zip([14, 15, 0, 1, 2, 3, 4, 5]) {
            std::fs::write(msi.join(irq.to_string()), "msix\n").unwrap();
            let d = proc.join("irq").join(irq.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("effective_affinity_list"), format!("{core}\n")).unwrap();
        }
        let text = include_str!("../tests/data/h100-vm-interrupts.txt");
        std::fs::write(proc.join("interrupts"), text).unwrap();
        assert_eq!(interrupt_cores(&sys, &proc, GPU), vec![14]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn interrupt_counts_sum_each_numbered_row() {
        let text = "     CPU0 CPU1 CPU2\n 42: 1 2 3 PCI-MSIX nvidia\n 9: 4 0 0 IO-APIC acpi\nNMI: 1 1 1 Non-maskable\n";
        let c = interrupt_counts(text);
        assert_eq!(c.get(&42), Some(&6));
        assert_eq!(c.get(&9), Some(&4));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn threads_avoid_interrupt_cores_only_where_enough_are_left() {
        let all: Vec<usize> = (0..16).collect();
        let p = HostPlacement::from_parts(vec![14], &all, true, MIN_CORES_LEFT);
        assert_eq!(p.thread_cores.len(), 15);
        assert!(!p.thread_cores.contains(&14));
        assert!(p.describe().contains("kept off core 14"));
        // Asked not to: reported, not avoided.
        assert!(
            HostPlacement::from_parts(vec![14], &all, false, MIN_CORES_LEFT)
                .thread_cores
                .is_empty()
        );
        // Interrupts outside the allowed cores: nothing to avoid.
        assert!(
            HostPlacement::from_parts(vec![14], &[0, 1, 2], true, MIN_CORES_LEFT)
                .thread_cores
                .is_empty()
        );
        // Only one core would be left.
        assert!(
            HostPlacement::from_parts(vec![0], &[0, 1], true, MIN_CORES_LEFT)
                .thread_cores
                .is_empty()
        );
        assert_eq!(
            HostPlacement::from_parts(vec![], &all, true, MIN_CORES_LEFT).describe(),
            "no device interrupt cores found"
        );
    }

    /// A placed thread really runs only on the other cores, follows the interrupt when it
    /// moves, and is forgotten when its guard drops; the calling thread is never touched.
    #[cfg(target_os = "linux")]
    #[test]
    fn placed_threads_keep_off_the_interrupt_and_follow_it() {
        let allowed = current_thread_cores();
        assert!(!allowed.is_empty(), "this thread's cores could not be read");
        if allowed.len() < 2 {
            return; // one core: nothing to keep off
        }
        let root = std::env::temp_dir().join(format!("ts-placement-live-{}", std::process::id()));
        let (sys, proc) = (root.join("sys"), root.join("proc"));
        let msi = sys.join("bus/pci/devices/0000:00:06.0/msi_irqs");
        let vector = proc.join("irq/45");
        std::fs::create_dir_all(&msi).unwrap();
        std::fs::create_dir_all(&vector).unwrap();
        std::fs::write(msi.join("45"), "msix\n").unwrap();
        let route = |core: usize| {
            std::fs::write(vector.join("effective_affinity_list"), format!("{core}\n")).unwrap()
        };
        route(allowed[0]);
        // One core may be left (CI machines have two), and every refresh reads again.
        let p = ThreadPlacement::with_roots(
            Some(GPU),
            &sys,
            &proc,
            allowed.clone(),
            true,
            1,
            Duration::ZERO,
        );
        assert_eq!(p.current().interrupt_cores, vec![allowed[0]]);
        let (to_main, from_thread) = std::sync::mpsc::channel();
        let (to_thread, from_main) = std::sync::mpsc::channel::<()>();
        let placed = p.clone();
        let t = std::thread::spawn(move || {
            let _guard = placed.place_current_thread();
            to_main.send(current_thread_cores()).unwrap();
            from_main.recv().unwrap();
            to_main.send(current_thread_cores()).unwrap();
        });
        let first = from_thread.recv().unwrap();
        assert_eq!(first, allowed[1..].to_vec());
        // The interrupt moves to the next core: the thread follows.
        route(allowed[1]);
        assert!(p.refresh());
        assert!(!p.refresh(), "nothing changed since");
        to_thread.send(()).unwrap();
        let second = from_thread.recv().unwrap();
        assert!(second.contains(&allowed[0]) && !second.contains(&allowed[1]));
        t.join().unwrap();
        assert!(
            p.state.lock().threads.is_empty(),
            "an ended thread is forgotten"
        );
        assert_eq!(current_thread_cores(), allowed);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
