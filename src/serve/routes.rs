//! The KServe v2 routes: server and model metadata, health and readiness, and inference.
//! Inference decodes, converts, runs and encodes on a blocking thread (image decoding and the
//! wait for the GPU worker must not hold the async runtime); the request's deadline is the
//! server's timeout or the client's `parameters.timeout`, whichever is shorter.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use super::error::ApiError;
use super::protocol::{
    self, ModelMetadata, ServerMetadata, TensorMetadata, HEADER_LENGTH, MODEL_VERSION,
};
use super::tensors;
use super::App;
use crate::engine::{PipelineInfo, SubmitOptions, Values};

/// How long past its deadline a request may still take before the client is answered 504
/// (the engine checks deadlines between steps, so a step in progress finishes first).
pub const DEADLINE_GRACE: Duration = Duration::from_secs(2);

/// The `/v2` routes.
pub fn kserve() -> Router<Arc<App>> {
    Router::new()
        .route("/v2", get(server_metadata))
        .route("/v2/health/live", get(live))
        .route("/v2/health/ready", get(ready))
        .route("/v2/models/{name}", get(model_metadata))
        .route("/v2/models/{name}/versions/{version}", get(model_metadata))
        .route("/v2/models/{name}/ready", get(model_ready))
        .route(
            "/v2/models/{name}/versions/{version}/ready",
            get(model_ready),
        )
        .route("/v2/models/{name}/infer", post(infer))
        .route("/v2/models/{name}/versions/{version}/infer", post(infer))
}

/// Unknown routes answer 404 with the JSON error like everything else.
pub async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!("no route {method} {}", uri.path()))
}

async fn server_metadata() -> Json<ServerMetadata> {
    Json(ServerMetadata {
        name: "texstream",
        version: env!("CARGO_PKG_VERSION"),
        extensions: vec!["binary_tensor_data"],
    })
}

async fn live() -> StatusCode {
    StatusCode::OK
}

async fn ready(State(app): State<Arc<App>>) -> Result<StatusCode, ApiError> {
    if app.ready.load(std::sync::atomic::Ordering::Relaxed) {
        Ok(StatusCode::OK)
    } else {
        Err(ApiError::unavailable("shutting down"))
    }
}

/// The pipeline or model a path names (its version, when given, must be the one there is).
fn find(app: &App, path: &HashMap<String, String>) -> Result<PipelineInfo, ApiError> {
    let name = path.get("name").map(String::as_str).unwrap_or_default();
    let pipelines = app.engine.pipelines();
    let Some(info) = pipelines.iter().find(|p| p.name == name) else {
        let known: Vec<&str> = pipelines.iter().map(|p| p.name.as_str()).collect();
        return Err(ApiError::not_found(format!(
            "unknown model `{name}` (this server has: {})",
            known.join(", ")
        )));
    };
    if let Some(v) = path.get("version") {
        if v != MODEL_VERSION {
            return Err(ApiError::not_found(format!(
                "model `{name}` has no version `{v}` (only `{MODEL_VERSION}`)"
            )));
        }
    }
    Ok(info.clone())
}

fn metadata(info: &PipelineInfo) -> ModelMetadata {
    ModelMetadata {
        name: info.name.clone(),
        versions: vec![MODEL_VERSION],
        platform: if info.single_model {
            "texstream_model"
        } else {
            "texstream_pipeline"
        },
        inputs: info.inputs.iter().map(tensors::input_metadata).collect(),
        outputs: info
            .outputs
            .iter()
            .flat_map(tensors::output_metadata)
            .collect(),
    }
}

async fn model_metadata(
    State(app): State<Arc<App>>,
    Path(path): Path<HashMap<String, String>>,
) -> Result<Json<ModelMetadata>, ApiError> {
    Ok(Json(metadata(&find(&app, &path)?)))
}

async fn model_ready(
    State(app): State<Arc<App>>,
    Path(path): Path<HashMap<String, String>>,
) -> Result<StatusCode, ApiError> {
    find(&app, &path)?;
    ready(State(app)).await
}

