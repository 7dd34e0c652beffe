//! `texstream plan`: plans a workload under every policy (or one), prints a side-by-side table or JSON,
//! draws the residency timeline as SVG, writes the plan-quality table, and times the planner.
use anyhow::{bail, Context, Result};
use clap::Args;
use scheduler::{
    candidates, format_size, min_feasible_cap, plan, svg, Bandwidth, Pipeline, Plan, Policy,
    Profile,
};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;
use texstream::workload::{load_profile, load_workload, LoadedWorkload};

/// Arguments of `texstream plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Workload file(s) (RON). One for a plan; several for --quality-table.
    #[arg(required = true)]
    pub workloads: Vec<PathBuf>,
    /// Memory cap, e.g. 24MiB, 1.5GiB or bytes (default: the workload's).
    #[arg(long, value_parser = super::args::parse_size_arg)]
    pub cap: Option<u64>,
    /// Only this policy: preload, reload-per-model, on-demand, lru, planned.
    #[arg(long)]
    pub policy: Option<Policy>,
    /// Pipeline name (default: the first).
    #[arg(long)]
    pub pipeline: Option<String>,
    /// Print one JSON object per policy (as a JSON array).
    #[arg(long)]
    pub json: bool,
    /// Draw the residency timeline of the chosen policy (default planned) to this SVG file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Write the plan-quality table (caps of 100/50/25/10 % of the weights) as Markdown to this file.
    #[arg(long)]
    pub quality_table: Option<PathBuf>,
    /// Time the planner on the workload (each policy, several runs) instead of printing the table.
    #[arg(long)]
    pub bench: bool,
    /// What if a page streams in this time (e.g. 40us; `texstream run` prints a device's figure
    /// as "plans stream a page in ...") instead of the workload's bandwidth model.
    #[arg(long, value_parser = super::args::parse_duration_arg)]
    pub page_time: Option<f64>,
    /// What if a model's run takes this long (MODEL=DURATION, e.g. lm=6.1ms; repeatable): its
    /// step costs are scaled to that total, as calibration on a device scales them.
    #[arg(long = "run-time", value_parser = super::args::parse_named_duration)]
    pub run_times: Vec<(String, f64)>,
    /// What if the runtime submits compute in batches of N+1 steps, so a copy over a page may
    /// wait for its reader's whole batch (`texstream run` plans with N = 15).
    #[arg(long)]
    pub reuse_lag: Option<u32>,
    /// What if a wait between the copy and the compute queue takes this long (e.g. 8us;
    /// `texstream run` prints the device's figure as "a hand-off between the queues ..."): a
    /// copy that waits for a step, or a step for a copy, starts that long after it ends.
    #[arg(long, value_parser = super::args::parse_duration_arg)]
    pub handoff: Option<f64>,
    /// What if the run starts cold from disk at this read rate per second (e.g. 1.5GB;
    /// `texstream run --cold` prints the disk's): every page is read into host memory once,
    /// one read after another, before its first copy. The simulation and the lower bound's
    /// cold-start term then include the reads.
    #[arg(long, value_parser = super::args::parse_size_arg)]
    pub cold_read: Option<u64>,
    /// Also print every construction `planned` weighs, with its simulated time and loads.
    #[arg(long)]
    pub candidates: bool,
    /// Write the chosen policy's schedule (default planned: the transfer ops in order, what
    /// each step waits for, and each step's model, index and pages) as JSON to this file, for
    /// offline analysis of the order a runtime issues its copies in.
    #[arg(long)]
    pub schedule_json: Option<PathBuf>,
}

/// A loaded workload ready to plan.
struct Planning {
    name: String,
    profiles: Vec<Profile>,
    /// Model names, as the workload lists them (the profiles' order).
    names: Vec<String>,
    sources: Vec<String>,
    pipeline: Pipeline,
    cap: u64,
    bw: Bandwidth,
    policy: Policy,
}

