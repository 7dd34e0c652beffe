//! Stream engine on the device: synthetic models whose pages hold known numbers, many steps
//! over fewer atlas slots than pages (loads and evictions interleaved), each step reading its
//! pages through `fetch_weight` (the `weight_copy` kernel). Results are checked against the
//! numbers computed on the CPU from the page formula, the device memory cap is never exceeded,
//! a source failing mid-run ends the run with its error, and a fresh run afterwards succeeds.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use vk_backend::kernels::weight_copy_into;
use vk_backend::layout::texels_to_bytes;
use vk_backend::testing::{assert_no_validation_messages, Rng};
use vk_backend::{
    Device, DeviceOptions, MemoryCategory, PageSource, Precision, StreamConfig, StreamEngine,
    StreamStats, Tensor, VkError,
};

const PAGE_HEIGHT: u32 = 2;
const TEXELS_PER_PAGE: usize = 512 * PAGE_HEIGHT as usize;

/// Value `j` (0..4*texels) of a page: quarter-integers below 512, exact in fp16.
fn value(model: u32, page: u32, j: usize) -> f32 {
    ((model * 37 + page * 11) as usize + j % 61 + (j / 61) % 7) as f32 * 0.25
}

struct SyntheticModel {
    model: u32,
    pages: u32,
    precision: Precision,
    fail_at: Option<u32>,
    reads: AtomicU32,
}

impl PageSource for SyntheticModel {
    fn page_bytes(&self) -> usize {
        TEXELS_PER_PAGE * self.precision.bytes_per_texel()
    }
    fn page_count(&self) -> u32 {
        self.pages
    }
    fn read_page(&self, page: u32, dst: &mut [u8]) -> std::io::Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        if Some(page) == self.fail_at {
            return Err(std::io::Error::other("synthetic read failure"));
        }
        let vals: Vec<f32> = (0..TEXELS_PER_PAGE * 4)
            .map(|j| value(self.model, page, j))
            .collect();
        dst.copy_from_slice(&texels_to_bytes(&vals, self.precision));
        Ok(())
    }
    fn name(&self) -> String {
        format!("synthetic-{}", self.model)
    }
}

/// A device of its own (for the cap). Validation is off for the streaming runs: the installed
/// Khronos layer (1.3.239) mis-tracks timeline semaphores signalled by fence-less submissions
/// that a host thread waits on, reports `UNASSIGNED-VkSemaphore-state-timeout` ("most likely a
/// validation bug") and stalls each such wait for seconds. `plan_errors_are_reported` and the
/// atlas tests keep validation on for the same commands (copies, page-table updates, dispatch).
fn open_device(cap: u64, validation: bool) -> Device {
    let env = DeviceOptions::from_env();
    Device::new(&DeviceOptions {
        memory_cap: Some(cap),
        validation: validation && env.validation,
        ..env
    })
    .expect("open a Vulkan device")
}

/// One synthetic model per entry of `pages` (that many pages each); `fail` = (model, page)
/// whose read fails.
fn models(pages: &[u32], p: Precision, fail: Option<(u32, u32)>) -> Vec<Arc<SyntheticModel>> {
    pages
        .iter()
        .enumerate()
        .map(|(m, &n)| {
            Arc::new(SyntheticModel {
                model: m as u32,
                pages: n,
                precision: p,
                fail_at: fail.filter(|f| f.0 == m as u32).map(|f| f.1),
                reads: AtomicU32::new(0),
            })
        })
        .collect()
}

fn sources(pages: &[u32], p: Precision, fail: Option<(u32, u32)>) -> Vec<Arc<dyn PageSource>> {
    models(pages, p, fail)
        .into_iter()
        .map(|m| m as Arc<dyn PageSource>)
        .collect()
}

/// One copied page: the step's output tensor and what it must hold.
struct Check {
    model: u32,
    page: u32,
    out: Tensor,
}