async fn infer(
    State(app): State<Arc<App>>,
    Path(path): Path<HashMap<String, String>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|e| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is larger than this server's limit of {} bytes (--max-body)",
                app.options.max_body
            ),
        ),
        s => ApiError::new(s, format!("reading the request body: {}", e.body_text())),
    })?;
    let info = find(&app, &path)?;
    let app_c = app.clone();
    tokio::task::spawn_blocking(move || run_infer(&app_c, &info, &headers, &body))
        .await
        .map_err(|e| ApiError::internal(format!("the request's thread failed: {e}")))?
}

/// Decodes the request, runs it on the engine and encodes the outputs.
fn run_infer(
    app: &App,
    info: &PipelineInfo,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let (req, tensors_in) = protocol::parse_infer(headers, body)?;
    let model = &info.name;
    let port_names = |ports: &[crate::engine::PortInfo]| {
        ports
            .iter()
            .map(|p| format!("`{}` ({})", p.name, p.value_type))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut values = Values::new();
    for t in tensors_in {
        let Some(port) = info.inputs.iter().find(|p| p.name == t.name) else {
            return Err(ApiError::bad_request(format!(
                "model `{model}` has no input `{}` (its inputs: {})",
                t.name,
                port_names(&info.inputs)
            )));
        };
        if values.contains_key(&t.name) {
            return Err(ApiError::bad_request(format!(
                "input `{}` is given twice",
                t.name
            )));
        }
        let name = t.name.clone();
        values.insert(name, tensors::to_value(port, t)?);
    }
    if let Some(p) = info.inputs.iter().find(|p| !values.contains_key(&p.name)) {
        return Err(ApiError::bad_request(format!(
            "input `{}` is missing (model `{model}` takes {})",
            p.name,
            port_names(&info.inputs)
        )));
    }
    let offered: Vec<TensorMetadata> = info
        .outputs
        .iter()
        .flat_map(tensors::output_metadata)
        .collect();
    for o in &req.outputs {
        if !offered.iter().any(|m| m.name == o.name) {
            let names: Vec<&str> = offered.iter().map(|m| m.name.as_str()).collect();
            return Err(ApiError::bad_request(format!(
                "model `{model}` has no output `{}` (its outputs: {})",
                o.name,
                names.join(", ")
            )));
        }
    }
    let timeout = req
        .timeout_us()
        .map(Duration::from_micros)
        .map_or(app.options.timeout, |t| t.min(app.options.timeout));
    let retry = app.options.retry_after_s;
    let handle = app
        .engine
        .submit(
            model,
            values,
            SubmitOptions {
                deadline: Some(Instant::now() + timeout),
                queue_timeout: None,
            },
        )
        .map_err(|e| ApiError::from_request(e, retry))?;
    let response = match handle.wait_timeout(timeout + DEADLINE_GRACE) {
        Ok(r) => r.map_err(|e| ApiError::from_request(e, retry))?,
        Err(handle) => {
            handle.cancel();
            return Err(ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                format!("no answer within {:.3} s", timeout.as_secs_f64()),
            ));
        }
    };
    let mut outputs = Vec::new();
    for port in &info.outputs {
        if let Some(v) = response.outputs.get(&port.name) {
            outputs.extend(tensors::from_value(&port.name, v)?);
        }
    }
    let binary_default = req.binary_by_default();
    if !req.outputs.is_empty() {
        outputs.retain(|t| req.outputs.iter().any(|o| o.name == t.name));
    }
    let binary = |name: &str| {
        req.outputs
            .iter()
            .find(|o| o.name == name)
            .and_then(|o| o.parameters.get("binary_data"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(binary_default)
    };
    let enc = protocol::encode_response(model, req.id.clone(), outputs, binary)?;
    let mut resp = enc.body.into_response();
    let h = resp.headers_mut();
    match enc.header_length {
        Some(n) => {
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            h.insert(HEADER_LENGTH, HeaderValue::from(n));
        }
        None => {
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
    }
    Ok(resp)
}
