//! `texstream run WORKLOAD.ron`: a client of the engine API. It opens an engine on the workload
//! (once per policy with `--all-policies`, each on a fresh device), submits the pipeline's
//! requests one after another with the workload's demo inputs (or `--input` files), prints the
//! outputs and the engine's statistics, and checks that every policy produced the same bits.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use texstream::engine::thread_usage::{process_threads, threads_line, ThreadCpu};
use texstream::engine::Loaded;
use texstream::pipeline::io::{hash_bytes, hash_value, read_value, summarize, HASH_SEED};
use texstream::workload::load_workload;
use texstream::{Engine, EngineOptions, EngineStats, Policy, Values};

use super::args::{parse_named_path, parse_size_arg, Progress};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Workload file (RON).
    pub workload: PathBuf,
    /// Device memory cap (e.g. 24MiB, 1.5GiB, 12MB); default: the workload's.
    #[arg(long, value_parser = parse_size_arg)]
    pub cap: Option<u64>,
    /// preload, reload-per-model, on-demand, lru or planned; default: the workload's.
    #[arg(long)]
    pub policy: Option<Policy>,
    /// The pipeline to run (default: the workload's first).
    #[arg(long)]
    pub pipeline: Option<String>,
    /// Requests to run (default: the pipeline's repeat count).
    #[arg(long)]
    pub iterations: Option<u32>,
    /// Replace a pipeline input (default: the workload's demo input): NAME=FILE, with FILE a
    /// .png/.jpg image, .npy tensor or .txt text (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE", value_parser = parse_named_path)]
    pub inputs: Vec<(String, PathBuf)>,
    /// Write the statistics as JSON (with --all-policies: one object per policy).
    #[arg(long)]
    pub metrics_json: Option<PathBuf>,
    /// Write the last requests' residency as they really ran (GPU-timed copies, evictions and
    /// compute batches) as SVG; with --all-policies one file per policy, named FILE-POLICY.svg.
    #[arg(long, value_name = "FILE")]
    pub residency_svg: Option<PathBuf>,
    /// Run every policy, one after another on a fresh device, and compare them.
    #[arg(long)]
    pub all_policies: bool,
    /// For measurements: first run `preload` with every weight resident and no cap (twice: the
    /// first pass warms the driver's pipelines and the GPU's clocks), then give
    /// every policy that run's step costs for its predicted time and lower bound (instead of
    /// costs calibrated on its own, possibly stalled, runs) and report its time beside theirs.
    #[arg(long)]
    pub resident_reference: bool,
    /// Vulkan device (index or name substring).
    #[arg(long)]
    pub device: Option<String>,
    /// Measure each policy's cold start: drop the packed models from the page cache, then time
    /// opening them (headers checked; each page is checked when it is read), the engine's start
    /// and the first request, and report that beside the warm requests' median.
    #[arg(long)]
    pub cold: bool,
    /// Pages the streaming staging ring holds (default: 64 MiB of pages in system memory, one
    /// page where the ring is device memory under the cap); to measure one depth against another.
    #[arg(long, value_name = "N")]
    pub staging_pages: Option<u32>,
    /// Most page copies in one transfer submission (default 8).
    #[arg(long, value_name = "N")]
    pub loads_per_submit: Option<u32>,
    /// Threads reading weight pages into the staging ring (default 4; the host mirror is filled
    /// on one per core, at most 16).
    #[arg(long, value_name = "N")]
    pub io_threads: Option<u32>,
    /// Compute steps per submission (default 16); to measure one batch length against another.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub steps_per_batch: Option<u32>,
    /// Least compute steps per part of a submission (default: a batch's, so a part is cut only
    /// where a copy needs it; a part waits for its own pages and signals its end, so copies
    /// and compute overlap); to measure one against another.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub steps_per_part: Option<u32>,
    /// Read every weight page once into pinned host memory and copy loads from there (`on`), or
    /// read each page from its file when it is loaded (`off`). Default: on for a discrete GPU
    /// when a streaming policy runs and the weights take at most half the RAM.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    pub host_mirror: Option<bool>,
    /// Record each model step's commands once and execute that recording on later runs (`on`,
    /// the default), or record every step again on every run (`off`); to measure one against
    /// the other.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    pub step_reuse: Option<bool>,
    /// Submit each recorded step as a command buffer of its own (`on`), or emit its commands
    /// into the batch's command buffer again on every run (`off`, the default); to measure one
    /// against the other.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new())]
    pub step_buffers: Option<bool>,
    /// Most compute submissions in flight before the host waits for the oldest (default: no
    /// limit); to measure the host held to the GPU's pace against running ahead.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub host_lead: Option<u32>,
    /// Build `planned`'s plans with this construction alone instead of the one the simulator
    /// prefers (`texstream plan --candidates` lists them with their simulated times); to measure
    /// one against another.
    #[arg(long, value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(scheduler::PLANNED_CONSTRUCTIONS))]
    pub plan_construction: Option<String>,
}

