//! A submitted request as the caller holds it: wait for its outputs (with or without a
//! timeout), or cancel it. Requests carry a deadline; the worker checks it and the cancel flag
//! before the request starts and between its steps.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::error::RequestError;
use crate::pipeline::Value;

/// Named values in or out of a pipeline.
pub type Values = BTreeMap<String, Value>;

/// Options of one submission.
#[derive(Debug, Clone, Copy, Default)]
pub struct SubmitOptions {
    /// The request fails with [`RequestError::DeadlineExceeded`] if it has not finished by
    /// then (checked before it starts and between its steps).
    pub deadline: Option<Instant>,
    /// How long to wait for room in a full queue; `None` answers [`RequestError::Busy`] at
    /// once.
    pub queue_timeout: Option<Duration>,
}

impl SubmitOptions {
    /// A deadline `d` from now.
    pub fn within(d: Duration) -> SubmitOptions {
        SubmitOptions {
            deadline: Some(Instant::now() + d),
            ..SubmitOptions::default()
        }
    }
}

/// What a finished request returns.
#[derive(Debug)]
pub struct Response {
    pub outputs: Values,
    /// Time spent waiting in the queue.
    pub queued: Duration,
    /// Time the worker spent on it.
    pub run: Duration,
}

/// A submitted request.
pub struct RequestHandle {
    pub(crate) id: u64,
    pub(crate) reply: Receiver<Result<Response, RequestError>>,
    pub(crate) cancel: Arc<AtomicBool>,
}

impl RequestHandle {
    /// The engine-wide request number.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Blocks until the request finished.
    pub fn wait(self) -> Result<Response, RequestError> {
        self.reply.recv().unwrap_or(Err(RequestError::Shutdown))
    }

    /// Blocks up to `timeout`; on timeout the handle is given back to wait again.
    pub fn wait_timeout(self, timeout: Duration) -> Result<Result<Response, RequestError>, Self> {
        match self.reply.recv_timeout(timeout) {
            Ok(r) => Ok(r),
            Err(RecvTimeoutError::Timeout) => Err(self),
            Err(RecvTimeoutError::Disconnected) => Ok(Err(RequestError::Shutdown)),
        }
    }

    /// Asks the worker to stop the request (it answers [`RequestError::Cancelled`] unless it
    /// already finished).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// A token that cancels this request from another thread while one waits on the handle
    /// (the waits take the handle by value).
    pub fn cancel_token(&self) -> CancelToken {
        CancelToken(self.cancel.clone())
    }
}

/// Cancels one request, like [`RequestHandle::cancel`]; cheap to clone and `Send + Sync`.
#[derive(Clone, Debug)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
