//! `texstream bench stream`: an open request stream, the case the merged timeline exists for.
//! Several pipelines of one workload are submitted concurrently by their own clients (one at a
//! fixed period, say camera frames, another at seeded random times), under one cap, for a fixed
//! time, once per policy on a fresh engine. Prints per policy and pipeline the request count and
//! p50/p99 latency (arrival to answer), and per policy the GPU stall, bytes streamed, how often
//! the plan had to change (by cause) and the peak device bytes against the cap. Every answer of
//! a pipeline must be the same bits under every policy (same inputs, same outputs).
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use texstream::engine::Loaded;
use texstream::pipeline::io::{hash_values, read_value};
use texstream::workload::load_workload;
use texstream::{Engine, EngineOptions, EngineStats, Policy, SubmitOptions, Values};

use super::args::{parse_named_path, parse_size_arg};

#[derive(clap::Args, Debug)]
pub struct StreamArgs {
    /// Workload file (RON) with the pipelines to interleave.
    pub workload: PathBuf,
    /// How each pipeline's requests arrive (repeatable): `NAME=every:MS` (a fixed period in
    /// milliseconds) or `NAME=random:PER_S` (exponential gaps at that mean rate, seeded).
    #[arg(
        long = "arrivals",
        value_name = "NAME=every:MS|random:PER_S",
        required = true
    )]
    pub arrivals: Vec<String>,
    /// Seconds each policy is measured (after one warm-up request of each pipeline).
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Device memory cap; default: the workload's.
    #[arg(long, value_parser = parse_size_arg)]
    pub cap: Option<u64>,
    /// Policies to compare, comma-separated.
    #[arg(long, default_value = "planned,on-demand,lru")]
    pub policies: String,
    /// Seed of the random arrivals.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Replace a pipeline input (default: the workload's demo input): NAME=FILE (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE", value_parser = parse_named_path)]
    pub inputs: Vec<(String, PathBuf)>,
    /// Vulkan device (index or name substring).
    #[arg(long)]
    pub device: Option<String>,
    /// Also write the results as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// When a pipeline's requests arrive.
#[derive(Debug, Clone, Copy)]
enum Arrival {
    Every(Duration),
    Random { per_s: f64 },
}

fn parse_arrival(s: &str) -> Result<(String, Arrival)> {
    let (name, how) = s
        .split_once('=')
        .with_context(|| format!("--arrivals `{s}` is not NAME=every:MS or NAME=random:PER_S"))?;
    let a = match how.split_once(':') {
        Some(("every", ms)) => {
            let ms: f64 = ms
                .parse()
                .with_context(|| format!("--arrivals {s}: period"))?;
            if !(ms > 0.0 && ms.is_finite()) {
                bail!("--arrivals {s}: the period must be positive");
            }
            Arrival::Every(Duration::from_secs_f64(ms / 1e3))
        }
        Some(("random", r)) => {
            let per_s: f64 = r.parse().with_context(|| format!("--arrivals {s}: rate"))?;
            if !(per_s > 0.0 && per_s.is_finite()) {
                bail!("--arrivals {s}: the rate must be positive");
            }
            Arrival::Random { per_s }
        }
        _ => bail!("--arrivals `{s}`: use every:MS or random:PER_S"),
    };
    Ok((name.to_string(), a))
}

/// One pipeline's answers under one policy.
#[derive(Debug, Clone, serde::Serialize)]
struct PipelineRow {
    pipeline: String,
    requests: usize,
    errors: usize,
    p50_ms: f64,
    p99_ms: f64,
    /// Every answer's output hash was this one.
    #[serde(skip)]
    hash: Option<u64>,
    distinct_answers: usize,
}

/// One policy's run.
#[derive(Debug, Clone, serde::Serialize)]
struct PolicyRow {
    policy: String,
    pipelines: Vec<PipelineRow>,
    stats: EngineStats,
}

fn percentile_ms(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    texstream::engine::stats::percentile(v, p) * 1e3
}

/// A small deterministic generator (xorshift) for the random arrivals.
fn next_uniform(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 11) as f64 / (1u64 << 53) as f64
}

fn values_hash(v: &Values) -> u64 {
    hash_values(v)
}

