//! The optional bearer token: with one set, every route except the health probes answers 401
//! unless the request carries `Authorization: Bearer <token>`. The comparison takes the same
//! time wherever the first difference is.
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// Routes that answer without a token (liveness and readiness probes).
const OPEN_ROUTES: &[&str] = &["/v2/health/live", "/v2/health/ready"];

/// Whether `a` and `b` are equal, in time that depends only on their lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Middleware: checks the bearer token when one is configured.
pub async fn require_token(
    State(token): State<Option<Arc<str>>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(token) = token else {
        return next.run(req).await;
    };
    if OPEN_ROUTES.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(g) if same(g.trim().as_bytes(), token.as_bytes()) => next.run(req).await,
        Some(_) => unauthorized("the bearer token is wrong"),
        None => unauthorized("this server needs `Authorization: Bearer <token>`"),
    }
}

fn unauthorized(msg: &str) -> Response {
    let mut r = ApiError::new(StatusCode::UNAUTHORIZED, msg).into_response();
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn tokens_compare_exactly() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
    }
}
