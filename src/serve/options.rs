//! How the service runs: where it listens, the bearer token, the request-body limit, the
//! per-request timeout, what a full queue tells the client, and whether the workload is
//! watched for changes. The defaults are the safe ones: loopback only, 64 MiB bodies, 30 s.
use std::net::SocketAddr;
use std::time::Duration;

/// The service's settings (the engine's own are [`crate::EngineOptions`]).
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to bind; loopback unless the caller asks for more.
    pub listen: SocketAddr,
    /// When set, every route but the health probes needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Largest request body accepted, in bytes (larger ones get 413).
    pub max_body: usize,
    /// How long one request may take, queue included (it becomes the engine's deadline).
    pub timeout: Duration,
    /// Seconds a client is told to wait (`Retry-After`) when the queue is full.
    pub retry_after_s: u64,
    /// Watch the workload's directory and reload on changes.
    pub watch: bool,
    /// Quiet time after the last file event before a reload (editors write in bursts).
    pub debounce: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 8000)),
            token: None,
            max_body: 64 << 20,
            timeout: Duration::from_secs(30),
            retry_after_s: 1,
            watch: true,
            debounce: Duration::from_millis(300),
        }
    }
}
