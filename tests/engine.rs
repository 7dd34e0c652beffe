//! The engine as an application embeds it, on lavapipe: a weight-heavy three-model chain (random
//! weights from scripts/make_chain_models.py) with two pipelines. Many threads submitting at once
//! get the outputs a single thread gets, bit for bit; a full queue answers Busy; deadlines and
//! cancellation stop requests; a seeded random mix of two pipelines under a cap below the weights
//! re-plans (and counts it) but never changes an output or exceeds the cap; reloads swap between
//! requests and bad ones keep the old workload serving; a failed page read fails one request and
//! the engine serves the next ones as before.
mod common;
use common::opts;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use texstream::pipeline::io::read_value;
use texstream::{Engine, EngineOptions, Policy, RequestError, SubmitOptions, Value, Values};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn work_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("engine");
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// The chain's ONNX files (dim 256, 3 × 4 layers, 1 MiB pages of fp16: about 1.8 MiB of
/// weights per model), made once; None without the Python venv.
fn chain_dir() -> Option<&'static PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let py = common::python()?;
        let dir = work_dir().join("chain");
        let st = std::process::Command::new(&py)
            .arg(root().join("scripts/make_chain_models.py"))
            .arg(&dir)
            .args([
                "--batch", "4", "--seq", "8", "--dim", "256", "--layers", "4,4,4", "--vocab", "512",
            ])
            .status()
            .expect("run make_chain_models.py");
        assert!(st.success(), "make_chain_models.py failed");
        // Compiled once here, not by tests opening engines at the same time.
        let w = texstream::workload::parse_workload(
            &workload_text(&dir, "256MiB", ""),
            &dir.join("compile.ron"),
        )
        .expect("workload");
        texstream::compile::auto::ensure_packed(&w, |_, _| {}).expect("compile the chain");
        Some(dir)
    })
    .as_ref()
}

/// The workload: pipeline `full` runs enc → mid → lm, `short` runs enc → lm.
fn workload_text(dir: &Path, cap: &str, extra_model: &str) -> String {
    let d = dir.display();
    format!(
        r#"Workload(
    name: "engine-test",
    cap: "{cap}",
    policy: "planned",
    page_size: "256KiB",
    models: [
        ModelSpec(name: "enc", source: Onnx("{d}/enc.onnx"), inputs: {{"x": [4, 8, 256]}}),
        ModelSpec(name: "mid", source: Onnx("{d}/mid.onnx"), inputs: {{"x": [4, 8, 256]}}),
        ModelSpec(name: "lm", source: Onnx("{d}/lm.onnx"), inputs: {{"x": [4, 8, 256]}}),{extra_model}
    ],
    pipelines: [
        PipelineSpec(name: "full", repeat: PerFrame(4), steps: [
            Run(model: "enc", inputs: {{"x": "features"}}, outputs: {{"y": "h1"}}),
            Run(model: "mid", inputs: {{"x": "h1"}}, outputs: {{"y": "h2"}}),
            Run(model: "lm", inputs: {{"x": "h2"}}, outputs: {{"y": "probs"}}),
        ]),
        PipelineSpec(name: "short", steps: [
            Run(model: "enc", inputs: {{"x": "features"}}, outputs: {{"y": "h1"}}),
            Run(model: "lm", inputs: {{"x": "h1"}}, outputs: {{"y": "probs"}}),
        ]),
    ],
    demo_inputs: [DemoInput(name: "features", path: "{d}/input.npy")],
)
"#
    )
}

fn write(name: &str, text: &str) -> PathBuf {
    let p = work_dir().join(name);
    std::fs::write(&p, text).expect("write workload");
    p
}

fn inputs(dir: &Path) -> Values {
    let mut v = Values::new();
    v.insert(
        "features".into(),
        read_value(&dir.join("input.npy")).expect("input.npy"),
    );
    v
}

fn probs(r: &texstream::Response) -> Vec<u32> {
    match r.outputs.get("probs") {
        Some(Value::Tensor(t)) => t
            .as_f32()
            .expect("f32")
            .iter()
            .map(|x| x.to_bits())
            .collect(),
        other => panic!("no probs: {other:?}"),
    }
}

/// Everything resident: the reference outputs of both pipelines.
fn reference(dir: &Path) -> (Vec<u32>, Vec<u32>) {
    let path = write("reference.ron", &workload_text(dir, "256MiB", ""));
    let e = Engine::open(&path, opts(None, Policy::Preload)).expect("open");
    let full = probs(&e.run("full", inputs(dir)).expect("full"));
    let short = probs(&e.run("short", inputs(dir)).expect("short"));
    assert_ne!(full, short);
    (full, short)
}

