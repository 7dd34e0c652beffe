//! Embedding the texstream engine in an application, the way an app backend would: open a
//! workload once, send it requests from several threads at once, wait on them with a deadline,
//! cancel one, reload the workload in place, and read the engine's statistics.
//!
//! ```sh
//! cargo run --example embed                                # workloads/camera-ocr.ron
//! cargo run --example embed -- tests/data/serve/tiny.ron 3 # that workload, 3 requests per thread
//! ```
//!
//! The requests use the workload's `demo_inputs` (read with [`read_value`], as `texstream run`
//! does); every workload pipeline whose inputs they cover is sent. The device comes from the
//! environment (`TEXSTREAM_DEVICE`, `TEXSTREAM_VALIDATION`, ...) through
//! [`EngineOptions::from_env`], the one place the library's options meet the environment.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use texstream::pipeline::io::{read_value, summarize};
use texstream::{Engine, EngineOptions, RequestError, SubmitOptions, Values};

/// Threads that submit at the same time.
const THREADS: usize = 3;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let workload = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("workloads/camera-ocr.ron"));
    let per_thread: usize = match args.next() {
        Some(n) => n.to_string_lossy().parse()?,
        None => 2,
    };

    // Everything that can fail on bad input (the file, its models, compiling stale ONNX
    // sources, the pipelines' types, a cap below the minimum) fails here, before any request.
    let t0 = Instant::now();
    let engine = Engine::open(&workload, EngineOptions::from_env())?;
    println!(
        "opened {} in {:.1} s",
        workload.display(),
        t0.elapsed().as_secs_f64()
    );

    // What a request may name: each pipeline of the workload, and each model on its own.
    for p in engine.pipelines() {
        let ports = |ports: &[texstream::engine::PortInfo]| {
            ports
                .iter()
                .map(|q| match &q.shape {
                    Some(s) => format!("{} ({} {s:?})", q.name, q.value_type),
                    None => format!("{} ({})", q.name, q.value_type),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "{} `{}`: inputs {} -> outputs {}",
            if p.single_model { "model" } else { "pipeline" },
            p.name,
            ports(&p.inputs),
            ports(&p.outputs)
        );
    }

    // Reload the workload in place, as a service does when the file changes: it is checked and
    // compiled off the request path and swapped in between requests (everything queued before
    // finishes on the old plan); on failure the old workload keeps serving and the error comes
    // back.
    match engine.reload(&workload) {
        Ok(()) => println!("reloaded {}", workload.display()),
        Err(e) => println!("reload failed, still serving the old workload: {e}"),
    }

    // The workload's demo inputs, by name (paths are relative to the workload file).
    let loaded = engine.loaded();
    let mut demo = Values::new();
    for d in &loaded.workload.spec.demo_inputs {
        demo.insert(
            d.name.clone(),
            read_value(&loaded.workload.resolve(&d.path))?,
        );
    }
    // Each pipeline's request: its inputs taken from the demo values.
    let requests: Vec<(String, Values)> = engine
        .pipelines()
        .into_iter()
        .filter(|p| !p.single_model)
        .filter_map(|p| {
            let inputs: Option<Values> = p
                .inputs
                .iter()
                .map(|q| demo.get(&q.name).map(|v| (q.name.clone(), v.clone())))
                .collect();
            inputs.map(|i| (p.name, i))
        })
        .collect();
    if requests.is_empty() {
        return Err(format!(
            "{}: no pipeline has all its inputs among the demo inputs",
            workload.display()
        )
        .into());
    }

    // Several threads submit at once; the engine (`Send + Sync`) queues them to its one GPU
    // worker. Each request may wait up to 10 s for room in the queue and must be done within
    // five minutes of being sent (lavapipe, a CPU Vulkan driver, is slow).
    let engine_ref = &engine;
    let requests_ref = &requests;
    let results: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut lines = Vec::new();
                    for k in 0..per_thread {
                        let (name, inputs) = &requests_ref[(t + k) % requests_ref.len()];
                        let opts = SubmitOptions {
                            deadline: Some(Instant::now() + Duration::from_secs(300)),
                            queue_timeout: Some(Duration::from_secs(10)),
                        };
                        let line = match engine_ref
                            .submit(name, inputs.clone(), opts)
                            .and_then(|h| h.wait())
                        {
                            Ok(r) => {
                                let mut line = format!(
                                    "thread {t} request {k} `{name}`: queued {:.1} ms, ran {:.1} ms",
                                    r.queued.as_secs_f64() * 1e3,
                                    r.run.as_secs_f64() * 1e3
                                );
                                // The first thread's requests show their outputs.
                                if t == 0 {
                                    for (out, v) in &r.outputs {
                                        line += &format!("\n    {}", summarize(out, v));
                                    }
                                }
                                line
                            }
                            Err(RequestError::Busy { depth }) => {
                                format!("thread {t} request {k} `{name}`: busy ({depth} queued)")
                            }
                            Err(e) => format!("thread {t} request {k} `{name}`: failed: {e}"),
                        };
                        lines.push(line);
                    }
                    lines
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for line in &results {
        println!("{line}");
    }

    // A request cancelled right after it was sent: the worker checks the flag before the
    // request starts and between its steps, so it answers `Cancelled` unless it already ran.
    let (name, inputs) = &requests[0];
    let handle = engine.submit(name, inputs.clone(), SubmitOptions::default())?;
    handle.cancel();
    match handle.wait() {
        Err(RequestError::Cancelled) => println!("cancelled request: cancelled"),
        Ok(_) => println!("cancelled request: finished before the cancel was seen"),
        Err(e) => println!("cancelled request: {e}"),
    }

    // Stop taking requests and finish the queued ones. That ends the streaming session, so its
    // GPU times (stall, transfer and compute busy) are in the statistics.
    engine.shutdown();
    println!("\n{}", engine.stats().table());
    Ok(())
}
