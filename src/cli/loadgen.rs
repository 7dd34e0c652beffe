//! `texstream loadgen`: a load generator for `texstream serve`. C clients on loopback each send
//! up to N KServe infer requests (binary-tensor bodies built once from the input files: a
//! BYTES input gets the file's bytes, a tensor input the `.npy` file's values), bounded by
//! `--duration`; it prints throughput, p50/p99 latency, errors, whether every answer had the
//! same bytes, and the peak device bytes read from `/metrics` against the cap (failing if it
//! is above). `--compare-library WORKLOAD` then times the same request through `Engine::run`
//! in this process, so the service's own overhead per request (p50 over the library's) shows.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Value as Json};
use texstream::engine::stats::percentile;
use texstream::pipeline::io::read_value;
use texstream::{Engine, EngineOptions, Values};

use super::args::parse_named_path;

#[derive(Args, Debug)]
pub struct LoadgenArgs {
    /// The server's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    pub url: String,
    /// The model or pipeline to call.
    #[arg(long)]
    pub model: String,
    /// An input: NAME=FILE (a .npy for tensor inputs; any file for BYTES inputs such as
    /// images), repeatable.
    #[arg(long = "input", value_name = "NAME=FILE", value_parser = parse_named_path)]
    pub inputs: Vec<(String, PathBuf)>,
    /// Concurrent clients.
    #[arg(short = 'c', long, default_value_t = 1)]
    pub concurrency: usize,
    /// Requests per client.
    #[arg(short = 'n', long, default_value_t = 100)]
    pub requests: usize,
    /// Stop after this many seconds even if requests are left.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Bearer token (default: the TEXSTREAM_TOKEN variable).
    #[arg(long)]
    pub token: Option<String>,
    /// Also time the same request through the library (`Engine::run`) on this workload.
    #[arg(long, value_name = "WORKLOAD")]
    pub compare_library: Option<PathBuf>,
    /// Also print the summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Most requests one run sends (clients × requests).
const MAX_TOTAL: usize = 10_000_000;

/// The request body: the JSON header and the binary part after it.
struct Body {
    bytes: Vec<u8>,
    header_length: usize,
}

fn build_body(meta: &Json, args: &LoadgenArgs) -> Result<Body> {
    let files: BTreeMap<&str, &PathBuf> =
        args.inputs.iter().map(|(n, p)| (n.as_str(), p)).collect();
    let mut inputs = Vec::new();
    let mut blobs: Vec<u8> = Vec::new();
    for input in meta["inputs"]
        .as_array()
        .context("model metadata has no inputs")?
    {
        let name = input["name"].as_str().context("an input has no name")?;
        let datatype = input["datatype"].as_str().unwrap_or("FP32");
        let path = files
            .get(name)
            .with_context(|| format!("model `{}` needs --input {name}=FILE", args.model))?;
        let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
        let (dt, shape, raw) = if datatype == "BYTES" {
            let mut raw = (bytes.len() as u32).to_le_bytes().to_vec();
            raw.extend_from_slice(&bytes);
            ("BYTES", vec![1usize], raw)
        } else {
            let a = texstream::runtime::npy::parse_npy(path, &bytes)?;
            let raw: Vec<u8> = if a.integer {
                a.data
                    .iter()
                    .flat_map(|&x| (x as i64).to_le_bytes())
                    .collect()
            } else {
                a.data.iter().flat_map(|x| x.to_le_bytes()).collect()
            };
            (if a.integer { "INT64" } else { "FP32" }, a.shape, raw)
        };
        inputs.push(json!({
            "name": name, "datatype": dt, "shape": shape,
            "parameters": {"binary_data_size": raw.len()},
        }));
        blobs.extend_from_slice(&raw);
    }
    let header = serde_json::to_vec(&json!({
        "inputs": inputs,
        "parameters": {"binary_data_output": true},
    }))?;
    let header_length = header.len();
    let mut bytes = header;
    bytes.extend_from_slice(&blobs);
    Ok(Body {
        bytes,
        header_length,
    })
}

/// One answered (or failed) request.
struct Sample {
    latency_s: f64,
    status: Option<u16>,
    body_hash: u64,
}

fn fnv(bytes: &[u8]) -> u64 {
    let mut h = texstream::pipeline::io::HASH_SEED;
    texstream::pipeline::io::hash_bytes(&mut h, bytes);
    h
}

/// Reads one unlabelled gauge from Prometheus text.
fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (n, v) = l.split_once(' ')?;
        (n == name).then(|| v.trim().parse().ok()).flatten()
    })
}

