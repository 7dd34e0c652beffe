//! The service's errors: why it could not start ([`ServeError`]) and what one HTTP request
//! is told ([`ApiError`]: a status and a JSON `{"error": "..."}` that names the problem, with
//! `Retry-After` when the queue is full).
use std::net::SocketAddr;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::engine::RequestError;
use crate::pipeline::ExecError;

/// Why the service could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("serving HTTP: {0}")]
    Http(std::io::Error),
    #[error("installing the Prometheus recorder: {0}")]
    Metrics(#[from] metrics_exporter_prometheus::BuildError),
    #[error("watching {path} for changes: {source}")]
    Watch {
        path: std::path::PathBuf,
        source: notify::Error,
    },
}

/// An HTTP error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// Seconds for `Retry-After` (503 on a full queue).
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            retry_after_s: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// What a failed engine request tells the client: the caller's mistakes are 4xx, a full
    /// queue 503 with `Retry-After`, a missed deadline 504, the engine's own failures 500.
    pub fn from_request(e: RequestError, retry_after_s: u64) -> ApiError {
        let msg = e.to_string();
        match e {
            RequestError::Busy { .. } => ApiError {
                retry_after_s: Some(retry_after_s),
                ..ApiError::unavailable(msg)
            },
            RequestError::UnknownPipeline { .. } => ApiError::not_found(msg),
            RequestError::Exec(x) if matches!(*x, ExecError::Input { .. }) => {
                ApiError::bad_request(msg)
            }
            RequestError::DeadlineExceeded | RequestError::Cancelled => {
                ApiError::new(StatusCode::GATEWAY_TIMEOUT, msg)
            }
            RequestError::Shutdown => ApiError::unavailable(msg),
            RequestError::Exec(_) | RequestError::Device(_) => ApiError::internal(msg),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.message });
        let mut r = (self.status, axum::Json(body)).into_response();
        if let Some(s) = self.retry_after_s {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}