/// Runs `steps` random steps (each reads 1..=3 pages of one model) through the engine with a
/// simple round-robin eviction plan. Returns the run's result and the copies to check.
fn run_plan(
    d: &Device,
    config: StreamConfig,
    pages: &[u32],
    fail: Option<(u32, u32)>,
    steps: usize,
    seed: u64,
) -> (Result<StreamStats, VkError>, Vec<Check>, usize) {
    let srcs = sources(pages, config.precision, fail);
    run_plan_on(d, config, srcs, pages, steps, seed)
}

/// [`run_plan`] over the given sources.
fn run_plan_on(
    d: &Device,
    config: StreamConfig,
    srcs: Vec<Arc<dyn PageSource>>,
    pages: &[u32],
    steps: usize,
    seed: u64,
) -> (Result<StreamStats, VkError>, Vec<Check>, usize) {
    let mut engine = StreamEngine::new(d, config, srcs).expect("create the stream engine");
    let mut rng = Rng::new(seed);
    let mut held: Vec<Option<(u32, u32)>> = vec![None; config.slots as usize];
    let mut victim = 0usize;
    let mut checks = Vec::new();
    let mut loads = 0;
    let result = (|| -> Result<(), VkError> {
        for s in 0..steps {
            let model = (rng.next_u64() % pages.len() as u64) as u32;
            let k = 1 + (rng.next_u64() % 3) as usize;
            let mut needs: Vec<(u32, u32)> = Vec::new();
            while needs.len() < k.min(pages[model as usize] as usize) {
                let p = (rng.next_u64() % pages[model as usize] as u64) as u32;
                if !needs.contains(&(model, p)) {
                    needs.push((model, p));
                }
            }
            for &n in &needs {
                if held.contains(&Some(n)) {
                    continue;
                }
                // Round-robin victim that the current step does not read.
                while held[victim].is_some_and(|h| needs.contains(&h)) {
                    victim = (victim + 1) % held.len();
                }
                if s % 5 == 0 && held[victim].is_some() {
                    engine.evict(victim as u32)?; // explicit eviction, then load
                }
                engine.load(n.0, n.1, victim as u32)?;
                loads += 1;
                held[victim] = Some(n);
                victim = (victim + 1) % held.len();
            }
            let mut outs = Vec::new();
            for &(m, p) in &needs {
                let off = engine.weight_texel_base(m)? + p * TEXELS_PER_PAGE as u32;
                let out = Tensor::new(
                    d,
                    "page copy",
                    &[1, 4, 1, TEXELS_PER_PAGE],
                    config.precision,
                )?;
                outs.push((off, out.clone()));
                checks.push(Check {
                    model: m,
                    page: p,
                    out,
                });
            }
            engine.step(&needs, |rec| {
                for (off, out) in &outs {
                    weight_copy_into(rec, *off, out)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    })();
    let finished = engine.finish();
    let result = match result {
        Ok(()) => finished,
        Err(e) => {
            // The run's own error wins when finish reports the original cause.
            Err(finished.err().unwrap_or(e))
        }
    };
    (result, checks, loads)
}

fn verify(checks: &[Check]) {
    for c in checks {
        let got = c.out.download().expect("download");
        for x in 0..TEXELS_PER_PAGE {
            for ch in 0..4 {
                let want = value(c.model, c.page, 4 * x + ch);
                let g = got[ch * TEXELS_PER_PAGE + x];
                assert_eq!(
                    g, want,
                    "model {} page {} texel {x} lane {ch}",
                    c.model, c.page
                );
            }
        }
    }
}

fn config(p: Precision) -> StreamConfig {
    StreamConfig {
        slots: 5,
        precision: p,
        page_height: Some(PAGE_HEIGHT),
        staging_slots: 3,
        io_threads: 3,
        steps_per_batch: 4,
        max_loads_per_submit: 3,
        ..StreamConfig::default()
    }
}

#[test]
fn streams_pages_through_few_slots() {
    // Cap: atlas + page table + staging + ~150 small step outputs (NVIDIA rounds each image
    // allocation up to 128 KiB, lavapipe does not).
    let cap = 32 << 20;
    let d = open_device(cap, false);
    for p in [Precision::F16, Precision::F32] {
        let (res, checks, loads) = run_plan(&d, config(p), &[13, 6, 9], None, 60, 7);
        let stats = res.expect("run succeeds");
        assert_eq!(stats.steps, 60);
        assert_eq!(stats.pages_loaded, loads as u64);
        let page_bytes = (TEXELS_PER_PAGE * p.bytes_per_texel()) as u64;
        assert_eq!(stats.bytes_streamed, loads as u64 * page_bytes);
        assert!(
            loads > 28,
            "the plan must stream more pages than fit ({loads} loads)"
        );
        assert!(stats.evictions >= loads as u64 - 5, "{stats:?}");
        assert!(stats.compute_submits >= 15, "{stats:?}");
        assert!(stats.transfer_submits >= 1);
        if let (Some(b), Some(s)) = (stats.compute_busy, stats.compute_stall) {
            assert!(b <= stats.wall && s <= stats.wall, "{stats:?}");
        }
        verify(&checks);
        eprintln!("{p:?}: {stats:?}");
    }
    let m = d.memory_stats();
    assert!(m.peak_bytes <= cap, "peak {} > cap {cap}", m.peak_bytes);
    // The weights the engine keeps on the device are exactly the atlas (+ page table): the
    // number of pages streamed does not change them.
    let atlas_f32 = 5 * (TEXELS_PER_PAGE as u64 * 16);
    let weights_peak = m.category_peak(MemoryCategory::Weights);
    assert!(
        weights_peak >= atlas_f32 && weights_peak <= atlas_f32 + (1 << 20),
        "weights peak {weights_peak} for a {atlas_f32}-byte atlas"
    );
    assert_no_validation_messages(&d);
}

#[test]
fn failing_source_ends_the_run_and_the_next_run_works() {
    let d = open_device(64 << 20, false);
    let baseline = d.memory_stats().live_allocations;
    let cfg = config(Precision::F16);
    let (res, checks, _) = run_plan(&d, cfg, &[13, 6, 9], Some((0, 5)), 60, 7);
    drop(checks);
    match res {
        Err(VkError::PageRead { model, page, .. }) => assert_eq!((model, page), (0, 5)),
        other => panic!("expected the read error of model 0 page 5, got {other:?}"),
    }
    // Everything the failed run allocated is gone (staging ring, atlas, batches).
    assert_eq!(d.memory_stats().live_allocations, baseline);
    let (res, checks, _) = run_plan(&d, cfg, &[13, 6, 9], None, 40, 9);
    res.expect("a fresh run on the same device succeeds");
    verify(&checks);
    drop(checks);
    assert_eq!(d.memory_stats().live_allocations, baseline);
    assert_no_validation_messages(&d);
}

/// With a host mirror every page is read at most once, by the fill that starts with the engine,
/// and each load copies from the mirror: the steps read the same numbers as through the staging
/// ring, the mirror's bytes are counted (on lavapipe host-visible memory is device memory) and
/// the cap holds. A page that cannot be read fails the run that loads it with its model and
/// page (not the engine's creation: the fill runs behind the loads).
#[test]
fn a_host_mirror_serves_every_load_from_one_read() {
    let cap = 32 << 20;
    let d = open_device(cap, false);
    let baseline = d.memory_stats().live_allocations;
    let pages = [13, 6, 9];
    for p in [Precision::F16, Precision::F32] {
        let models = models(&pages, p, None);
        let srcs: Vec<Arc<dyn PageSource>> = models
            .iter()
            .map(|m| m.clone() as Arc<dyn PageSource>)
            .collect();
        let cfg = StreamConfig {
            host_mirror: true,
            ..config(p)
        };
        let (res, checks, loads) = run_plan_on(&d, cfg, srcs, &pages, 60, 11);
        let stats = res.expect("run succeeds");
        assert!(loads > 28, "the plan must stream ({loads} loads)");
        assert_eq!(stats.pages_loaded, loads as u64);
        for m in &models {
            // At most once: `finish` stops a fill that has not read every page yet.
            let loaded: std::collections::HashSet<u32> = checks
                .iter()
                .filter(|c| c.model == m.model)
                .map(|c| c.page)
                .collect();
            let reads = m.reads.load(Ordering::Relaxed);
            assert!(
                reads <= m.pages && reads >= loaded.len() as u32,
                "model {}: {reads} reads of {} pages, {} of them loaded",
                m.model,
                m.pages,
                loaded.len()
            );
        }
        let page_bytes = (TEXELS_PER_PAGE * p.bytes_per_texel()) as u64;
        assert_eq!(stats.host_mirror_bytes, 28 * page_bytes);
        assert_eq!(stats.staging_bytes, 0, "no staging ring beside the mirror");
        assert!(stats
            .copy_probe
            .is_some_and(|t| t > std::time::Duration::ZERO));
        verify(&checks);
    }
    assert!(d.memory_stats().peak_bytes <= cap);
    assert_eq!(d.memory_stats().live_allocations, baseline);
    let cfg = StreamConfig {
        host_mirror: true,
        ..config(Precision::F16)
    };
    // The plan of `failing_source_ends_the_run_and_the_next_run_works`, which loads the page.
    match run_plan(&d, cfg, &pages, Some((0, 5)), 60, 7).0 {
        Err(VkError::PageRead { model, page, .. }) => assert_eq!((model, page), (0, 5)),
        Err(e) => panic!("expected the read error of model 0 page 5, got {e}"),
        Ok(_) => panic!("a run loading an unreadable page succeeded"),
    }
    assert_eq!(d.memory_stats().live_allocations, baseline);
    assert_no_validation_messages(&d);
}

#[test]
fn plan_errors_are_reported() {
    let d = open_device(64 << 20, true);
    let cfg = config(Precision::F32);
    let mut e = StreamEngine::new(&d, cfg, sources(&[4, 2], cfg.precision, None)).unwrap();
    assert!(e.load(2, 0, 0).is_err(), "model out of range");
    assert!(e.load(1, 2, 0).is_err(), "page out of range");
    assert!(e.load(0, 0, 9).is_err(), "slot out of range");
    e.load(0, 1, 0).unwrap();
    assert!(e.load(0, 1, 1).is_err(), "already resident");
    let err = e.step(&[(0, 2)], |_| Ok(())).unwrap_err();
    assert!(err.to_string().contains("not resident"), "{err}");
    // The run is over; finish reports the plan error.
    assert!(e.finish().is_err());
    let sizes = StreamEngine::new(&d, cfg, sources(&[4], Precision::F16, None));
    assert!(sizes.is_err(), "fp16 pages into an fp32 atlas");
    assert_no_validation_messages(&d);
}

/// Prefetch as a planner does it: right after step k reads its page, the slot is reloaded with
/// the page step k + SLOTS reads. The copy must wait for step k, which is still being
/// recorded; the engine holds the copy until that batch is submitted instead of submitting a
/// batch per load, and only splits a batch where a step needs such a copy. Every step still
/// reads the right page, and the journal accounts for every load, eviction and step.
#[test]
fn prefetched_loads_do_not_split_batches() {
    const SLOTS: u32 = 4;
    const PAGES: u32 = 10;
    const STEPS: u32 = 48;
    let d = open_device(32 << 20, false);
    let cfg = StreamConfig {
        slots: SLOTS,
        steps_per_batch: 16,
        ..config(Precision::F16)
    };
    let mut engine = StreamEngine::new(&d, cfg, sources(&[PAGES], cfg.precision, None)).unwrap();
    engine.label_steps(Some(0));
    let page_of = |k: u32| (k * 3) % PAGES;
    for k in 0..SLOTS {
        engine.load(0, page_of(k), k).unwrap();
    }
    let mut checks = Vec::new();
    let mut last = 0;
    let mut values = Vec::new();
    for k in 0..STEPS {
        let (p, slot) = (page_of(k), k % SLOTS);
        assert_eq!(engine.slot_of(0, p), Some(slot));
        let off = engine.weight_texel_base(0).unwrap() + p * TEXELS_PER_PAGE as u32;
        let out = Tensor::new(&d, "page copy", &[1, 4, 1, TEXELS_PER_PAGE], cfg.precision).unwrap();
        last = engine
            .step(&[(0, p)], |rec| weight_copy_into(rec, off, &out))
            .unwrap();
        values.push(last);
        checks.push(Check {
            model: 0,
            page: p,
            out,
        });
        let next = k + SLOTS;
        if next < STEPS {
            engine.load(0, page_of(next), slot).unwrap();
        }
    }
    engine.wait_step(last).unwrap();
    let submits = engine.counters().compute_submits;
    // One batch per SLOTS steps (each step's copy of SLOTS steps later waits for it), not one
    // per step as when every such load submitted the open batch.
    assert!(
        submits <= (STEPS / SLOTS + 1) as u64,
        "{submits} compute submissions for {STEPS} steps"
    );
    verify(&checks);
    // The journal resolves as the transfer thread reports its copies.
    let (mut loads, mut evicts, mut steps) = (0, 0, 0);
    let t0 = std::time::Instant::now();
    while (loads < STEPS || steps < STEPS) && t0.elapsed() < std::time::Duration::from_secs(20) {
        engine.refresh().unwrap();
        for e in engine.take_events().0 {
            match e {
                vk_backend::StreamEvent::Load {
                    start_s,
                    end_s,
                    submitted_s,
                    after_value,
                    ticket,
                    reader,
                    issued_s,
                    ..
                } => {
                    assert!(start_s <= end_s);
                    // Reported in copy order; each waits for the step whose slot it reuses.
                    loads += 1;
                    assert_eq!(ticket, loads as u64, "loads in ticket order");
                    let want = (loads > SLOTS).then(|| values[(loads - SLOTS - 1) as usize]);
                    assert_eq!(reader, want.unwrap_or(0), "load {ticket}'s reader");
                    assert!(
                        after_value >= reader,
                        "load {ticket} waited for {after_value}"
                    );
                    assert!(
                        issued_s <= submitted_s,
                        "load {ticket} submitted before issued"
                    );
                }
                vk_backend::StreamEvent::Evict { .. } => evicts += 1,
                vk_backend::StreamEvent::Compute {
                    model,
                    steps: n,
                    start_s,
                    end_s,
                    last_value,
                    wait_ticket,
                    ..
                } => {
                    assert_eq!(model, Some(0));
                    assert!(start_s <= end_s);
                    steps += n;
                    // Step k reads load k's page: a part waits for the load of its last step.
                    let k = values.iter().position(|&v| v == last_value).unwrap();
                    assert_eq!(wait_ticket, k as u64 + 1, "part ending at {last_value}");
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(loads, STEPS, "every load in the journal");
    assert_eq!(steps, STEPS, "every step in the journal");
    assert_eq!(evicts, STEPS - SLOTS, "every eviction in the journal");
    let stats = engine.finish().unwrap();
    assert_eq!(stats.pages_loaded, STEPS as u64);
    assert!(stats.compute_busy.is_some() && stats.transfer_busy.is_some());
    assert_no_validation_messages(&d);
}

/// A page source behind a slow disk: each read sleeps `delay` first. It records the order pages
/// were asked for, and can panic on one page.
struct SlowSource {
    inner: Arc<SyntheticModel>,
    delay: std::time::Duration,
    panic_at: Option<u32>,
    asked: Arc<std::sync::Mutex<Vec<(u32, u32)>>>,
}

impl PageSource for SlowSource {
    fn page_bytes(&self) -> usize {
        self.inner.page_bytes()
    }
    fn page_count(&self) -> u32 {
        self.inner.page_count()
    }
    fn read_page(&self, page: u32, dst: &mut [u8]) -> std::io::Result<()> {
        if let Ok(mut a) = self.asked.lock() {
            a.push((self.inner.model, page));
        }
        std::thread::sleep(self.delay);
        if Some(page) == self.panic_at {
            panic!("synthetic page source panic on page {page}");
        }
        self.inner.read_page(page, dst)
    }
    fn name(&self) -> String {
        self.inner.name()
    }
}

/// `models(pages, ..)` behind [`SlowSource`]s sharing one log of the pages asked for.
#[allow(clippy::type_complexity)]
fn slow_sources(
    pages: &[u32],
    p: Precision,
    delay_ms: u64,
    fail: Option<(u32, u32)>,
    panic_at: Option<(u32, u32)>,
) -> (
    Vec<Arc<dyn PageSource>>,
    Vec<Arc<SyntheticModel>>,
    Arc<std::sync::Mutex<Vec<(u32, u32)>>>,
) {
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let ms = models(pages, p, fail);
    let srcs = ms
        .iter()
        .map(|m| {
            Arc::new(SlowSource {
                inner: m.clone(),
                delay: std::time::Duration::from_millis(delay_ms),
                panic_at: panic_at.filter(|f| f.0 == m.model).map(|f| f.1),
                asked: asked.clone(),
            }) as Arc<dyn PageSource>
        })
        .collect();
    (srcs, ms, asked)
}

/// Runs `f` on a thread of its own and fails the test if it takes longer than `limit` (a hang).
fn within<T: Send + 'static>(limit_s: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(limit_s))
        .unwrap_or_else(|_| panic!("no result within {limit_s} s: a hang"))
}

/// Loads `order` one page at a time into round-robin slots, each followed by a step copying
/// the page out and a wait for that step. Returns the checks of the steps that ran and the
/// first error (the engine is finished either way; its error wins, as in [`run_plan_on`]).
fn load_in_order(
    d: &Device,
    mut engine: StreamEngine,
    order: &[(u32, u32)],
    precision: Precision,
) -> (Result<StreamStats, VkError>, Vec<Check>) {
    let slots = engine.config().slots;
    let mut checks = Vec::new();
    let result = (|| -> Result<(), VkError> {
        for (i, &(m, p)) in order.iter().enumerate() {
            let slot = i as u32 % slots;
            if engine.slot_of(m, p).is_none() {
                engine.load(m, p, slot)?;
            }
            let off = engine.weight_texel_base(m)? + p * TEXELS_PER_PAGE as u32;
            let out = Tensor::new(d, "page copy", &[1, 4, 1, TEXELS_PER_PAGE], precision)?;
            let value = engine.step(&[(m, p)], |rec| weight_copy_into(rec, off, &out))?;
            engine.wait_step(value)?;
            checks.push(Check {
                model: m,
                page: p,
                out,
            });
        }
        Ok(())
    })();
    let finished = engine.finish();
    let result = match result {
        Ok(()) => finished,
        Err(e) => Err(finished.err().unwrap_or(e)),
    };
    (result, checks)
}

/// The host mirror fills behind the run: over a slow disk (30 ms a page) the engine opens
/// after the few pages its copy probe needs, the pages of the given load order are read first,
/// every load waits for its own page, and every step reads exactly the source's bytes.
#[test]
fn a_slow_host_mirror_fill_runs_behind_the_loads() {
    let d = open_device(32 << 20, true);
    let baseline = d.memory_stats().live_allocations;
    let pages = [40, 20, 30];
    let p = Precision::F16;
    let (srcs, ms, asked) = slow_sources(&pages, p, 30, None, None);
    let cfg = StreamConfig {
        host_mirror: true,
        ..config(p)
    };
    // The run's first loads: model 2 first, then model 1, against model and page order.
    let order: Vec<(u32, u32)> = [(2, 8), (2, 0), (1, 5), (1, 0), (2, 3), (0, 12)]
        .into_iter()
        .chain((0..13).map(|p| (0, p)))
        .collect();
    let (engine, open_reads) = {
        let d = d.clone();
        let order = order.clone();
        within(60, move || {
            let e = StreamEngine::with_load_order(&d, cfg, srcs, &order).expect("engine");
            let n = ms
                .iter()
                .map(|m| m.reads.load(Ordering::Relaxed))
                .sum::<u32>();
            (e, n)
        })
    };
    assert!(
        open_reads < 90,
        "the engine opened after the whole fill ({open_reads} pages read)"
    );
    let (d2, order2) = (d.clone(), order.clone());
    let (res, checks) = within(120, move || load_in_order(&d2, engine, &order2, p));
    let stats = res.expect("the run succeeds");
    verify(&checks);
    assert_eq!(checks.len(), order.len());
    // Fill threads (3 here) take pages in the load order: its first pages are asked for first.
    let asked = asked.lock().unwrap().clone();
    for first in &order[..3] {
        assert!(
            asked[..6].contains(first),
            "page {first:?} is not among the first reads {:?}",
            &asked[..6]
        );
    }
    let mut seen = asked.clone();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), asked.len(), "a page read twice: {asked:?}");
    assert!(stats.mirror_fill > std::time::Duration::ZERO, "{stats:?}");
    assert!(
        stats.mirror_fill_behind > std::time::Duration::ZERO,
        "the fill ran behind the engine's creation: {stats:?}"
    );
    drop(checks);
    assert_eq!(d.memory_stats().live_allocations, baseline);
    assert_no_validation_messages(&d);
}

/// A page the fill cannot read, or whose source panics, fails the run at the load that needs
/// it with `PageRead` naming it; the loads before it copy the right bytes, nothing hangs, and
/// the engine's memory is freed.
#[test]
fn a_failing_page_fails_the_load_that_needs_it() {
    let d = open_device(32 << 20, true);
    let baseline = d.memory_stats().live_allocations;
    let p = Precision::F16;
    let cfg = StreamConfig {
        host_mirror: true,
        ..config(p)
    };
    let order = [(0, 0), (1, 1), (2, 2), (1, 3), (0, 4)];
    for (fail, panic_at) in [(Some((1, 3)), None), (None, Some((1, 3)))] {
        let (srcs, _, _) = slow_sources(&[13, 6, 9], p, 5, fail, panic_at);
        let d2 = d.clone();
        let (res, checks) = within(60, move || {
            let e = StreamEngine::with_load_order(&d2, cfg, srcs, &order).expect("engine");
            load_in_order(&d2, e, &order, p)
        });
        match res {
            Err(VkError::PageRead {
                model,
                page,
                name,
                source,
            }) => {
                assert_eq!((model, page, name.as_str()), (1, 3, "synthetic-1"));
                let want = if fail.is_some() {
                    "synthetic"
                } else {
                    "panicked"
                };
                assert!(source.to_string().contains(want), "{source}");
            }
            other => panic!("expected model 1 page 3's read error, got {other:?}"),
        }
        // Every step before the failing load ran on the right bytes (at most one more step,
        // the failing load's own, recorded before the error arrived).
        assert!(checks.len() >= 3, "{} steps ran", checks.len());
        verify(&checks[..3]);
        drop(checks);
        assert_eq!(d.memory_stats().live_allocations, baseline);
    }
    assert_no_validation_messages(&d);
}

/// Dropping an engine while its mirror is still filling over a slow disk stops the fill after
/// the pages being read (it does not read the rest) and frees everything, promptly.
#[test]
fn dropping_the_engine_stops_the_fill() {
    let d = open_device(32 << 20, true);
    let baseline = d.memory_stats().live_allocations;
    let p = Precision::F16;
    let (srcs, ms, _) = slow_sources(&[60, 30, 40], p, 100, None, None);
    let cfg = StreamConfig {
        host_mirror: true,
        ..config(p)
    };
    let d2 = d.clone();
    let (took, reads) = within(60, move || {
        let mut e = StreamEngine::new(&d2, cfg, srcs).expect("engine");
        // One load in flight, whose page the fill may not have read yet.
        e.load(2, 8, 0).expect("load");
        let t0 = std::time::Instant::now();
        drop(e);
        let took = t0.elapsed();
        (
            took,
            ms.iter()
                .map(|m| m.reads.load(Ordering::Relaxed))
                .sum::<u32>(),
        )
    });
    // 130 pages at 100 ms take over 800 ms on 16 threads; a stop waits for one page a thread.
    assert!(
        took < std::time::Duration::from_millis(600),
        "drop took {took:?}"
    );
    assert!(
        reads < 130,
        "the fill went on after the drop ({reads} pages read)"
    );
    assert_eq!(d.memory_stats().live_allocations, baseline);
}

#[test]
fn copies_behind_finished_readers_share_a_submission() {
    // Eight slots, each read by a step of its own part (one step a batch); once every step has
    // finished, eight loads refill the slots. Each copy waits for a different part, so one part
    // a submission would make eight; their readers are done, so they go out together. The
    // first load reads a slow page, so the other seven are staged when the thread takes it.
    const SLOTS: u32 = 8;
    let d = open_device(32 << 20, false);
    let cfg = StreamConfig {
        slots: SLOTS,
        steps_per_batch: 1,
        staging_slots: 16,
        io_threads: 4,
        max_loads_per_submit: SLOTS,
        ..config(Precision::F16)
    };
    let pages = [2 * SLOTS, 1];
    let (slow, _, _) = slow_sources(&pages, cfg.precision, 300, None, None);
    let mut srcs = sources(&pages, cfg.precision, None);
    srcs[1] = slow[1].clone();
    let mut engine = StreamEngine::new(&d, cfg, srcs).unwrap();
    let mut checks = Vec::new();
    let mut step = |engine: &mut StreamEngine, model: u32, p: u32| {
        let off = engine.weight_texel_base(model).unwrap() + p * TEXELS_PER_PAGE as u32;
        let out = Tensor::new(&d, "page copy", &[1, 4, 1, TEXELS_PER_PAGE], cfg.precision).unwrap();
        let v = engine
            .step(&[(model, p)], |rec| weight_copy_into(rec, off, &out))
            .unwrap();
        checks.push(Check {
            model,
            page: p,
            out,
        });
        v
    };
    let mut last = 0;
    for k in 0..SLOTS {
        engine.load(0, k, k).unwrap();
        last = step(&mut engine, 0, k);
    }
    engine.wait_step(last).unwrap();
    // Slot 0 gets the slow page, the others model 0's second half.
    engine.load(1, 0, 0).unwrap();
    for k in 1..SLOTS {
        engine.load(0, SLOTS + k, k).unwrap();
    }
    last = step(&mut engine, 1, 0);
    for k in 1..SLOTS {
        last = step(&mut engine, 0, SLOTS + k);
    }
    engine.wait_step(last).unwrap();
    // Loads sharing a submission share its GPU span in the journal.
    let mut spans = std::collections::BTreeSet::new();
    let mut seen = 0;
    let t0 = std::time::Instant::now();
    while seen < 2 * SLOTS && t0.elapsed() < std::time::Duration::from_secs(20) {
        engine.refresh().unwrap();
        for e in engine.take_events().0 {
            if let vk_backend::StreamEvent::Load {
                model,
                page,
                start_s,
                end_s,
                ..
            } = e
            {
                seen += 1;
                if model == 1 || page >= SLOTS {
                    spans.insert((start_s.to_bits(), end_s.to_bits()));
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(seen, 2 * SLOTS, "every load in the journal");
    assert!(
        spans.len() <= 2,
        "{} copy submissions for {SLOTS} loads whose readers had finished",
        spans.len()
    );
    verify(&checks);
    engine.finish().unwrap();
    assert_no_validation_messages(&d);
}