fn run_policy(
    loaded: &Loaded,
    policy: Policy,
    args: &StreamArgs,
    streams: &[(String, Arrival, Values)],
    base: &EngineOptions,
) -> Result<PolicyRow> {
    let engine = Arc::new(Engine::open_loaded(
        loaded.clone(),
        EngineOptions {
            policy: Some(policy),
            cap: args.cap,
            calibrate_after: streams.len() as u32,
            ..base.clone()
        },
    )?);
    // Warm-up: pipelines created, costs calibrated on one request of each.
    for (name, _, inputs) in streams {
        engine
            .run(name, inputs.clone())
            .with_context(|| format!("{policy}: warm-up request of `{name}`"))?;
    }
    let start = Instant::now() + Duration::from_millis(50);
    let end = start + Duration::from_secs_f64(args.duration);
    let mut threads = Vec::new();
    for (i, (name, arrival, inputs)) in streams.iter().cloned().enumerate() {
        let engine = engine.clone();
        let seed = args.seed.wrapping_add(i as u64 * 0x9e37_79b9) | 1;
        threads.push(std::thread::spawn(move || {
            let (tx, rx) = crossbeam_channel::unbounded::<(Instant, texstream::RequestHandle)>();
            // Answers are collected on their own thread so that arrivals stay on time.
            let collector = std::thread::spawn(move || {
                let mut lat = Vec::new();
                let (mut errors, mut hashes) = (0usize, BTreeMap::<u64, usize>::new());
                for (arrived, h) in rx {
                    match h.wait() {
                        Ok(r) => {
                            lat.push(arrived.elapsed().as_secs_f64());
                            *hashes.entry(values_hash(&r.outputs)).or_default() += 1;
                        }
                        Err(_) => errors += 1,
                    }
                }
                (lat, errors, hashes)
            });
            let mut state = seed;
            let mut t = start;
            let mut refused = 0usize;
            loop {
                t += match arrival {
                    Arrival::Every(p) => p,
                    Arrival::Random { per_s } => {
                        Duration::from_secs_f64(-(1.0 - next_uniform(&mut state)).ln() / per_s)
                    }
                };
                if t >= end {
                    break;
                }
                if let Some(d) = t.checked_duration_since(Instant::now()) {
                    std::thread::sleep(d);
                }
                let opts = SubmitOptions {
                    queue_timeout: Some(Duration::from_secs(30)),
                    ..SubmitOptions::default()
                };
                match engine.submit(&name, inputs.clone(), opts) {
                    Ok(h) => {
                        let _ = tx.send((t, h));
                    }
                    Err(_) => refused += 1,
                }
            }
            drop(tx);
            let (lat, errors, hashes) = collector.join().unwrap_or_default();
            (name, lat, errors + refused, hashes)
        }));
    }
    let mut pipelines = Vec::new();
    for t in threads {
        let (name, mut lat, errors, hashes) = t
            .join()
            .map_err(|_| anyhow::anyhow!("a client thread panicked"))?;
        pipelines.push(PipelineRow {
            pipeline: name,
            requests: lat.len(),
            errors,
            p50_ms: percentile_ms(&mut lat, 50.0),
            p99_ms: percentile_ms(&mut lat, 99.0),
            hash: (hashes.len() == 1).then(|| *hashes.keys().next().unwrap_or(&0)),
            distinct_answers: hashes.len(),
        });
    }
    // End the streaming session so its GPU times are counted.
    engine.settle()?;
    let stats = engine.stats();
    Ok(PolicyRow {
        policy: policy.name().into(),
        pipelines,
        stats,
    })
}

