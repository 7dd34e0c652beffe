//! `texstream serve`: the [`Engine`] as a long-running service. It speaks the KServe v2
//! inference protocol over HTTP (axum on tokio), so Triton's clients work as they are; every
//! pipeline of the workload and every single model is a KServe "model". Around it: Prometheus
//! metrics, the plan and a status page, hot reload of the workload, a bearer token, a body
//! limit, per-request deadlines, and a graceful stop on SIGINT/SIGTERM.
//!
//! One module per concern:
//! - [`protocol`]: the KServe v2 JSON documents and the binary-tensor extension;
//! - [`tensors`]: KServe tensors to pipeline values and back (images as encoded files, text
//!   lines as three tensors);
//! - [`routes`]: the `/v2` handlers; engine calls run on blocking threads, off the runtime;
//! - [`status`]: `/v1/plan`, `/v1/residency.svg`, `/v1/status` and the `/` page;
//! - [`metrics`]: the Prometheus exporter behind `/metrics` and HTTP request metrics;
//! - [`reload`]: the file watcher that reloads the workload;
//! - [`auth`], [`options`], [`error`].
pub mod auth;
pub mod error;
pub mod metrics;
pub mod options;
pub mod protocol;
pub mod reload;
pub mod routes;
pub mod status;
pub mod tensors;

use std::future::Future;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;

pub use error::{ApiError, ServeError};
pub use options::ServeOptions;

use crate::Engine;

/// What every handler shares.
pub struct App {
    pub engine: Arc<Engine>,
    pub options: ServeOptions,
    /// The workload file being served (and watched).
    pub workload: PathBuf,
    pub metrics: PrometheusHandle,
    /// False once shutdown began: readiness answers 503 from then on.
    pub ready: AtomicBool,
    pub watch: Option<Arc<std::sync::Mutex<reload::WatchStatus>>>,
}

/// A bound, not yet serving, service.
pub struct Server {
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    router: Router,
    _watcher: Option<reload::Watcher>,
}

impl Server {
    /// Binds `options.listen` and starts the reload watcher. `metrics` comes from
    /// [`metrics::install`], called before the engine opened.
    pub async fn bind(
        engine: Arc<Engine>,
        workload: PathBuf,
        options: ServeOptions,
        metrics: PrometheusHandle,
    ) -> Result<Server, ServeError> {
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|source| ServeError::Bind {
                addr: options.listen,
                source,
            })?;
        let watcher = if options.watch {
            Some(reload::start(engine.clone(), &workload, options.debounce)?)
        } else {
            None
        };
        let app = Arc::new(App {
            engine,
            workload,
            metrics,
            ready: AtomicBool::new(true),
            watch: watcher.as_ref().map(|w| w.status.clone()),
            options,
        });
        Ok(Server {
            listener,
            router: router(app.clone()),
            app,
            _watcher: watcher,
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        self.listener.local_addr().map_err(ServeError::Http)
    }

    /// Serves until `shutdown` resolves, then stops accepting and finishes the requests in
    /// flight. The engine itself is shut down by the caller.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let app = self.app.clone();
        let upkeep = tokio::spawn({
            let handle = app.metrics.clone();
            async move {
                let mut tick = tokio::time::interval(metrics::UPKEEP_EVERY);
                loop {
                    tick.tick().await;
                    handle.run_upkeep();
                }
            }
        });
        let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel::<()>();
        let stopping = async move {
            shutdown.await;
            app.ready.store(false, Ordering::Relaxed);
            log::info!("stopping: finishing the requests in flight");
            let _ = stopped_tx.send(());
        };
        let serving = axum::serve(self.listener, self.router)
            .with_graceful_shutdown(stopping)
            .into_future();
        // In-flight requests end by their deadline; a client that stalls mid-request must not
        // hold the process past that.
        let drain = self.app.options.timeout + routes::DEADLINE_GRACE + Duration::from_secs(1);
        let r = tokio::select! {
            r = serving => r.map_err(ServeError::Http),
            _ = async {
                if stopped_rx.await.is_ok() {
                    tokio::time::sleep(drain).await;
                } else {
                    std::future::pending::<()>().await;
                }
            } => {
                log::warn!(
                    "stopping: connections still open {:.1} s after the signal; closing them",
                    drain.as_secs_f64()
                );
                Ok(())
            }
        };
        upkeep.abort();
        r
    }
}

/// Every route, with the token check, the body limit and request metrics.
pub fn router(app: Arc<App>) -> Router {
    let token: Option<Arc<str>> = app.options.token.as_deref().map(Arc::from);
    routes::kserve()
        .merge(status::routes())
        .fallback(routes::no_route)
        .layer(axum::middleware::from_fn_with_state(
            token,
            auth::require_token,
        ))
        .layer(DefaultBodyLimit::max(app.options.max_body))
        .route_layer(axum::middleware::from_fn(metrics::track))
        .with_state(app)
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            log::error!("cannot listen for SIGTERM: {e}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => log::info!("SIGINT"),
        _ = term.recv() => log::info!("SIGTERM"),
    }
}