/// `--resident-reference`'s cap: large enough for any workload's weights (the atlas only takes
/// the slots the weights need).
const RESIDENT_REFERENCE_CAP: u64 = 1 << 40;
/// Most requests one `run` submits.
const MAX_ITERATIONS: u32 = 1_000_000;

/// One policy's run.
struct Outcome {
    stats: EngineStats,
    /// Hash of every request's outputs, in order.
    hash: u64,
    last: Values,
    costs: Vec<scheduler::Profile>,
    /// The last requests' residency as they ran.
    residency_svg: Option<String>,
    /// Seconds the engine took to open (device, atlas, pipelines; preload's uploads).
    open_s: f64,
    /// Wall seconds of each request, in order.
    request_s: Vec<f64>,
    /// The process's threads just before the engine shut down (its own among them).
    threads: Vec<ThreadCpu>,
}

/// `--cold`: one policy's start from disk.
#[derive(serde::Serialize)]
struct ColdStart {
    policy: String,
    /// Opening the packed models after they left the page cache: reads and checks their
    /// headers; each page is checked when it is read (by the engine's start where it keeps a
    /// host mirror, else by the loads).
    load_s: f64,
    read_bytes: u64,
    /// The disk's read rate, probed on the largest packed file before the start, and what
    /// reading every packed byte once takes at it: the disk's share of a cold start (every
    /// byte is read before the first output where the engine keeps a host mirror or preloads).
    disk_bytes_per_s: f64,
    disk_read_s: f64,
    open_s: f64,
    first_request_s: f64,
    /// Median of the later requests (the calibrating ones excluded where there are others).
    warm_request_s: Option<f64>,
    /// Where the engine kept a host mirror: the wall time of its fill, which starts in the
    /// engine's open and runs behind the first request, and how much of it overlapped that
    /// request (the part after the stream engine opened, at most the request's time; the
    /// little of the open after the stream engine is counted as overlap).
    mirror_fill_s: Option<f64>,
    mirror_overlap_s: Option<f64>,
    /// The first request alone as the engine planned it from disk at the probed rate (with the
    /// resident reference's step costs where `--resident-reference` measured them): prediction
    /// and lower bound.
    first_request_planned: Option<texstream::engine::FirstRequestEstimate>,
}

impl ColdStart {
    fn integrated_s(&self) -> f64 {
        self.load_s + self.open_s + self.first_request_s
    }

    /// The integrated latency (open the files, start the engine, the first request) over the
    /// first request's lower bound from disk. Not the first request alone: pages the host
    /// mirror read while the engine started (planning, pipelines) are not read during the
    /// request, so that request can beat a bound that counts every read (planned's 1451 ms
    /// against 2076 on the H200, session 27).
    fn integrated_over_lower_bound(&self) -> Option<f64> {
        self.first_request_planned
            .filter(|e| e.lower_bound_s > 0.0)
            .map(|e| self.integrated_s() / e.lower_bound_s)
    }

