//! `TsRequest`: a submitted request behind an opaque pointer. One thread may wait on it while
//! another cancels it; the answer is taken once, by the wait that gets it.
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use texstream::{CancelToken, RequestHandle};

use crate::boundary::{call, call_void, check_out, ref_arg, write_out};
use crate::status::{CapiError, TsStatus};
use crate::values::TsValues;

/// A submitted request (an opaque handle). `ts_request_wait` and `ts_request_cancel` may be
/// called from different threads at once; `ts_request_free` must be the last call.
pub struct TsRequest {
    /// The handle while the request is unanswered; the wait that gets the answer takes it.
    handle: Mutex<Option<RequestHandle>>,
    cancel: CancelToken,
}

impl TsRequest {
    pub(crate) fn new(handle: RequestHandle) -> TsRequest {
        TsRequest {
            cancel: handle.cancel_token(),
            handle: Mutex::new(Some(handle)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<RequestHandle>> {
        // A panic while waiting left nothing half-done in the Option.
        self.handle.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Waits for the request: up to `timeout_ms` milliseconds, or without bound when `timeout_ms`
/// is negative (0 only looks). On `TS_STATUS_OK` the outputs are in `*outputs`, owned by the
/// caller and freed with `ts_values_free`. `TS_STATUS_TIMEOUT` leaves the request pending (wait
/// again, or cancel it). Any other code is the request's answer (`TS_STATUS_CANCELLED`,
/// `TS_STATUS_DEADLINE_EXCEEDED`, `TS_STATUS_REQUEST_FAILED`, ...). A request is answered once:
/// a wait after the answer was taken is `TS_STATUS_INVALID_ARGUMENT`. Either way the caller
/// still frees the request with `ts_request_free`.
///
/// # Safety
/// `request` is a live request; `outputs` points to writable memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ts_request_wait(
    request: *const TsRequest,
    timeout_ms: i64,
    outputs: *mut *mut TsValues,
) -> TsStatus {
    call("ts_request_wait", || {
        let request = ref_arg(request, "request")?;
        check_out(outputs, "outputs")?;
        let mut slot = request.lock();
        let handle = slot.take().ok_or_else(|| {
            CapiError::Invalid("the request's answer was already taken by an earlier wait".into())
        })?;
        let answer = match u64::try_from(timeout_ms) {
            Err(_) => handle.wait(),
            Ok(ms) => match handle.wait_timeout(Duration::from_millis(ms)) {
                Ok(answer) => answer,
                Err(pending) => {
                    *slot = Some(pending);
                    return Err(CapiError::Timeout(ms));
                }
            },
        };
        let response = answer?;
        let values = Box::into_raw(Box::new(TsValues::from_values(response.outputs)));
        write_out(outputs, "outputs", values)
    })
}

/// Asks the engine to stop the request: unless it already finished, its wait answers
/// `TS_STATUS_CANCELLED` (checked before it starts and between its steps). Returns at once.
///
/// # Safety
/// `request` is a live request.
#[no_mangle]
pub unsafe extern "C" fn ts_request_cancel(request: *const TsRequest) -> TsStatus {
    call("ts_request_cancel", || {
        ref_arg(request, "request")?.cancel.cancel();
        Ok(())
    })
}

/// Frees a request; NULL is ignored. A request still pending is cancelled first (its outputs
/// are dropped when it finishes).
///
/// # Safety
/// `request` is NULL or a live request that no other thread uses and that is not used
/// afterwards.
#[no_mangle]
pub unsafe extern "C" fn ts_request_free(request: *mut TsRequest) {
    call_void("ts_request_free", || {
        if !request.is_null() {
            let r = Box::from_raw(request);
            if r.lock().is_some() {
                r.cancel.cancel();
            }
        }
    })
}