fn prepare(path: &Path, pipeline: Option<&str>) -> Result<Planning> {
    let w: LoadedWorkload = load_workload(path)?;
    // Plans read the packed models' profiles: compile the ONNX ones that are stale, as `run`
    // and `check` do (a file compiled for another workload's page size, an older compiler).
    texstream::compile::auto::ensure_packed(&w, |model, why| {
        eprintln!("compiling model `{model}` ({why})")
    })?;
    let page = w.page_bytes()?;
    let mut profiles = Vec::new();
    let mut sources = Vec::new();
    for m in &w.spec.models {
        let (p, src) = load_profile(&w, m, page)?;
        sources.push(format!("{}: {src}", m.name));
        profiles.push(p);
    }
    let ps = w.pipeline_spec(pipeline)?;
    Ok(Planning {
        name: format!("{} / {}", w.spec.name, ps.name),
        pipeline: w.planner_pipeline(ps),
        names: w.spec.models.iter().map(|m| m.name.clone()).collect(),
        profiles,
        sources,
        cap: w.cap_bytes()?,
        bw: w.bandwidth()?,
        policy: w.policy()?,
    })
}

/// Applies `plan`'s what-if options: another device's page time, run times and batching.
fn what_if(pl: &mut Planning, args: &PlanArgs) -> Result<()> {
    if let Some(t) = args.page_time {
        if t <= 0.0 {
            bail!("--page-time must be above zero");
        }
        let page = pl.profiles.first().map_or(1, |p| p.page_bytes) as f64;
        pl.bw.h2d_bytes_per_s = page / t;
        pl.bw.per_transfer_s = 0.0;
        pl.bw.disk_bytes_per_s = None;
    }
    if let Some(lag) = args.reuse_lag {
        pl.bw.reuse_lag_steps = lag;
    }
    if let Some(h) = args.handoff {
        pl.bw.handoff_s = h;
    }
    if let Some(r) = args.cold_read {
        if r == 0 {
            bail!("--cold-read must be above zero");
        }
        pl.bw.first_read_bytes_per_s = Some(r as f64);
    }
    for (name, t) in &args.run_times {
        let Some(i) = pl.names.iter().position(|n| n == name) else {
            bail!(
                "--run-time {name}=...: the workload has no model `{name}` (it has {})",
                pl.names.join(", ")
            );
        };
        if !pl.profiles[i].scale_compute_to(*t) {
            bail!("--run-time {name}=...: its profile has no compute cost to scale");
        }
    }
    Ok(())
}

fn fmt_time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}

fn json_row(policy: Policy, cap: u64, r: &Result<Plan, scheduler::PlanError>) -> serde_json::Value {
    match r {
        Ok(p) => serde_json::json!({
            "policy": policy.name(),
            "cap_bytes": cap,
            "page_bytes": p.page_bytes,
            "slots": p.slots,
            "peak_bytes": p.stats.peak_bytes,
            "predicted_s": p.stats.predicted_s,
            "lower_bound_s": p.stats.lower_bound.bound_s,
            "ratio_to_lower_bound": p.stats.ratio,
            "bytes_streamed": p.stats.bytes_streamed,
            "loads": p.stats.loads,
            "min_loads": p.stats.lower_bound.min_loads,
            "stall_s": p.stats.total_stall_s,
            "stalled_steps": p.stats.stalled_steps,
            "steady_period_s": p.stats.steady_period_s,
            "variant": p.stats.variant,
        }),
        Err(e) => serde_json::json!({
            "policy": policy.name(),
            "cap_bytes": cap,
            "error": e.to_string(),
        }),
    }
}

fn table(rows: &[(Policy, Result<Plan, scheduler::PlanError>)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<17} {:>12} {:>7} {:>12} {:>7} {:>12} {:>12} {:>8} {:>12}  variant",
        "policy", "predicted", "÷ LB", "streamed", "loads", "peak", "stall", "stalled", "period"
    );
    for (pol, r) in rows {
        match r {
            Ok(p) => {
                let st = &p.stats;
                let _ = writeln!(
                    s,
                    "{:<17} {:>12} {:>7.3} {:>12} {:>7} {:>12} {:>12} {:>8} {:>12}  {}",
                    pol.name(),
                    fmt_time(st.predicted_s),
                    st.ratio,
                    format_size(st.bytes_streamed),
                    st.loads,
                    format_size(st.peak_bytes),
                    fmt_time(st.total_stall_s),
                    st.stalled_steps,
                    fmt_time(st.steady_period_s),
                    st.variant
                );
            }
            Err(e) => {
                let _ = writeln!(s, "{:<17} error: {e}", pol.name());
            }
        }
    }
    s
}

