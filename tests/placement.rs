//! The engine keeps its threads off the device's interrupt cores (`vk_backend::placement`).
//! Lavapipe has no PCI address, so the device's interrupts are read from a stand-in sysfs and
//! procfs that route its one vector to the first core this process may use: the engine's
//! recording thread (`texstream-gpu`) and copy thread (`texstream-transfer`) must then be allowed
//! every other core and not that one (read back from `/proc/self/task/*/status`), and the stats
//! must say so. A test binary of its own: no other engine's threads share the process.
mod common;
use common::{opts, root};

use std::path::PathBuf;

use texstream::{Engine, Policy, Value, Values};
use vk_backend::placement::{current_thread_cores, parse_cpu_list, InterruptSource, PciAddress};

/// Every thread of this process named `name` (the kernel keeps 15 bytes of a name), with the
/// cores it may run on.
fn threads_named(name: &str) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = entry.expect("task").path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        if let Some(line) = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
            out.push(parse_cpu_list(&line["Cpus_allowed_list:".len()..]));
        }
    }
    out
}

#[test]
fn the_engines_threads_keep_off_the_devices_interrupt_core() {
    let allowed = current_thread_cores();
    assert!(!allowed.is_empty(), "this thread's cores could not be read");
    if allowed.len() < 2 {
        eprintln!("one core: nothing to keep off");
        return;
    }
    let avoided = allowed[0];
    let fake = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("placement");
    let _ = std::fs::remove_dir_all(&fake);
    let (sys, proc) = (fake.join("sys"), fake.join("proc"));
    let pci = PciAddress {
        domain: 0,
        bus: 0,
        device: 6,
        function: 0,
    };
    let msi = sys.join(format!("bus/pci/devices/{pci}/msi_irqs"));
    std::fs::create_dir_all(&msi).unwrap();
    std::fs::write(msi.join("45"), "msix\n").unwrap();
    std::fs::create_dir_all(proc.join("irq/45")).unwrap();
    std::fs::write(
        proc.join("irq/45/effective_affinity_list"),
        format!("{avoided}\n"),
    )
    .unwrap();

    let mut o = opts(None, Policy::Planned);
    o.device.interrupt_source = Some(InterruptSource {
        pci,
        sys,
        proc,
        // CI machines have two cores.
        min_cores_left: 1,
    });
    // The tiny decoder under its workload's 2 MiB cap streams, so the copy thread runs.
    let e = Engine::open(root().join("tests/data/tiny_llama/tiny-lm.ron"), o).expect("open");
    let mut prompt = Values::new();
    prompt.insert("prompt".into(), Value::Tokens(vec![1, 17, 42, 99, 200]));
    e.run("reply", prompt).expect("reply");

    let rest: Vec<usize> = allowed[1..].to_vec();
    for name in ["texstream-gpu", "texstream-trans"] {
        let found = threads_named(name);
        assert!(!found.is_empty(), "no `{name}` thread");
        for cores in found {
            assert_eq!(cores, rest, "`{name}` may run on {cores:?}");
        }
    }
    let stats = e.stats();
    assert!(
        stats
            .thread_placement
            .contains(&format!("kept off core {avoided} ")),
        "{}",
        stats.thread_placement
    );
    // The test's own thread is not the engine's to move.
    assert_eq!(current_thread_cores(), allowed);
    drop(e);
    let _ = std::fs::remove_dir_all(&fake);
}