pub fn run(args: &StreamArgs) -> Result<()> {
    if !(args.duration > 0.0 && args.duration <= 3600.0) {
        bail!("--duration must be in (0, 3600] seconds");
    }
    if let Some(p) = &args.json {
        super::args::check_writable(p)?;
    }
    let w = load_workload(&args.workload)?;
    let loaded = texstream::engine::loaded::load(w, None, None, &mut |m, why| {
        eprintln!("compiling model `{m}` ({why})")
    })?;
    let mut streams = Vec::new();
    for a in &args.arrivals {
        let (name, arrival) = parse_arrival(a)?;
        let g = loaded
            .graph_index(&name)
            .map(|i| &loaded.graphs[i])
            .with_context(|| {
                format!(
                    "--arrivals: no pipeline `{name}` (it has {})",
                    loaded.names()
                )
            })?;
        let mut inputs = Values::new();
        for &i in &g.inputs {
            let input = &g.values[i].name;
            let path = args
                .inputs
                .iter()
                .find(|(n, _)| n == input)
                .map(|(_, p)| p.clone())
                .or_else(|| {
                    loaded
                        .workload
                        .spec
                        .demo_inputs
                        .iter()
                        .find(|d| &d.name == input)
                        .map(|d| loaded.workload.resolve(&d.path))
                })
                .with_context(|| {
                    format!("pipeline `{name}` needs input `{input}`: give --input")
                })?;
            inputs.insert(input.clone(), read_value(&path)?);
        }
        texstream::pipeline::check_inputs(g, &inputs)?;
        streams.push((name, arrival, inputs));
    }
    let policies: Vec<Policy> = args
        .policies
        .split(',')
        .map(|p| p.trim().parse())
        .collect::<Result<_, _>>()?;
    let env = EngineOptions::from_env();
    let base = EngineOptions {
        device: texstream::DeviceChoice {
            name: args.device.clone().or(env.device.name.clone()),
            ..env.device.clone()
        },
        queue_depth: 4096,
        ..env
    };
    let mut rows = Vec::new();
    for &p in &policies {
        eprintln!("{p}: {} s of requests", args.duration);
        match run_policy(&loaded, p, args, &streams, &base) {
            Ok(r) => rows.push(r),
            Err(e) => eprintln!("{p}: not run: {e:#}"),
        }
    }
    print_table(&rows);
    // The same inputs must give the same bits under every policy.
    let mut want: BTreeMap<&str, u64> = BTreeMap::new();
    for r in &rows {
        for p in &r.pipelines {
            match (p.hash, want.get(p.pipeline.as_str())) {
                (None, _) if p.requests > 0 => {
                    bail!(
                        "{}: `{}` gave {} different answers to the same request",
                        r.policy,
                        p.pipeline,
                        p.distinct_answers
                    )
                }
                (Some(h), Some(&w)) if h != w => {
                    bail!(
                        "{}: `{}` answers differ from another policy's",
                        r.policy,
                        p.pipeline
                    )
                }
                (Some(h), None) => {
                    want.insert(&p.pipeline, h);
                }
                _ => {}
            }
        }
        if r.stats.peak_device_bytes > r.stats.cap_bytes {
            bail!(
                "{}: peak device bytes {} over the cap {}",
                r.policy,
                r.stats.peak_device_bytes,
                r.stats.cap_bytes
            );
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn print_table(rows: &[PolicyRow]) {
    println!(
        "{:<12} {:<12} {:>8} {:>7} {:>10} {:>10}",
        "policy", "pipeline", "requests", "errors", "p50 ms", "p99 ms"
    );
    for r in rows {
        for p in &r.pipelines {
            println!(
                "{:<12} {:<12} {:>8} {:>7} {:>10.2} {:>10.2}",
                r.policy, p.pipeline, p.requests, p.errors, p.p50_ms, p.p99_ms
            );
        }
    }
    println!();
    println!(
        "{:<12} {:>10} {:>13} {:>8} {:>9} {:>8} {:>8} {:>8} {:>9} {:>16}",
        "policy",
        "stall ms",
        "streamed MiB",
        "re-plans",
        "unpred.",
        "fan-out",
        "horizon",
        "mix",
        "ahead",
        "peak/cap MiB"
    );
    for r in rows {
        let s = &r.stats;
        let mib = |b: u64| b as f64 / 1048576.0;
        println!(
            "{:<12} {:>10.2} {:>13.1} {:>8} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8.2}/{:<7.2}",
            r.policy,
            s.stall_s * 1e3,
            mib(s.bytes_streamed),
            s.replans.total(),
            s.replans.unpredicted_request,
            s.replans.fan_out,
            s.replans.horizon,
            s.replans.mix,
            s.replans.prepared,
            mib(s.peak_device_bytes),
            mib(s.cap_bytes)
        );
    }
}