/// Runs `texstream plan`.
pub fn run(args: &PlanArgs) -> Result<()> {
    if let Some(out) = &args.quality_table {
        let md = quality_table(&args.workloads, args.pipeline.as_deref())?;
        std::fs::write(out, md).with_context(|| format!("writing {}", out.display()))?;
        eprintln!("wrote {}", out.display());
        return Ok(());
    }
    let [path] = args.workloads.as_slice() else {
        bail!("give exactly one workload (several only with --quality-table)");
    };
    let mut pl = prepare(path, args.pipeline.as_deref())?;
    what_if(&mut pl, args)?;
    if pl.pipeline.stages.is_empty() {
        bail!(
            "{}: pipeline `{}` runs no model: nothing to plan",
            path.display(),
            pl.name
        );
    }
    let cap = args.cap.unwrap_or(pl.cap);
    if args.bench {
        return bench(&pl, cap);
    }
    let policies: Vec<Policy> = match args.policy {
        Some(p) => vec![p],
        None => Policy::ALL.to_vec(),
    };
    let rows: Vec<(Policy, Result<Plan, scheduler::PlanError>)> = policies
        .iter()
        .map(|&p| (p, plan(&pl.profiles, &pl.pipeline, cap, &pl.bw, p)))
        .collect();
    if args.json {
        let v: Vec<serde_json::Value> = rows.iter().map(|(p, r)| json_row(*p, cap, r)).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let min = min_feasible_cap(&pl.profiles, &pl.pipeline)?;
        let weights: u64 = pl.profiles.iter().map(|p| p.weight_bytes()).sum();
        println!("workload   {}", pl.name);
        for s in &pl.sources {
            println!("profile    {s}");
        }
        println!(
            "steps      {} ({} repetitions); weights {} in {} pages of {}",
            pl.pipeline_steps(),
            pl.pipeline.repetitions,
            format_size(weights),
            pl.profiles
                .iter()
                .map(|p| p.total_pages as u64)
                .sum::<u64>(),
            format_size(pl.profiles.first().map_or(0, |p| p.page_bytes))
        );
        println!(
            "cap        {} (minimum feasible {}: model `{}` step `{}` reads {} pages, activation peak {})",
            format_size(cap),
            format_size(min.bytes),
            min.model,
            min.step,
            min.step_pages,
            format_size(min.activation_bytes)
        );
        println!(
            "           (the planner's minimum, from the profiles alone; on a device `texstream run` \
             adds what the engine itself takes there: the page table, staging buffers, each \
             slot's and activation image's padding; `texstream run W --cap 0` says at least how much, and with a cap near that it names the exact minimum)"
        );
        println!(
            "bandwidth  {:.2} GB/s, {} per transfer{}",
            pl.bw.h2d_bytes_per_s / 1e9,
            fmt_time(pl.bw.per_transfer_s),
            pl.bw
                .disk_bytes_per_s
                .map_or(String::new(), |d| format!(", disk {:.2} GB/s", d / 1e9))
                + &pl
                    .bw
                    .first_read_bytes_per_s
                    .map_or(String::new(), |r| format!(
                    ", a cold start: every page read from disk at {:.2} GB/s before its first copy",
                    r / 1e9
                ))
        );
        if let Some(p) = rows.iter().find_map(|r| r.1.as_ref().ok()) {
            let lb = &p.stats.lower_bound;
            println!(
                "lower bound {} = max(compute {}, MIN's {} loads × transfer = {}, cold start {}, phases {})",
                fmt_time(lb.bound_s),
                fmt_time(lb.compute_s),
                lb.min_loads,
                fmt_time(lb.io_s),
                fmt_time(lb.cold_start_s),
                fmt_time(lb.phase_s)
            );
        }
        println!();
        print!("{}", table(&rows));
        if args.candidates {
            println!();
            println!("constructions `planned` weighs (it keeps the fewest loads within 1 % of the fastest):");
            for c in candidates(&pl.profiles, &pl.pipeline, cap, &pl.bw)? {
                println!(
                    "  {:<18} {:>12} {:>8} loads  stall {:>12}  {:>7} batches submitted early for a copy",
                    c.name,
                    fmt_time(c.predicted_s),
                    c.loads,
                    fmt_time(c.stall_s),
                    c.forced_submits
                );
            }
        }
    }
    if rows.iter().all(|(_, r)| r.is_err()) {
        bail!(
            "{}: no policy can run under a cap of {}",
            path.display(),
            format_size(cap)
        );
    }
    // The policy `--schedule-json` and `--svg` show: the one asked for, else the workload's.
    let want = args.policy.unwrap_or(pl.policy);
    let chosen = || -> Result<Plan> {
        match rows.iter().find(|(p, _)| *p == want) {
            Some((_, Ok(p))) => Ok(p.clone()),
            Some((_, Err(e))) => bail!("policy `{want}` cannot run: {e}"),
            None => Ok(plan(&pl.profiles, &pl.pipeline, cap, &pl.bw, want)?),
        }
    };
    if let Some(path) = &args.schedule_json {
        let p = chosen().context("cannot write the schedule")?;
        let steps: Vec<serde_json::Value> = (0..p.trace.steps.len())
            .map(|j| {
                let s = p.trace.steps[j];
                serde_json::json!({
                    "model": s.model, "step": s.step, "rep": s.rep, "stage": s.stage,
                    "run": s.run, "compute_s": s.compute_s, "pages": p.trace.pages(j),
                })
            })
            .collect();
        let v = serde_json::json!({
            "policy": want.name(), "variant": p.stats.variant, "slots": p.slots,
            "lookup_slots": p.trace.lookup_slots, "ops": p.schedule.ops,
            "step_wait": p.schedule.step_wait, "steps": steps,
        });
        std::fs::write(path, serde_json::to_string(&v)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {} ({want}, {})", path.display(), p.stats.variant);
    }
    if let Some(svg_path) = &args.svg {
        let p = chosen().context("cannot draw the residency timeline")?;
        std::fs::write(svg_path, svg::render(&p))
            .with_context(|| format!("writing {}", svg_path.display()))?;
        eprintln!("wrote {} ({want})", svg_path.display());
    }
    Ok(())
}

impl Planning {
    fn pipeline_steps(&self) -> u64 {
        self.pipeline
            .stages
            .iter()
            .map(|s| s.count as u64 * self.profiles[s.model].steps.len() as u64)
            .sum::<u64>()
            * self.pipeline.repetitions as u64
    }
}

fn bench(pl: &Planning, cap: u64) -> Result<()> {
    println!(
        "workload {}: {} steps, {} models",
        pl.name,
        pl.pipeline_steps(),
        pl.profiles.len()
    );
    for policy in Policy::ALL {
        let runs = 5;
        let mut best = f64::INFINITY;
        let mut last = None;
        for _ in 0..runs {
            let t = Instant::now();
            let r = plan(&pl.profiles, &pl.pipeline, cap, &pl.bw, policy);
            best = best.min(t.elapsed().as_secs_f64());
            last = Some(r);
        }
        match last {
            Some(Ok(p)) => println!(
                "{:<17} plan+simulate+validate best of {runs}: {:>10}   (predicted {}, ÷ LB {:.3})",
                policy.name(),
                fmt_time(best),
                fmt_time(p.stats.predicted_s),
                p.stats.ratio
            ),
            Some(Err(e)) => println!("{:<17} error: {e}", policy.name()),
            None => {}
        }
    }
    Ok(())
}

/// The plan-quality table for `workloads`: rows are caps of 100/50/25/10 % of the total weight bytes
/// plus the activation peak (caps below the minimum feasible cap are reported as such).
pub fn quality_table(workloads: &[PathBuf], pipeline: Option<&str>) -> Result<String> {
    let mut md = String::new();
    let _ = writeln!(md, "# Plan quality\n");
    let _ = writeln!(
        md,
        "Generated by `cargo run --release -- plan --quality-table scheduler/PLAN_QUALITY.md {}`.\n",
        workloads.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ")
    );
    let _ = writeln!(
        md,
        "Each cell: predicted time ÷ lower bound, and bytes streamed. The cap of a row is the activation \
         peak plus the given share of all weight bytes (activations count against the cap, so a cap of \
         10 % of the weights alone could never run). LB = max(Σ compute, MIN's load count × transfer time, \
         cold start: for any step, the distinct pages first read up to it × transfer time + the compute \
         from it on; phases: for any step, the compute before it + the larger of the compute from it on \
         and MIN's loads from it on less what the slots can hold × transfer time). Times come from the planner's two-resource simulator.\n"
    );
    let _ = writeln!(
        md,
        "Reading the rows: a cap below the minimum feasible cap cannot run under any policy (the named \
         step's pages plus the activation peak exceed it). At or near the minimum cap one step fills \
         every slot, so the loads for the steps after it must wait for it to finish and no plan can \
         overlap there; LB does not model that, so ratios above 1.1 in those rows are partly LB \
         looseness. `over cap` means the policy needs more resident pages than the cap leaves.\n"
    );
    for path in workloads {
        let pl = prepare(path, pipeline)?;
        let weights: u64 = pl.profiles.iter().map(|p| p.weight_bytes()).sum();
        let min = min_feasible_cap(&pl.profiles, &pl.pipeline)?;
        let act = min.activation_bytes;
        let _ = writeln!(md, "## {}\n", pl.name);
        for s in &pl.sources {
            let _ = writeln!(md, "- profile {s}");
        }
        let _ = writeln!(
            md,
            "- {} steps, {} repetitions; weights {}; activation peak {}; minimum feasible cap {} (`{}` step `{}`); \
             bandwidth {:.1} GB/s + {} per transfer\n",
            pl.pipeline_steps(),
            pl.pipeline.repetitions,
            format_size(weights),
            format_size(act),
            format_size(min.bytes),
            min.model,
            min.step,
            pl.bw.h2d_bytes_per_s / 1e9,
            fmt_time(pl.bw.per_transfer_s)
        );
        let mut header = "| cap | LB |".to_string();
        let mut sep = "|---|---|".to_string();
        for p in Policy::ALL {
            let _ = write!(header, " {} |", p.name());
            sep.push_str("---|");
        }
        let _ = writeln!(md, "{header}\n{sep}");
        let mut caps: Vec<(String, u64)> = [100u64, 50, 25, 10]
            .iter()
            .map(|&pct| (format!("{pct}%"), act + weights * pct / 100))
            .collect();
        caps.push(("min".into(), min.bytes));
        for (label, cap) in caps {
            let mut row = format!("| {label} ({}) |", format_size(cap));
            if cap < min.bytes {
                let _ = write!(
                    row,
                    " below minimum feasible cap {} |",
                    format_size(min.bytes)
                );
                for _ in Policy::ALL {
                    row.push_str(" — |");
                }
                let _ = writeln!(md, "{row}");
                continue;
            }
            let plans: Vec<_> = Policy::ALL
                .iter()
                .map(|&p| plan(&pl.profiles, &pl.pipeline, cap, &pl.bw, p))
                .collect();
            let lb = plans
                .iter()
                .find_map(|r| r.as_ref().ok())
                .map(|p| p.stats.lower_bound.bound_s);
            let _ = write!(row, " {} |", lb.map_or("—".into(), fmt_time));
            for r in &plans {
                match r {
                    Ok(p) => {
                        let _ = write!(
                            row,
                            " {:.3}× / {} |",
                            p.stats.ratio,
                            format_size(p.stats.bytes_streamed)
                        );
                    }
                    Err(scheduler::PlanError::PolicyExceedsCap { .. }) => {
                        row.push_str(" over cap |")
                    }
                    Err(e) => {
                        let _ = write!(row, " error: {e} |");
                    }
                }
            }
            let _ = writeln!(md, "{row}");
        }
        let _ = writeln!(md);
    }
    Ok(md)
}
