//! What the service shows about itself: `GET /v1/plan` (the plan the worker follows, its
//! predicted time and lower bound, as JSON), `GET /v1/plan.svg` (that plan's predicted
//! residency timeline), `GET /v1/residency.svg` (the last requests' residency as it really ran:
//! page copies, evictions, compute batches and stalls, timed on the GPU), `GET /v1/status`
//! (pipelines, cap, statistics, the last reload's result and what the watcher watches) and `GET
//! /`, a small HTML page of the same with the measured plot inline. `/metrics` renders the
//! Prometheus recorder. The plan and the measured timeline come from the GPU worker between
//! requests; statistics and metrics are copies, so none of this changes residency.
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use super::error::ApiError;
use super::reload::WatchStatus;
use super::App;
use crate::engine::{EngineStats, PipelineInfo, PlanSnapshot};

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/", get(page))
        .route("/metrics", get(metrics))
        .route("/v1/plan", get(plan))
        .route("/v1/plan.svg", get(plan_svg))
        .route("/v1/residency.svg", get(residency_svg))
        .route("/v1/status", get(status))
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.metrics.render(),
    )
        .into_response()
}

/// The worker's current plan (asked on a blocking thread: the worker answers between
/// requests).
async fn current_plan(app: &Arc<App>) -> Result<PlanSnapshot, ApiError> {
    let engine = app.engine.clone();
    tokio::task::spawn_blocking(move || engine.plan())
        .await
        .map_err(|e| ApiError::internal(format!("asking for the plan: {e}")))?
        .ok_or_else(|| ApiError::unavailable("no plan: the engine has no session right now"))
}

async fn plan(State(app): State<Arc<App>>) -> Result<Json<PlanSnapshot>, ApiError> {
    Ok(Json(current_plan(&app).await?))
}

async fn plan_svg(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let p = current_plan(&app).await?;
    Ok(svg(p.svg))
}

/// The measured timeline (asked on a blocking thread, like the plan).
async fn measured_svg(app: &Arc<App>) -> Result<String, ApiError> {
    let engine = app.engine.clone();
    tokio::task::spawn_blocking(move || engine.residency_svg())
        .await
        .map_err(|e| ApiError::internal(format!("asking for the residency timeline: {e}")))?
        .ok_or_else(|| ApiError::unavailable("no timeline: the engine has no session right now"))
}

async fn residency_svg(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    Ok(svg(measured_svg(&app).await?))
}

fn svg(body: String) -> Response {
    ([(header::CONTENT_TYPE, "image/svg+xml")], body).into_response()
}

/// `GET /v1/status`.
#[derive(Debug, Serialize)]
pub struct Status {
    pub workload: String,
    pub pipelines: Vec<PipelineInfo>,
    pub cap_bytes: u64,
    pub stats: EngineStats,
    pub watch: Option<WatchStatus>,
}

fn snapshot(app: &App) -> Status {
    let stats = app.engine.stats();
    Status {
        workload: app.workload.display().to_string(),
        pipelines: app.engine.pipelines(),
        cap_bytes: stats.cap_bytes,
        watch: app
            .watch
            .as_ref()
            .map(|w| w.lock().unwrap_or_else(|e| e.into_inner()).clone()),
        stats,
    }
}

async fn status(State(app): State<Arc<App>>) -> Json<Status> {
    Json(snapshot(&app))
}

/// Escapes text for HTML element content and attribute values.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn mib(b: u64) -> String {
    format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64)
}

async fn page(State(app): State<Arc<App>>) -> Html<String> {
    let s = snapshot(&app);
    let plan = current_plan(&app).await;
    let measured = measured_svg(&app).await;
    Html(render_page(
        &s,
        plan.as_ref().ok(),
        measured.as_deref().ok(),
    ))
}

