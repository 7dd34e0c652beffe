//! `texstream bench reloads`: reloads under load. A client keeps sending one pipeline's request
//! while the workload file is rewritten and reloaded N times; every k-th rewrite is invalid in
//! one of the ways a user breaks a file (a syntax error, an unknown model, a cap below the
//! minimum, a missing model file, a corrupt model file). Counts requests lost (must be 0), wrong
//! outputs (must be 0), invalid reloads reported with their location (must be all), and checks
//! that after each valid reload the engine's plan is the new file's (its cap).
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use texstream::pipeline::io::{hash_values, read_value};
use texstream::{Engine, EngineOptions, Values};

#[derive(clap::Args, Debug)]
pub struct ReloadArgs {
    /// Workload file (RON); it is copied to a scratch folder, which is edited and reloaded.
    pub workload: PathBuf,
    /// The pipeline the client keeps requesting.
    #[arg(long)]
    pub pipeline: String,
    /// Reloads in all.
    #[arg(long, default_value_t = 100)]
    pub reloads: u32,
    /// Every this many reloads is an invalid one (the default 4 makes 25 of 100).
    #[arg(long, default_value_t = 4)]
    pub invalid_every: u32,
    /// Scratch folder (default: a new one under the system temp folder).
    #[arg(long)]
    pub scratch: Option<PathBuf>,
    /// Vulkan device (index or name substring).
    #[arg(long)]
    pub device: Option<String>,
}

/// The ways a reload is made invalid, in turn.
const BREAKAGES: [&str; 5] = [
    "syntax error",
    "unknown model",
    "cap below the minimum",
    "missing model file",
    "corrupt model file",
];

fn values_hash(v: &Values) -> u64 {
    hash_values(v)
}

/// The workload text with `cap: "..."` replaced.
fn with_cap(text: &str, cap: u64) -> Result<String> {
    let i = text
        .find("cap:")
        .context("the workload has no `cap:` line")?;
    let j = i + text[i..]
        .find(',')
        .context("`cap:` has no trailing comma")?;
    Ok(format!("{}cap: \"{cap}B\"{}", &text[..i], &text[j..]))
}