pub fn run(args: &LoadgenArgs) -> Result<()> {
    if args.concurrency == 0 || args.requests == 0 {
        bail!("-c and -n must be at least 1");
    }
    if args.concurrency.saturating_mul(args.requests) > MAX_TOTAL {
        bail!("at most {MAX_TOTAL} requests in one run");
    }
    let deadline = match args.duration {
        Some(d) => {
            Some(Duration::try_from_secs_f64(d).context("--duration must be a number of seconds")?)
        }
        None => None,
    };
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var("TEXSTREAM_TOKEN").ok());
    let base = args.url.trim_end_matches('/').to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let client = reqwest::Client::new();
    let auth = |r: reqwest::RequestBuilder| match &token {
        Some(t) => r.bearer_auth(t),
        None => r,
    };
    let (samples, wall, metrics) = rt.block_on(async {
        let meta_url = format!("{base}/v2/models/{}", args.model);
        let resp = auth(client.get(&meta_url))
            .send()
            .await
            .with_context(|| meta_url.clone())?;
        if !resp.status().is_success() {
            bail!(
                "{meta_url}: {} {}",
                resp.status(),
                resp.text().await.unwrap_or_default()
            );
        }
        let meta: Json = serde_json::from_slice(&resp.bytes().await?)?;
        let body = Arc::new(build_body(&meta, args)?);
        let url = Arc::new(format!("{base}/v2/models/{}/infer", args.model));
        let t0 = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..args.concurrency {
            let (client, body, url, token) =
                (client.clone(), body.clone(), url.clone(), token.clone());
            let n = args.requests;
            tasks.push(tokio::spawn(async move {
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    if deadline.is_some_and(|d| t0.elapsed() >= d) {
                        break;
                    }
                    let mut req = client
                        .post(url.as_str())
                        .header("Inference-Header-Content-Length", body.header_length)
                        .header("Content-Type", "application/octet-stream")
                        .body(body.bytes.clone());
                    if let Some(t) = &token {
                        req = req.bearer_auth(t);
                    }
                    let s = Instant::now();
                    let (status, hash) = match req.send().await {
                        Ok(r) => {
                            let st = r.status().as_u16();
                            let b = r.bytes().await.map(|b| fnv(&b)).unwrap_or(0);
                            (Some(st), b)
                        }
                        Err(_) => (None, 0),
                    };
                    out.push(Sample {
                        latency_s: s.elapsed().as_secs_f64(),
                        status,
                        body_hash: hash,
                    });
                }
                out
            }));
        }
        let mut samples = Vec::new();
        for t in tasks {
            samples.extend(t.await?);
        }
        let wall = t0.elapsed().as_secs_f64();
        let m = auth(client.get(format!("{base}/metrics")))
            .send()
            .await?
            .text()
            .await?;
        anyhow::Ok((samples, wall, m))
    })?;
    let mut ok: Vec<f64> = samples
        .iter()
        .filter(|s| s.status == Some(200))
        .map(|s| s.latency_s)
        .collect();
    ok.sort_by(f64::total_cmp);
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.status != Some(200)) {
        *errors
            .entry(s.status.map_or("transport".into(), |c| c.to_string()))
            .or_default() += 1;
    }
    let distinct: std::collections::BTreeSet<u64> = samples
        .iter()
        .filter(|s| s.status == Some(200))
        .map(|s| s.body_hash)
        .collect();
    let (p50, p99) = (percentile(&ok, 50.0), percentile(&ok, 99.0));
    let peak = gauge(&metrics, "texstream_peak_device_bytes");
    let cap = gauge(&metrics, "texstream_cap_bytes");
    println!(
        "{} requests in {:.3} s from {} clients: {:.1} req/s; {} ok, errors {:?}; \
         {} distinct answers",
        samples.len(),
        wall,
        args.concurrency,
        ok.len() as f64 / wall.max(1e-9),
        ok.len(),
        errors,
        distinct.len()
    );
    println!(
        "latency p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        p50 * 1e3,
        p99 * 1e3,
        ok.last().copied().unwrap_or(0.0) * 1e3
    );
    let mib = |b: f64| b / (1u64 << 20) as f64;
    if let (Some(p), Some(c)) = (peak, cap) {
        println!(
            "peak device bytes {p:.0} of cap {c:.0} ({:.2} / {:.2} MiB){}",
            mib(p),
            mib(c),
            if p <= c { "" } else { ": ABOVE THE CAP" }
        );
    }
    let mut summary = json!({
        "requests": samples.len(), "ok": ok.len(), "errors": errors, "wall_s": wall,
        "throughput_per_s": ok.len() as f64 / wall.max(1e-9),
        "p50_s": p50, "p99_s": p99, "distinct_answers": distinct.len(),
        "peak_device_bytes": peak, "cap_bytes": cap,
    });
    if let Some(w) = &args.compare_library {
        let lib = library_p50(w, args, ok.len().clamp(1, 200))?;
        println!(
            "library Engine::run p50 {:.3} ms; service overhead per request {:.3} ms (p50 {:.3} \
             over {:.3} ms, x{:.3})",
            lib * 1e3,
            (p50 - lib) * 1e3,
            p50 * 1e3,
            lib * 1e3,
            if lib > 0.0 { p50 / lib } else { 0.0 }
        );
        summary["library_p50_s"] = json!(lib);
        summary["overhead_p50_s"] = json!(p50 - lib);
    }
    if args.json {
        println!("{summary}");
    }
    if let (Some(p), Some(c)) = (peak, cap) {
        if p > c {
            bail!("peak device bytes {p} are above the cap {c}");
        }
    }
    Ok(())
}

/// p50 of `n` sequential `Engine::run` calls with the same inputs (after two warm-up calls).
fn library_p50(workload: &std::path::Path, args: &LoadgenArgs, n: usize) -> Result<f64> {
    let engine = Engine::open(workload, EngineOptions::from_env())?;
    let mut inputs = Values::new();
    for (name, path) in &args.inputs {
        inputs.insert(name.clone(), read_value(path)?);
    }
    for _ in 0..2 {
        engine.run(&args.model, inputs.clone())?;
    }
    let mut t = Vec::with_capacity(n);
    for _ in 0..n {
        let s = Instant::now();
        engine.run(&args.model, inputs.clone())?;
        t.push(s.elapsed().as_secs_f64());
    }
    engine.shutdown();
    t.sort_by(f64::total_cmp);
    Ok(percentile(&t, 50.0))
}