/// The minimum cap of the workload on this device, as an engine under a large cap reports it.
fn minimum(path: &Path) -> u64 {
    Engine::open(path, opts(None, Policy::Planned))
        .expect("open")
        .stats()
        .min_cap_bytes
}

#[test]
fn many_threads_get_the_single_thread_outputs() {
    let Some(dir) = chain_dir() else { return };
    let (full, short) = reference(dir);
    let path = write("threads.ron", &workload_text(dir, "256MiB", ""));
    let min = minimum(&path);
    let engine = Arc::new(
        Engine::open(
            &path,
            EngineOptions {
                queue_depth: 64,
                ..opts(Some(min + (1 << 20)), Policy::Planned)
            },
        )
        .expect("open"),
    );
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (engine, dir) = (engine.clone(), dir.clone());
            std::thread::spawn(move || {
                (0..4)
                    .map(|i| {
                        let p = if (t + i) % 3 == 0 { "short" } else { "full" };
                        let r = engine.run(p, inputs(&dir)).expect("request");
                        (p, probs(&r))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for h in threads {
        for (p, got) in h.join().expect("thread") {
            let want = if p == "full" { &full } else { &short };
            assert_eq!(&got, want, "{p}: outputs differ from the resident run");
        }
    }
    let s = engine.stats();
    assert_eq!(s.requests_ok, 16);
    assert!(
        s.peak_device_bytes <= s.cap_bytes,
        "peak {} over cap {}",
        s.peak_device_bytes,
        s.cap_bytes
    );
    assert!(s.replans.unpredicted_request > 0, "{:?}", s.replans);
}

#[test]
fn a_full_queue_answers_busy_and_deadlines_and_cancels_stop_requests() {
    let Some(dir) = chain_dir() else { return };
    let path = write("queue.ron", &workload_text(dir, "256MiB", ""));
    let engine = Engine::open(
        &path,
        EngineOptions {
            queue_depth: 2,
            ..opts(None, Policy::Preload)
        },
    )
    .expect("open");
    // More submissions than the queue holds, without waiting: some are refused at once.
    let mut handles = Vec::new();
    let mut busy = 0;
    for _ in 0..12 {
        match engine.submit("full", inputs(dir), SubmitOptions::default()) {
            Ok(h) => handles.push(h),
            Err(RequestError::Busy { depth }) => {
                assert!(depth <= 2, "queue depth {depth} over its bound");
                busy += 1;
            }
            Err(e) => panic!("unexpected: {e}"),
        }
    }
    assert!(busy > 0, "a queue of 2 took 12 requests");
    // The last one queued is cancelled before it runs.
    let last = handles.pop().expect("some were queued");
    last.cancel();
    for h in handles {
        h.wait().expect("queued requests finish");
    }
    assert!(matches!(last.wait(), Err(RequestError::Cancelled)));
    // A deadline already past fails before the request starts.
    let r = engine
        .submit(
            "full",
            inputs(dir),
            SubmitOptions {
                deadline: Some(Instant::now()),
                ..SubmitOptions::default()
            },
        )
        .expect("submit")
        .wait();
    assert!(matches!(r, Err(RequestError::DeadlineExceeded)), "{r:?}");
    // Waiting with a timeout gives the handle back.
    let h = engine
        .submit("full", inputs(dir), SubmitOptions::default())
        .expect("submit");
    let h = match h.wait_timeout(Duration::from_nanos(1)) {
        Err(h) => h,
        Ok(r) => {
            r.expect("finished already");
            return;
        }
    };
    h.wait().expect("finishes");
    assert!(engine.stats().requests_busy >= busy);
    // Unknown names and wrong inputs fail alone.
    let e = engine.run("ghost", inputs(dir)).unwrap_err().to_string();
    assert!(e.contains("ghost") && e.contains("`full`"), "{e}");
    let e = engine.run("full", Values::new()).unwrap_err().to_string();
    assert!(e.contains("features") && e.contains("missing"), "{e}");
    engine.run("full", inputs(dir)).expect("still serving");
}

/// A seeded random mix of the two pipelines (and single-model requests) under a cap below the
/// weights: the plan is wrong often, every output stays what the resident run gives, and the
/// cap holds.
#[test]
fn an_unpredictable_mix_replans_but_never_changes_an_output() {
    let Some(dir) = chain_dir() else { return };
    let (full, short) = reference(dir);
    let path = write("mix.ron", &workload_text(dir, "256MiB", ""));
    let min = minimum(&path);
    let engine = Engine::open(&path, opts(Some(min), Policy::Planned)).expect("open");
    let mut seed = 0x2545f4914f6cdd1du64;
    for _ in 0..16 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let (p, want) = if seed.is_multiple_of(3) {
            ("short", &short)
        } else {
            ("full", &full)
        };
        assert_eq!(&probs(&engine.run(p, inputs(dir)).expect(p)), want, "{p}");
        // Idle time between requests, as a service has: the planner thread prepares the
        // plans of the likely next requests in it.
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    // One model on its own, by its name.
    let mut x = Values::new();
    x.insert(
        "x".into(),
        read_value(&dir.join("input.npy")).expect("input"),
    );
    let y = engine.run("enc", x).expect("single model");
    assert!(y.outputs.contains_key("y"));
    let s = engine.stats();
    assert!(
        s.peak_device_bytes <= min,
        "peak {} over {min}",
        s.peak_device_bytes
    );
    assert!(s.replans.unpredicted_request > 0, "{:?}", s.replans);
    assert!(
        s.replans.prepared > 0,
        "no re-plan found its plan made ahead: {:?}",
        s.replans
    );
    assert!(s.evictions > 0, "a cap at the minimum must evict");
    eprintln!(
        "mix at the minimum cap {min}: {} requests, re-plans {:?}, {} B streamed",
        s.requests_ok, s.replans, s.bytes_streamed
    );
}

#[test]
fn reloads_swap_between_requests_and_bad_ones_keep_serving() {
    let Some(dir) = chain_dir() else { return };
    let (full, _) = reference(dir);
    let path = write("reload.ron", &workload_text(dir, "256MiB", ""));
    let min = minimum(&path);
    let engine = Engine::open(&path, opts(None, Policy::Planned)).expect("open");
    assert_eq!(probs(&engine.run("full", inputs(dir)).expect("run")), full);
    // A valid change: a smaller cap; the plan is the new file's.
    let small = format!("{}B", min + (1 << 20));
    std::fs::write(&path, workload_text(dir, &small, "")).expect("write");
    engine.reload(&path).expect("valid reload");
    assert_eq!(engine.stats().cap_bytes, min + (1 << 20));
    assert_eq!(engine.plan().expect("plan").cap_bytes, min + (1 << 20));
    assert_eq!(probs(&engine.run("full", inputs(dir)).expect("run")), full);
    // Invalid changes: each reported with where, the old workload serving after each.
    let bad = [
        (
            "Workload(name: \"x\", cap: \"1MiB\", models: [".to_string(),
            "reload.ron:1:",
        ),
        (
            workload_text(dir, "256MiB", "").replace("model: \"mid\"", "model: \"ghost\""),
            "ghost",
        ),
        (workload_text(dir, "1KiB", ""), "minimum feasible cap"),
        (
            workload_text(
                dir,
                "256MiB",
                &format!(
                    "\n        ModelSpec(name: \"gone\", source: Packed(\"{}/gone.tspk\")),",
                    dir.display()
                ),
            ),
            "gone.tspk",
        ),
    ];
    for (text, want) in &bad {
        std::fs::write(&path, text).expect("write");
        let e = engine
            .reload(&path)
            .expect_err("invalid reload")
            .to_string();
        assert!(e.contains(want), "{want}: {e}");
        assert_eq!(
            probs(&engine.run("full", inputs(dir)).expect("old serves")),
            full
        );
        let s = engine.stats();
        let last = s.last_reload.expect("reported");
        assert!(!last.ok && last.message.contains(want), "{last:?}");
    }
    let s = engine.stats();
    assert_eq!((s.reloads_ok, s.reloads_failed), (1, bad.len() as u64));
    assert_eq!(s.cap_bytes, min + (1 << 20), "the old plan still serves");
}

#[test]
fn a_failed_page_read_fails_one_request_and_the_next_ones_succeed() {
    let Some(dir) = chain_dir() else { return };
    let (full, _) = reference(dir);
    let path = write("fault.ron", &workload_text(dir, "256MiB", ""));
    let min = minimum(&path);
    let engine = Engine::open(&path, opts(Some(min), Policy::OnDemand)).expect("open");
    assert_eq!(probs(&engine.run("full", inputs(dir)).expect("run")), full);
    engine.inject_page_read_failures(1);
    let e = engine.run("full", inputs(dir)).expect_err("the read fails");
    assert!(e.to_string().contains("injected"), "{e}");
    for _ in 0..3 {
        assert_eq!(
            probs(&engine.run("full", inputs(dir)).expect("recovered")),
            full
        );
    }
    let s = engine.stats();
    assert_eq!((s.requests_ok, s.requests_failed), (4, 1));
    assert!(s.peak_device_bytes <= min);
}

/// The streaming settings change how pages reach the device, never what the models compute: with
/// a host mirror (every page read once, loads copied from it; on lavapipe its bytes count
/// against the cap, so the minimum grows by the weights) and with a shallow staging ring, both
/// pipelines give the resident outputs bit for bit at each setting's minimum cap, which holds.
#[test]
fn streaming_settings_never_change_an_output_and_the_cap_holds() {
    let Some(dir) = chain_dir() else { return };
    let (full, short) = reference(dir);
    let path = write("tuning.ron", &workload_text(dir, "256MiB", ""));
    for (what, tuning) in [
        (
            "host mirror",
            texstream::StreamTuning {
                host_mirror: Some(true),
                io_threads: Some(2),
                ..Default::default()
            },
        ),
        (
            "two-page staging ring",
            texstream::StreamTuning {
                host_mirror: Some(false),
                staging_pages: Some(2),
                loads_per_submit: Some(1),
                ..Default::default()
            },
        ),
        (
            "recorded steps submitted as command buffers of their own",
            texstream::StreamTuning {
                step_buffers: Some(true),
                ..Default::default()
            },
        ),
        (
            "every step recorded again on every run",
            texstream::StreamTuning {
                step_reuse: Some(false),
                ..Default::default()
            },
        ),
        (
            "parts of 4 steps (the default is a part per submission)",
            texstream::StreamTuning {
                steps_per_part: Some(4),
                ..Default::default()
            },
        ),
        (
            "the host at most one batch ahead of the GPU",
            texstream::StreamTuning {
                host_lead: Some(1),
                ..Default::default()
            },
        ),
        (
            "two-step compute batches",
            texstream::StreamTuning {
                steps_per_batch: Some(2),
                loads_per_submit: Some(16),
                ..Default::default()
            },
        ),
        (
            "plans built by lru-early alone",
            texstream::StreamTuning {
                plan_construction: Some("lru-early"),
                ..Default::default()
            },
        ),
    ] {
        let with = |cap| EngineOptions {
            stream: tuning,
            ..opts(cap, Policy::Planned)
        };
        let min = Engine::open(&path, with(None))
            .expect("open")
            .stats()
            .min_cap_bytes;
        let engine = Engine::open(&path, with(Some(min))).expect("open at the minimum");
        let mut submits = Vec::new();
        for p in ["full", "short", "full", "full", "full"] {
            let want = if p == "full" { &full } else { &short };
            assert_eq!(
                &probs(&engine.run(p, inputs(dir)).expect(p)),
                want,
                "{what}: {p}"
            );
            let s = engine.stats();
            submits.push((s.compute_submits, s.transfer_submits));
            assert!(
                s.record_parts.kernels_s > 0.0 && s.record_parts.submit_s > 0.0,
                "{what}: the engine's host time by part: {:?}",
                s.record_parts
            );
            // Recorded steps emitted again (from the second request on): the driver's share is
            // part of the recording.
            let emits = tuning.step_reuse != Some(false) && tuning.step_buffers != Some(true);
            let driver = s.record_parts.kernels_driver_s;
            assert!(
                driver <= s.record_parts.kernels_s && (driver > 0.0 || !emits || submits.len() < 2),
                "{what}: the driver's calls {driver} s of {} s",
                s.record_parts.kernels_s
            );
        }
        // The statistics are totals: two like requests after calibration add about as many
        // submissions each (they once added every earlier request's count again).
        let step = |i: usize| {
            (
                submits[i].0 - submits[i - 1].0,
                submits[i].1 - submits[i - 1].1,
            )
        };
        let (a, b) = (step(3), step(4));
        assert!(a.0 > 0, "{what}: no submissions counted: {submits:?}");
        assert!(
            b.0 <= a.0 + a.0 / 4 && b.1 <= a.1 + a.1 / 4,
            "{what}: submissions are not totals: {submits:?}"
        );
        let s = engine.stats();
        assert!(s.evictions > 0, "{what}: the minimum cap must stream");
        assert!(
            s.peak_device_bytes <= min,
            "{what}: peak {} over {min}",
            s.peak_device_bytes
        );
        if let Some(c) = tuning.plan_construction {
            assert_eq!(s.construction, c, "{what}");
        }
        // Held back only where asked, and at most once a submission.
        assert_eq!(s.host_lead, tuning.host_lead, "{what}");
        assert!(
            (tuning.host_lead.is_some() || s.host_lead_waits == 0)
                && s.host_lead_waits <= s.compute_submits,
            "{what}: held back {} times in {} submissions",
            s.host_lead_waits,
            s.compute_submits
        );
        if tuning.host_mirror == Some(true) {
            assert!(s.host_mirror_bytes > 0, "{what}: no mirror");
        } else if tuning.staging_pages == Some(2) {
            assert_eq!((s.host_mirror_bytes, s.staging_pages), (0, 2), "{what}");
        }
        eprintln!(
            "{what}: minimum cap {min}, {} B streamed, mirror {} B, host held back {} times",
            s.bytes_streamed, s.host_mirror_bytes, s.host_lead_waits
        );
    }
}
