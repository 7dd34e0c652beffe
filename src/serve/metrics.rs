//! `GET /metrics`: the Prometheus exporter installed as the `metrics` facade's global
//! recorder, so everything the engine records under [`crate::engine::stats::names`] is
//! scraped as it is, plus the service's own HTTP request counts and latencies. Every metric is
//! described (promtool wants a HELP line), latency metrics are real histograms (buckets from
//! 0.5 ms to 60 s), and a scrape only renders what was recorded: it never talks to the GPU
//! worker, so it cannot change residency.
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use super::error::ServeError;
use crate::engine::stats::names;

/// HTTP requests answered, by route, method and status.
pub const HTTP_REQUESTS: &str = "texstream_http_requests_total";
/// HTTP request latency, by route.
pub const HTTP_LATENCY: &str = "texstream_http_request_duration_seconds";

/// Bucket bounds of every `*_seconds` histogram.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// How often histograms are compacted (the exporter needs its upkeep run by the caller).
pub const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Installs the exporter as the global recorder (once per process) and describes every metric.
/// Call it before the engine opens, so its first figures are recorded.
pub fn install() -> Result<PrometheusHandle, ServeError> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)?
        .install_recorder()?;
    describe();
    Ok(handle)
}

fn describe() {
    use names::*;
    describe_counter!(
        REQUESTS,
        Unit::Count,
        "Requests answered, by pipeline (or model) and outcome."
    );
    describe_histogram!(
        REQUEST_LATENCY,
        Unit::Seconds,
        "Worker time of successful requests, by pipeline (or model)."
    );
    describe_counter!(MODEL_RUNS, Unit::Count, "Model runs, by model.");
    describe_histogram!(
        MODEL_LATENCY,
        Unit::Seconds,
        "Wall time of one model run, by model."
    );
    describe_gauge!(
        QUEUE_DEPTH,
        Unit::Count,
        "Requests waiting in the engine's queue."
    );
    describe_counter!(
        BYTES_STREAMED,
        Unit::Bytes,
        "Weight bytes streamed into the atlas."
    );
    describe_counter!(
        PAGES_LOADED,
        Unit::Count,
        "Weight pages loaded into the atlas."
    );
    describe_counter!(
        EVICTIONS,
        Unit::Count,
        "Weight pages evicted from the atlas."
    );
    describe_gauge!(
        STALL,
        Unit::Seconds,
        "GPU time spent waiting for pages, summed over finished streaming sessions."
    );
    describe_gauge!(
        TRANSFER_BUSY,
        Unit::Seconds,
        "Transfer-queue busy time, summed over finished streaming sessions."
    );
    describe_gauge!(
        COMPUTE_BUSY,
        Unit::Seconds,
        "Compute busy time, summed over finished streaming sessions."
    );
    describe_gauge!(
        RESIDENT_BYTES,
        Unit::Bytes,
        "Weight bytes resident now, by model."
    );
    describe_gauge!(CAP_BYTES, Unit::Bytes, "The device memory cap.");
    describe_gauge!(DEVICE_BYTES, Unit::Bytes, "Device memory allocated now.");
    describe_gauge!(
        PEAK_DEVICE_BYTES,
        Unit::Bytes,
        "Peak device memory allocated (never above the cap)."
    );
    describe_counter!(REPLANS, Unit::Count, "Plan changes, by cause.");
    describe_counter!(RELOADS, Unit::Count, "Workload reloads, by outcome.");
    describe_counter!(
        HTTP_REQUESTS,
        Unit::Count,
        "HTTP requests answered, by route, method and status."
    );
    describe_histogram!(
        HTTP_LATENCY,
        Unit::Seconds,
        "HTTP request latency, by route."
    );
    // Both reload outcomes exist from the start, so a dashboard sees zeros, not gaps.
    for outcome in ["ok", "error"] {
        metrics::counter!(RELOADS, "outcome" => outcome).increment(0);
    }
}

/// Middleware: counts and times every request by its route pattern (not the raw path, so an
/// unknown model name cannot grow the label set).
pub async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let method = req.method().as_str().to_string();
    let t0 = Instant::now();
    let resp = next.run(req).await;
    metrics::histogram!(HTTP_LATENCY, "route" => route.clone()).record(t0.elapsed().as_secs_f64());
    metrics::counter!(HTTP_REQUESTS, "route" => route, "method" => method,
        "status" => resp.status().as_u16().to_string())
    .increment(1);
    resp
}
