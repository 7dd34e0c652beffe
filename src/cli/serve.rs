//! `texstream serve WORKLOAD.ron`: opens an engine on the workload and serves it over HTTP
//! (KServe v2, metrics, status, hot reload; see `texstream::serve`) until SIGINT or SIGTERM,
//! then finishes the requests in flight, shuts the engine down and exits 0. The token is read
//! here, from `--token` or `TEXSTREAM_TOKEN`, and never printed.
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use texstream::serve::{self, ServeOptions, Server};
use texstream::workload::load_workload;
use texstream::{Engine, EngineOptions, Policy};

use super::args::parse_size_arg;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Workload file (RON); its directory is watched and the workload reloaded on changes.
    pub workload: PathBuf,
    /// Address to listen on (loopback by default; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// Require `Authorization: Bearer TOKEN` (default: the TEXSTREAM_TOKEN variable, if set).
    #[arg(long)]
    pub token: Option<String>,
    /// Largest request body (e.g. 64MiB).
    #[arg(long, default_value = "64MiB", value_parser = parse_size_arg)]
    pub max_body: u64,
    /// Seconds a request may take, queue included.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Requests that may wait; beyond that the answer is 503 with Retry-After.
    #[arg(long, default_value_t = 64)]
    pub queue_depth: usize,
    /// Device memory cap; default: the workload's (a reload keeps this override).
    #[arg(long, value_parser = parse_size_arg)]
    pub cap: Option<u64>,
    /// Residency policy; default: the workload's.
    #[arg(long)]
    pub policy: Option<Policy>,
    /// Vulkan device (index or name substring).
    #[arg(long)]
    pub device: Option<String>,
    /// Do not watch the workload for changes.
    #[arg(long)]
    pub no_watch: bool,
    /// Milliseconds of quiet after a file change before the reload.
    #[arg(long, default_value_t = 300)]
    pub debounce_ms: u64,
}

pub fn run(args: &ServeArgs) -> Result<()> {
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var("TEXSTREAM_TOKEN").ok())
        .filter(|t| !t.is_empty());
    if !args.listen.ip().is_loopback() && token.is_none() {
        log::warn!(
            "listening on {} without a token: anyone who reaches it can run requests",
            args.listen
        );
    }
    let timeout = Duration::try_from_secs_f64(args.timeout)
        .ok()
        .filter(|t| !t.is_zero())
        .context("--timeout must be a positive number of seconds")?;
    let options = ServeOptions {
        listen: args.listen,
        token,
        max_body: usize::try_from(args.max_body).unwrap_or(usize::MAX),
        timeout,
        watch: !args.no_watch,
        debounce: Duration::from_millis(args.debounce_ms),
        ..ServeOptions::default()
    };
    // The recorder goes in first, so the engine's first figures are recorded.
    let metrics = serve::metrics::install()?;
    let w = load_workload(&args.workload)?;
    let env = EngineOptions::from_env();
    let engine = Engine::open_workload(
        w,
        EngineOptions {
            cap: args.cap,
            policy: args.policy,
            device: texstream::DeviceChoice {
                name: args.device.clone().or(env.device.name.clone()),
                ..env.device.clone()
            },
            queue_depth: args.queue_depth,
            ..env
        },
        &mut |model, why| eprintln!("compiling model `{model}` ({why})"),
    )?;
    let engine = Arc::new(engine);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("texstream-http")
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let server = Server::bind(engine.clone(), args.workload.clone(), options, metrics).await?;
        let addr = server.local_addr()?;
        let names: Vec<String> = engine.pipelines().into_iter().map(|p| p.name).collect();
        println!(
            "texstream serve: listening on http://{addr} (models: {})",
            names.join(", ")
        );
        std::io::stdout().flush().ok();
        server.run(serve::shutdown_signal()).await?;
        anyhow::Ok(())
    })?;
    let stats = engine.shutdown();
    eprint!("{}", stats.table());
    eprintln!("texstream serve: stopped");
    Ok(())
}