    fn line(&self) -> String {
        let ms = |s: f64| format!("{:.1} ms", s * 1e3);
        let planned = match self.first_request_planned {
            Some(e) => format!(
                " (planned from disk: predicted {}, lower bound {})",
                ms(e.predicted_s),
                ms(e.lower_bound_s)
            ),
            None => String::new(),
        };
        let over = self
            .integrated_over_lower_bound()
            .map_or(String::new(), |r| format!(", ÷ the first's LB {r:.2}"));
        format!(
            "cold start ({}): load {} ({:.0} MiB on disk; headers read, pages checked as they are read), engine open {}, first request {}{planned}; integrated {}{over}; warm request {}{}; the disk reads at {:.0} MB/s, every byte once in {}",
            self.policy,
            ms(self.load_s),
            self.read_bytes as f64 / (1 << 20) as f64,
            ms(self.open_s),
            ms(self.first_request_s),
            ms(self.integrated_s()),
            self.warm_request_s.map_or("-".into(), ms),
            match (self.mirror_fill_s, self.mirror_overlap_s) {
                (Some(f), Some(o)) => format!(
                    "; host mirror filled in {}, {} of it behind the first request",
                    ms(f),
                    ms(o)
                ),
                _ => String::new(),
            },
            self.disk_bytes_per_s / 1e6,
            ms(self.disk_read_s),
        )
    }
}

/// Bytes of the largest packed file [`load_cold`] reads to probe the disk's rate.
const DISK_PROBE_BYTES: u64 = 256 << 20;

/// What [`load_cold`] measured besides the reloaded workload.
struct ColdLoad {
    load_s: f64,
    read_bytes: u64,
    disk_bytes_per_s: f64,
}

/// The workload reloaded after its packed models were dropped from the page cache (and the
/// disk's read rate probed on the largest of them, dropped again after).
fn load_cold(loaded: &Loaded) -> Result<(Loaded, ColdLoad)> {
    let mut bytes = 0;
    let mut largest: Option<(u64, &std::path::Path)> = None;
    for (name, m) in &loaded.models {
        texstream::packed::drop_from_page_cache(m.path()).with_context(|| {
            format!(
                "model `{name}`: dropping {} from the page cache",
                m.path().display()
            )
        })?;
        let len = std::fs::metadata(m.path())?.len();
        bytes += len;
        if largest.is_none_or(|(l, _)| len > l) {
            largest = Some((len, m.path()));
        }
    }
    let disk_bytes_per_s = match largest {
        Some((_, path)) => {
            let (read, secs) = texstream::packed::probe_disk_read(path, DISK_PROBE_BYTES)
                .with_context(|| format!("probing the disk's read rate on {}", path.display()))?;
            read as f64 / secs.max(1e-9)
        }
        None => f64::INFINITY,
    };
    let t = Instant::now();
    let cold =
        texstream::engine::loaded::load(loaded.workload.clone(), None, None, &mut |model, why| {
            log::warn!("--cold: compiling model `{model}` ({why})")
        })?;
    Ok((
        cold,
        ColdLoad {
            load_s: t.elapsed().as_secs_f64(),
            read_bytes: bytes,
            disk_bytes_per_s,
        },
    ))
}

/// The median of the requests after the first (and after the calibrating ones where more
/// remain).
fn warm_median(request_s: &[f64], calibrating: u32) -> Option<f64> {
    let skip = if request_s.len() > calibrating as usize + 1 {
        calibrating.max(1) as usize
    } else {
        1
    };
    let mut warm: Vec<f64> = request_s.iter().skip(skip).copied().collect();
    warm.sort_by(f64::total_cmp);
    warm.get(warm.len().checked_sub(1)? / 2).copied()
}

