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
    /// Seconds each policy is measured (after one warm-up request of each pipeline), split
    /// evenly over the rounds.
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Rounds: each round runs every policy in turn on a fresh engine (round k's arrivals are
    /// seeded alike for every policy), and each policy's latencies are pooled over the rounds,
    /// so drift of the machine over time and the spread between engine instances fall on every
    /// policy alike.
    #[arg(long, default_value_t = 1)]
    pub rounds: u32,
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
    /// Write each policy's last requests as they really ran (GPU-timed copies, evictions and
    /// compute batches, the last round) as SVG, to FILE-POLICY.svg.
    #[arg(long, value_name = "FILE")]
    pub residency_svg: Option<PathBuf>,
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
    /// The latencies (seconds), pooled over rounds before the percentiles are taken.
    #[serde(skip)]
    latencies: Vec<f64>,
    #[serde(skip)]
    hashes: BTreeMap<u64, usize>,
}

/// One policy's run (its rounds pooled).
#[derive(Debug, Clone, serde::Serialize)]
struct PolicyRow {
    policy: String,
    pipelines: Vec<PipelineRow>,
    /// Summed over the rounds: GPU stall, bytes streamed, re-plans; the peak is the largest.
    totals: RoundTotals,
    /// Every round's statistics.
    rounds: Vec<EngineStats>,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
struct RoundTotals {
    stall_s: f64,
    /// GPU time in kernels (timestamps): the same kernels under every policy, so its spread
    /// between policies is the machine's, not the policy's.
    compute_busy_s: f64,
    bytes_streamed: u64,
    replans: texstream::engine::stats::ReplanCounts,
    peak_device_bytes: u64,
    cap_bytes: u64,
}

impl PolicyRow {
    /// Adds another round of the same policy.
    fn pool(&mut self, other: PolicyRow) {
        for (a, b) in self.pipelines.iter_mut().zip(other.pipelines) {
            a.latencies.extend(b.latencies);
            a.errors += b.errors;
            for (h, n) in b.hashes {
                *a.hashes.entry(h).or_default() += n;
            }
        }
        for r in &other.rounds {
            self.totals.add(r);
        }
        self.rounds.extend(other.rounds);
    }

    /// Percentiles and answer counts from the pooled latencies.
    fn finish(&mut self) {
        for p in &mut self.pipelines {
            p.requests = p.latencies.len();
            p.p50_ms = percentile_ms(&mut p.latencies, 50.0);
            p.p99_ms = percentile_ms(&mut p.latencies, 99.0);
            p.distinct_answers = p.hashes.len();
            p.hash = (p.hashes.len() == 1).then(|| *p.hashes.keys().next().unwrap_or(&0));
        }
    }
}

impl RoundTotals {
    fn add(&mut self, s: &EngineStats) {
        self.stall_s += s.stall_s;
        self.compute_busy_s += s.compute_busy_s;
        self.bytes_streamed += s.bytes_streamed;
        self.replans.add(&s.replans);
        self.peak_device_bytes = self.peak_device_bytes.max(s.peak_device_bytes);
        self.cap_bytes = s.cap_bytes;
    }
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
    round: u32,
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
    let end = start + Duration::from_secs_f64(args.duration / args.rounds as f64);
    let mut threads = Vec::new();
    for (i, (name, arrival, inputs)) in streams.iter().cloned().enumerate() {
        let engine = engine.clone();
        let seed = args
            .seed
            .wrapping_add(i as u64 * 0x9e37_79b9)
            .wrapping_add(round as u64 * 0x2545_f491_4f6c_dd1d)
            | 1;
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
        let (name, lat, errors, hashes) = t
            .join()
            .map_err(|_| anyhow::anyhow!("a client thread panicked"))?;
        pipelines.push(PipelineRow {
            pipeline: name,
            requests: 0,
            errors,
            p50_ms: 0.0,
            p99_ms: 0.0,
            hash: None,
            distinct_answers: 0,
            latencies: lat,
            hashes,
        });
    }
    if let Some(path) = &args.residency_svg {
        if let Some(svg) = engine.residency_svg() {
            let path = super::args::per_policy(path, policy);
            std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    // End the streaming session (its GPU times are live already; this also waits for them).
    engine.settle()?;
    let stats = engine.stats();
    let mut totals = RoundTotals::default();
    totals.add(&stats);
    Ok(PolicyRow {
        policy: policy.name().into(),
        pipelines,
        rounds: vec![stats],
        totals,
    })
}

pub fn run(args: &StreamArgs) -> Result<()> {
    if !(args.duration > 0.0 && args.duration <= 3600.0) {
        bail!("--duration must be in (0, 3600] seconds");
    }
    if !(1..=100).contains(&args.rounds) {
        bail!("--rounds must be 1..=100");
    }
    for p in [&args.json, &args.residency_svg].into_iter().flatten() {
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
    let mut rows: Vec<PolicyRow> = Vec::new();
    let mut failed: Vec<Policy> = Vec::new();
    for round in 0..args.rounds {
        for &p in &policies {
            if failed.contains(&p) {
                continue;
            }
            eprintln!(
                "{p}: round {}/{}: {:.1} s of requests",
                round + 1,
                args.rounds,
                args.duration / args.rounds as f64
            );
            match run_policy(&loaded, p, args, round, &streams, &base) {
                Ok(r) => match rows.iter_mut().find(|x| x.policy == r.policy) {
                    Some(row) => row.pool(r),
                    None => rows.push(r),
                },
                Err(e) => {
                    eprintln!("{p}: not run: {e:#}");
                    failed.push(p);
                    rows.retain(|x| x.policy != p.name());
                }
            }
        }
    }
    rows.iter_mut().for_each(PolicyRow::finish);
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
        if r.totals.peak_device_bytes > r.totals.cap_bytes {
            bail!(
                "{}: peak device bytes {} over the cap {}",
                r.policy,
                r.totals.peak_device_bytes,
                r.totals.cap_bytes
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
        "{:<12} {:>10} {:>11} {:>13} {:>8} {:>9} {:>8} {:>8} {:>8} {:>9} {:>16}",
        "policy",
        "stall ms",
        "compute s",
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
        let s = &r.totals;
        let mib = |b: u64| b as f64 / 1048576.0;
        println!(
            "{:<12} {:>10.2} {:>11.2} {:>13.1} {:>8} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8.2}/{:<7.2}",
            r.policy,
            s.stall_s * 1e3,
            s.compute_busy_s,
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