pub fn run(args: &ReloadArgs) -> Result<()> {
    if args.reloads == 0 || args.reloads > 100_000 || args.invalid_every == 0 {
        bail!("--reloads must be 1..=100000 and --invalid-every at least 1");
    }
    let scratch = match &args.scratch {
        Some(s) => s.clone(),
        None => std::env::temp_dir().join(format!("texstream-reloads-{}", std::process::id())),
    };
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    // The file lives in the scratch folder; its relative paths are made absolute first.
    let original = texstream::workload::load_workload(&args.workload)?;
    let mut text = original.text.to_string();
    let dir = original.dir().display().to_string();
    for quote in ["Onnx(\"", "Packed(\"", "path: \"", "dict: \"", "packed: \""] {
        text = text.replace(quote, &format!("{quote}{dir}/"));
    }
    // Absolute paths stay absolute ("dir//abs" → "/abs").
    text = text.replace(&format!("{dir}//"), "/");
    let file = scratch.join("workload.ron");
    std::fs::write(&file, &text)?;
    let env = EngineOptions::from_env();
    let opts = EngineOptions {
        device: texstream::DeviceChoice {
            name: args.device.clone().or(env.device.name.clone()),
            ..env.device.clone()
        },
        calibrate_after: 0,
        ..env
    };
    let engine = Arc::new(Engine::open(&file, opts)?);
    let base_cap = engine.stats().cap_bytes;
    let min = engine.stats().min_cap_bytes;
    let g = engine.loaded();
    let gi = g
        .graph_index(&args.pipeline)
        .with_context(|| format!("no pipeline `{}` (it has {})", args.pipeline, g.names()))?;
    let mut inputs = Values::new();
    for &i in &g.graphs[gi].inputs {
        let name = &g.graphs[gi].values[i].name;
        let d = g
            .workload
            .spec
            .demo_inputs
            .iter()
            .find(|d| &d.name == name)
            .with_context(|| format!("no demo input `{name}`"))?;
        inputs.insert(name.clone(), read_value(&g.workload.resolve(&d.path))?);
    }
    let want = values_hash(&engine.run(&args.pipeline, inputs.clone())?.outputs);
    // A packed model of the workload, to corrupt a copy of.
    let packed = g
        .models
        .first()
        .map(|(_, pm)| pm.path().to_path_buf())
        .context("the workload has no models")?;
    drop(g);
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, lost, wrong) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let client = {
        let (engine, stop, ok, lost, wrong) = (
            engine.clone(),
            stop.clone(),
            ok.clone(),
            lost.clone(),
            wrong.clone(),
        );
        let (pipeline, inputs) = (args.pipeline.clone(), inputs.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match engine.run(&pipeline, inputs.clone()) {
                    Ok(r) if values_hash(&r.outputs) == want => ok.fetch_add(1, Ordering::Relaxed),
                    Ok(_) => wrong.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        eprintln!("lost request: {e}");
                        lost.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        })
    };
    let t0 = Instant::now();
    let (mut valid, mut invalid, mut located, mut plan_ok) = (0u32, 0u32, 0u32, 0u32);
    let mut by_kind = [0u32; BREAKAGES.len()];
    for k in 1..=args.reloads {
        if k % args.invalid_every == 0 {
            let kind = (invalid as usize) % BREAKAGES.len();
            let (bad, expect) = breakage(kind, &text, &scratch, &packed, &file)?;
            std::fs::write(&file, bad)?;
            invalid += 1;
            by_kind[kind] += 1;
            match engine.reload(&file) {
                Ok(()) => eprintln!("reload {k} ({}) was accepted", BREAKAGES[kind]),
                Err(e) => {
                    let msg = e.to_string();
                    if msg.contains(&expect) {
                        located += 1;
                    } else {
                        eprintln!("reload {k} ({}): `{expect}` not in: {msg}", BREAKAGES[kind]);
                    }
                }
            }
        } else {
            // A valid change: another cap between the minimum and the original.
            let span = base_cap.saturating_sub(min).max(1);
            let cap = min + span * (k as u64 % 7 + 1) / 8;
            std::fs::write(&file, with_cap(&text, cap)?)?;
            engine
                .reload(&file)
                .with_context(|| format!("valid reload {k}"))?;
            valid += 1;
            let s = engine.stats();
            if s.cap_bytes == cap && engine.plan().is_some_and(|p| p.cap_bytes == cap) {
                plan_ok += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    client
        .join()
        .map_err(|_| anyhow::anyhow!("the client thread panicked"))?;
    let s = engine.stats();
    println!(
        "{} reloads in {:.1} s ({valid} valid, {invalid} invalid: {}), while {} requests ran",
        args.reloads,
        t0.elapsed().as_secs_f64(),
        BREAKAGES
            .iter()
            .zip(by_kind)
            .map(|(b, n)| format!("{n} {b}"))
            .collect::<Vec<_>>()
            .join(", "),
        ok.load(Ordering::Relaxed) + lost.load(Ordering::Relaxed) + wrong.load(Ordering::Relaxed)
    );
    println!(
        "requests lost                    {}",
        lost.load(Ordering::Relaxed)
    );
    println!(
        "wrong outputs                    {}",
        wrong.load(Ordering::Relaxed)
    );
    println!("invalid reloads with location    {located} of {invalid}");
    println!("valid reloads serving the new cap {plan_ok} of {valid}");
    println!(
        "engine counters: reloads ok {}, failed {}; peak {} B under caps up to {} B",
        s.reloads_ok, s.reloads_failed, s.peak_device_bytes, base_cap
    );
    let _ = std::fs::remove_dir_all(&scratch);
    if lost.load(Ordering::Relaxed) > 0
        || wrong.load(Ordering::Relaxed) > 0
        || located < invalid
        || plan_ok < valid
    {
        bail!("reloads under load did not hold up (see above)");
    }
    Ok(())
}

/// Invalid text of kind `kind`, and what its error message must name.
fn breakage(
    kind: usize,
    text: &str,
    scratch: &Path,
    packed: &Path,
    file: &Path,
) -> Result<(String, String)> {
    let name = file.display().to_string();
    Ok(match kind {
        // Cut mid-file: the parser names the file, line and column.
        0 => (text[..text.len() / 2].to_string(), format!("{name}:")),
        1 => {
            let i = text.find("model: \"").context("no `model:` in a step")?;
            let mut t = text.to_string();
            t.insert_str(i + "model: \"".len(), "ghost-");
            (t, "ghost-".into())
        }
        2 => (with_cap(text, 1024)?, "minimum feasible cap".into()),
        3 => {
            let gone = scratch.join("gone.tspk");
            let t = text.replacen(
                "models: [",
                &format!(
                    "models: [\n        ModelSpec(name: \"gone\", source: Packed(\"{}\")),",
                    gone.display()
                ),
                1,
            );
            (t, gone.display().to_string())
        }
        _ => {
            let corrupt = scratch.join("corrupt.tspk");
            let mut bytes = std::fs::read(packed)?;
            let at = bytes.len() - bytes.len() / 3;
            bytes[at] ^= 0x55;
            std::fs::write(&corrupt, bytes)?;
            let t = text.replacen(
                "models: [",
                &format!(
                    "models: [\n        ModelSpec(name: \"corrupt\", source: Packed(\"{}\")),",
                    corrupt.display()
                ),
                1,
            );
            (t, corrupt.display().to_string())
        }
    })
}