/// The pipeline's inputs: demo inputs by name, replaced by `--input`; read and checked before
/// any device is opened.
fn request_inputs(loaded: &Loaded, pipeline: &str, args: &RunArgs) -> Result<Values> {
    let w = &loaded.workload;
    let g = loaded
        .graph_index(pipeline)
        .map(|i| &loaded.graphs[i])
        .with_context(|| {
            format!(
                "{}: no pipeline `{pipeline}` (it has {})",
                w.path.display(),
                loaded.names()
            )
        })?;
    let inputs: Vec<(&str, String)> = g
        .inputs
        .iter()
        .map(|&i| (g.values[i].name.as_str(), g.values[i].ty.to_string()))
        .collect();
    let mut files: BTreeMap<String, PathBuf> = w
        .spec
        .demo_inputs
        .iter()
        .map(|d| (d.name.clone(), w.resolve(&d.path)))
        .collect();
    for (name, path) in &args.inputs {
        if !inputs.iter().any(|(n, _)| n == name) {
            bail!(
                "--input {name}=...: pipeline `{pipeline}` has no input `{name}` (its inputs: {})",
                inputs
                    .iter()
                    .map(|(n, t)| format!("`{n}` ({t})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        files.insert(name.clone(), path.clone());
    }
    let mut values = Values::new();
    for (name, ty) in &inputs {
        let path = files.get(*name).with_context(|| {
            format!(
                "pipeline `{pipeline}` needs input `{name}` ({ty}): give --input {name}=FILE or a demo input"
            )
        })?;
        values.insert(name.to_string(), read_value(path)?);
    }
    texstream::pipeline::check_inputs(g, &values)?;
    Ok(values)
}

fn run_one(
    loaded: &Loaded,
    pipeline: &str,
    inputs: &Values,
    opts: EngineOptions,
    iterations: u32,
    progress: &Progress,
    label: &str,
) -> Result<Outcome> {
    let t_open = Instant::now();
    let engine = Engine::open_loaded(loaded.clone(), opts)?;
    let open_s = t_open.elapsed().as_secs_f64();
    let mut hash = HASH_SEED;
    let mut last = Values::new();
    let mut request_s = Vec::with_capacity(iterations as usize);
    for i in 0..iterations {
        progress.say(&format!("{label}: request {}/{iterations}", i + 1));
        let t = Instant::now();
        let r = engine
            .run(pipeline, inputs.clone())
            .with_context(|| format!("{label}: request {}", i + 1))?;
        request_s.push(t.elapsed().as_secs_f64());
        for (k, v) in &r.outputs {
            hash_bytes(&mut hash, k.as_bytes());
            hash_value(v, &mut hash);
        }
        last = r.outputs;
    }
    let costs = engine.costs().unwrap_or_default();
    let residency_svg = engine.residency_svg();
    let threads = process_threads();
    let stats = engine.shutdown();
    Ok(Outcome {
        stats,
        hash,
        last,
        costs,
        residency_svg,
        open_s,
        request_s,
        threads,
    })
}

pub fn run(args: &RunArgs) -> Result<()> {
    let w = load_workload(&args.workload)?;
    let spec = w.pipeline_spec(args.pipeline.as_deref())?;
    let iterations = args.iterations.unwrap_or(match spec.repeat {
        texstream::workload::Repeat::Once => 1,
        texstream::workload::Repeat::Times(n) | texstream::workload::Repeat::PerFrame(n) => n,
    });
    if iterations == 0 || iterations > MAX_ITERATIONS {
        bail!("--iterations must be 1..={MAX_ITERATIONS}, got {iterations}");
    }
    for p in [&args.metrics_json, &args.residency_svg]
        .into_iter()
        .flatten()
    {
        super::args::check_writable(p)?;
    }
    let env = EngineOptions::from_env();
    let base = EngineOptions {
        cap: args.cap,
        device: texstream::engine::DeviceChoice {
            name: args.device.clone().or(env.device.name.clone()),
            ..env.device.clone()
        },
        first_pipeline: args.pipeline.clone(),
        stream: texstream::StreamTuning {
            staging_pages: args.staging_pages,
            loads_per_submit: args.loads_per_submit,
            io_threads: args.io_threads,
            steps_per_batch: args.steps_per_batch,
            steps_per_part: args.steps_per_part,
            host_mirror: args.host_mirror,
            step_reuse: args.step_reuse,
            step_buffers: args.step_buffers,
            host_lead: args.host_lead,
            // The parser admits only the scheduler's names.
            plan_construction: args.plan_construction.as_deref().and_then(|n| {
                scheduler::PLANNED_CONSTRUCTIONS
                    .into_iter()
                    .find(|c| *c == n)
            }),
            cold_read_bytes_per_s: None,
        },
        // The first request (the first two with three or more) profiles: step costs are scaled
        // to the measured model times, the rest is planned with them.
        calibrate_after: if iterations >= 3 {
            2
        } else if iterations >= 2 {
            1
        } else {
            0
        },
        ..EngineOptions::default()
    };
    let progress = Progress::new();
    let loaded = texstream::engine::loaded::load(w.clone(), None, None, &mut |model, why| {
        progress.say(&format!("compiling model `{model}` ({why})"))
    })?;
    let pipeline = spec.name.clone();
    let inputs = request_inputs(&loaded, &pipeline, args)?;
    let policies: Vec<Policy> = if args.all_policies {
        Policy::ALL.to_vec()
    } else {
        vec![args.policy.unwrap_or(w.policy()?)]
    };
    let mut fixed = None;
    let mut resident: Option<EngineStats> = None;
    let mut reference_hash = None;
    if args.resident_reference {
        let resident_opts = EngineOptions {
            cap: Some(RESIDENT_REFERENCE_CAP),
            policy: Some(Policy::Preload),
            ..base.clone()
        };
        // The process's first engine pays what later ones find cached (the driver compiling
        // each pipeline, the GPU's clocks rising): on the H100 the camera frames' reference ran
        // at 1.7x the time of the streamed runs after it, so its step costs put their bound
        // above their measured time. A first pass takes those costs; the second is the
        // reference.
        run_one(
            &loaded,
            &pipeline,
            &inputs,
            resident_opts.clone(),
            iterations,
            &progress,
            "resident warm-up",
        )
        .context("resident warm-up run (preload, no cap)")?;
        let o = run_one(
            &loaded,
            &pipeline,
            &inputs,
            resident_opts,
            iterations,
            &progress,
            "resident reference",
        )
        .context("resident reference run (preload, no cap)")?;
        progress.suspend(|| {
            println!(
                "\nresident reference (preload, no cap; its step costs set every later policy's \
                 predicted time and LB):\n{}{}",
                o.stats.table(),
                threads_line(&o.threads)
            );
            print_outputs(&o.last);
        });
        reference_hash = Some(o.hash);
        fixed = Some(o.costs);
        resident = Some(o.stats);
    }
    let mut summaries: Vec<EngineStats> = Vec::new();
    let mut cold_starts: Vec<ColdStart> = Vec::new();
    let mut failures: Vec<(Policy, String)> = Vec::new();
    for &policy in &policies {
        let mut opts = EngineOptions {
            policy: Some(policy),
            fixed_costs: fixed.clone(),
            ..base.clone()
        };
        let cold_load = if args.cold {
            progress.say(&format!(
                "{}: dropping the packed models from the page cache",
                policy.name()
            ));
            let cold = load_cold(&loaded)?;
            // The engine plans its first request with every page read from disk at this rate.
            opts.stream.cold_read_bytes_per_s =
                Some(cold.1.disk_bytes_per_s.min(u64::MAX as f64) as u64).filter(|&r| r > 0);
            Some(cold)
        } else {
            None
        };
        let calibrating = opts.calibrate_after;
        match run_one(
            cold_load.as_ref().map_or(&loaded, |(l, _)| l),
            &pipeline,
            &inputs,
            opts,
            iterations,
            &progress,
            policy.name(),
        ) {
            Ok(o) => {
                if let Some((_, cl)) = cold_load {
                    let first_request_s = o.request_s.first().copied().unwrap_or(0.0);
                    let mirror = o.stats.host_mirror_bytes > 0;
                    let c = ColdStart {
                        policy: policy.name().to_string(),
                        load_s: cl.load_s,
                        read_bytes: cl.read_bytes,
                        disk_bytes_per_s: cl.disk_bytes_per_s,
                        disk_read_s: cl.read_bytes as f64 / cl.disk_bytes_per_s,
                        open_s: o.open_s,
                        first_request_s,
                        warm_request_s: warm_median(&o.request_s, calibrating),
                        mirror_fill_s: mirror.then_some(o.stats.mirror_fill_s),
                        mirror_overlap_s: mirror
                            .then(|| o.stats.mirror_fill_behind_s.min(first_request_s)),
                        first_request_planned: o.stats.cold_first_request,
                    };
                    progress.suspend(|| println!("\n{}", c.line()));
                    cold_starts.push(c);
                }
                match reference_hash {
                    None => {
                        progress.suspend(|| print_outputs(&o.last));
                        reference_hash = Some(o.hash);
                    }
                    Some(h) if h != o.hash => {
                        failures.push((policy, "outputs differ from the first run's".into()))
                    }
                    Some(_) => {}
                }
                progress.suspend(|| println!("\n{}{}", o.stats.table(), threads_line(&o.threads)));
                if let (Some(path), Some(svg)) = (&args.residency_svg, &o.residency_svg) {
                    let path = if args.all_policies {
                        super::args::per_policy(path, policy)
                    } else {
                        path.clone()
                    };
                    std::fs::write(&path, svg)
                        .with_context(|| format!("writing {}", path.display()))?;
                }
                summaries.push(o.stats);
            }
            Err(e) if args.all_policies => failures.push((policy, format!("{e:#}"))),
            Err(e) => return Err(e),
        }
    }
    progress.finish();
    if args.all_policies || resident.is_some() {
        print_comparison(resident.as_ref(), &summaries, &failures);
    }
    if cold_starts.len() > 1 {
        println!(
            "\n{:<18} {:>10} {:>10} {:>10} {:>12} {:>14} {:>10} {:>14} {:>12} {:>12}",
            "cold start",
            "load ms",
            "open ms",
            "first ms",
            "first LB ms",
            "integrated ms",
            "integ/LB",
            "warm req ms",
            "integ/warm",
            "disk read ms"
        );
        for c in &cold_starts {
            let warm = c.warm_request_s.unwrap_or(f64::NAN);
            println!(
                "{:<18} {:>10.1} {:>10.1} {:>10.1} {:>12.1} {:>14.1} {:>10.2} {:>14.1} {:>12.2} {:>12.1}",
                c.policy,
                c.load_s * 1e3,
                c.open_s * 1e3,
                c.first_request_s * 1e3,
                c.first_request_planned
                    .map_or(f64::NAN, |e| e.lower_bound_s * 1e3),
                c.integrated_s() * 1e3,
                c.integrated_over_lower_bound().unwrap_or(f64::NAN),
                warm * 1e3,
                c.integrated_s() / warm,
                c.disk_read_s * 1e3
            );
        }
    }
    if let Some(path) = &args.metrics_json {
        let json = if let Some(r) = &resident {
            serde_json::to_string_pretty(&serde_json::json!({
                "resident_reference": r,
                "policies": summaries,
                "cold_start": cold_starts,
            }))?
        } else if args.all_policies {
            serde_json::to_string_pretty(&summaries)?
        } else {
            serde_json::to_string_pretty(&summaries.first())?
        };
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    if summaries.iter().any(|s| s.peak_device_bytes > s.cap_bytes) {
        bail!("peak device bytes exceeded the cap");
    }
    if failures.iter().any(|(_, e)| e.contains("differ")) {
        bail!("policies disagree on the outputs");
    }
    Ok(())
}

/// Every policy side by side (and the resident reference run).
fn print_comparison(
    resident: Option<&EngineStats>,
    summaries: &[EngineStats],
    failures: &[(Policy, String)],
) {
    // The CPU pipeline steps run between the model runs under every policy; the scheduler's
    // LB covers the model runs only. `runs/LB` compares the model runs with it, `e2e/LB+cpu`
    // the whole run with LB plus the resident run's CPU steps (the run's own without one).
    let resident_cpu_s = resident.map(|r| (r.measured_s - r.model_s).max(0.0));
    println!(
        "{:<18} {:>11} {:>11} {:>11} {:>8} {:>8} {:>8} {:>8} {:>11} {:>12} {:>10} {:>14}",
        "policy",
        "measured ms",
        "predict ms",
        "LB ms",
        "runs/pr",
        "meas/LB",
        "runs/LB",
        "meas/res",
        "e2e/LB+cpu",
        "streamed MiB",
        "stall ms",
        "peak/cap MiB"
    );
    for (s, label) in resident
        .iter()
        .map(|s| (*s, "resident (no cap)"))
        .chain(summaries.iter().map(|s| (s, s.policy.as_str())))
    {
        let vs_resident = resident
            .filter(|r| r.measured_s > 0.0)
            .map_or(String::from("-"), |r| {
                format!("{:.2}", s.measured_s / r.measured_s)
            });
        let cpu_s = resident_cpu_s.unwrap_or((s.measured_s - s.model_s).max(0.0));
        let e2e = s.measured_s / (s.lower_bound_s + cpu_s).max(f64::MIN_POSITIVE);
        println!(
            "{:<18} {:>11.2} {:>11.2} {:>11.2} {:>8.2} {:>8.2} {:>8.2} {:>8} {:>11.2} {:>12.2} {:>10.2} {:>7.2}/{:<6}",
            label,
            s.measured_s * 1e3,
            s.predicted_s * 1e3,
            s.lower_bound_s * 1e3,
            s.model_over_predicted(),
            s.measured_over_lower_bound(),
            s.model_over_lower_bound(),
            vs_resident,
            e2e,
            s.bytes_streamed as f64 / 1048576.0,
            s.stall_s * 1e3,
            s.peak_device_bytes as f64 / 1048576.0,
            if s.cap_bytes >= RESIDENT_REFERENCE_CAP {
                "none".to_string()
            } else {
                format!("{:.2}", s.cap_bytes as f64 / 1048576.0)
            }
        );
    }
    for (p, e) in failures {
        println!("{:<18} not run: {e}", p.name());
    }
    if let Some(line) = common_bound_line(summaries) {
        println!("{line}");
    }
}

/// Each row's LB uses the page time its own session measured, and a policy whose copies
/// contend with compute measures slower copies. Every row ran the same requests, so the least
/// LB bounds them all: each policy's model runs over it.
fn common_bound_line(summaries: &[EngineStats]) -> Option<String> {
    let capped: Vec<&EngineStats> = summaries
        .iter()
        .filter(|s| s.lower_bound_s > 0.0 && s.cap_bytes < RESIDENT_REFERENCE_CAP)
        .collect();
    if capped.len() < 2 {
        return None;
    }
    let least = capped
        .iter()
        .map(|s| s.lower_bound_s)
        .fold(f64::INFINITY, f64::min);
    let rows: Vec<String> = capped
        .iter()
        .map(|s| format!("{} {:.2}", s.policy, s.model_s / least))
        .collect();
    Some(format!(
        "least LB of the capped rows {:.2} ms (each row's LB uses its own session's page time); model runs over it: {}",
        least * 1e3,
        rows.join(", ")
    ))
}

/// The last request's outputs.
fn print_outputs(outputs: &Values) {
    for (name, v) in outputs {
        println!("{} (last request)", summarize(name, v));
    }
}