/// The status page.
pub fn render_page(s: &Status, plan: Option<&PlanSnapshot>, measured_svg: Option<&str>) -> String {
    let st = &s.stats;
    let mut o = String::new();
    o += "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>texstream</title>\
          <meta http-equiv=\"refresh\" content=\"10\">\
          <style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}\
          td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}\
          .ok{color:#060}.failed{color:#a00}#residency svg{max-width:100%;height:auto}\
          </style></head><body>\n";
    o += &format!(
        "<h1>texstream: {}</h1>\n<p id=\"workload\">{}</p>\n",
        esc(&st.workload),
        esc(&s.workload)
    );
    o += &format!(
        "<p id=\"cap\">cap {} (minimum {}), peak device memory {}, now {}; policy {}; device {}</p>\n",
        mib(st.cap_bytes),
        mib(st.min_cap_bytes),
        mib(st.peak_device_bytes),
        mib(st.device_bytes),
        esc(&st.policy),
        esc(&st.device)
    );
    o += &format!(
        "<p id=\"requests\">requests: {} answered, {} failed, {} refused (queue full); queue {}</p>\n",
        st.requests_ok, st.requests_failed, st.requests_busy, st.queue_depth
    );
    o += "<h2>Last reload</h2>\n";
    o += &match &st.last_reload {
        None => "<p id=\"reload\">none yet</p>\n".to_string(),
        Some(r) => format!(
            "<p id=\"reload\" class=\"{}\">{}: {}</p>\n",
            if r.ok { "ok" } else { "failed" },
            if r.ok { "ok" } else { "failed" },
            esc(&r.message)
        ),
    };
    o += &format!(
        "<p>reloads: {} ok, {} failed</p>\n",
        st.reloads_ok, st.reloads_failed
    );
    o += "<h2>Pipelines and models</h2>\n<table id=\"pipelines\"><tr><th>name</th><th>kind</th>\
          <th>inputs</th><th>outputs</th><th>requests</th><th>p50 ms</th><th>p99 ms</th></tr>\n";
    let ports = |ps: &[crate::engine::PortInfo]| {
        ps.iter()
            .map(|p| match &p.shape {
                Some(sh) => format!("{} ({} {:?})", esc(&p.name), esc(&p.value_type), sh),
                None => format!("{} ({})", esc(&p.name), esc(&p.value_type)),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    for p in &s.pipelines {
        let lat = st.pipelines.iter().find(|l| l.name == p.name);
        o += &format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td></tr>\n",
            esc(&p.name),
            if p.single_model { "model" } else { "pipeline" },
            ports(&p.inputs),
            ports(&p.outputs),
            lat.map_or(0, |l| l.count),
            lat.map_or(0.0, |l| l.p50_s * 1e3),
            lat.map_or(0.0, |l| l.p99_s * 1e3),
        );
    }
    o += "</table>\n<h2>Residency</h2>\n";
    match plan {
        Some(p) => {
            o += &format!(
                "<p id=\"plan\">plan: {} slots of {}, predicted {:.3} ms, lower bound {:.3} ms \
                 (<a href=\"/v1/plan.svg\">its timeline</a>)</p>\n",
                p.slots,
                mib(p.page_bytes),
                p.predicted_s * 1e3,
                p.lower_bound_s * 1e3,
            );
        }
        None => o += "<p id=\"plan\">no plan right now</p>\n",
    }
    match measured_svg {
        Some(svg) => {
            o += &format!(
                "<p>The last requests as they ran on the device:</p>\n<div id=\"residency\">{svg}</div>\n"
            )
        }
        None => o += "<p id=\"residency\">no requests have run on this session yet</p>\n",
    }
    o += "<p><a href=\"/v1/status\">status JSON</a> · <a href=\"/v1/plan\">plan JSON</a> · \
          <a href=\"/v1/residency.svg\">residency SVG</a> · <a href=\"/metrics\">metrics</a></p>\n</body></html>\n";
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_escapes_what_it_shows() {
        let mut stats = EngineStats {
            workload: "w<1>".into(),
            ..EngineStats::default()
        };
        stats.last_reload = Some(crate::engine::stats::ReloadOutcome {
            ok: false,
            message: "a.ron:3:7: expected `)` & more".into(),
            at_unix_s: 0.0,
        });
        let s = Status {
            workload: "/x/a.ron".into(),
            pipelines: Vec::new(),
            cap_bytes: 0,
            stats,
            watch: None,
        };
        let html = render_page(&s, None, None);
        assert!(html.contains("texstream: w&lt;1&gt;"));
        assert!(html.contains("class=\"failed\">failed: a.ron:3:7: expected `)` &amp; more"));
    }
}
