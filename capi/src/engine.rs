//! `TsEngine`: a running [`texstream::Engine`] behind an opaque pointer, with its options as a C
//! struct, and the calls that open, submit to, reload, describe and close it.
use std::ffi::{c_char, CString};
use std::time::Duration;

use texstream::{Engine, EngineOptions, Policy, RequestError, SubmitOptions};

use crate::boundary::{
    c_string_lossy, call, call_void, check_out, path_arg, ref_arg, str_arg, write_out,
};
use crate::request::TsRequest;
use crate::status::{CapiError, TsStatus};
use crate::values::TsValues;

/// How an engine is opened. Fill it with `ts_options_default` and change what you need; the
/// zero / NULL values mean "the workload's or the environment's".
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TsOptions {
    /// Device memory cap in bytes; 0: the workload's `cap`.
    pub cap_bytes: u64,
    /// Residency policy (`planned`, `preload`, `reload-per-model`, `on-demand`, `lru`); NULL:
    /// the workload's.
    pub policy: *const c_char,
    /// Vulkan device: an index or a name substring; NULL: `TEXSTREAM_DEVICE`, else the
    /// preferred device.
    pub device: *const c_char,
    /// Khronos validation layer: 1 on, 0 off, -1 as `TEXSTREAM_VALIDATION` says.
    pub validation: i32,
    /// Requests that may wait in the queue before a submit answers `TS_STATUS_BUSY`; 0: 64.
    pub queue_depth: usize,
}

impl Default for TsOptions {
    fn default() -> Self {
        TsOptions {
            cap_bytes: 0,
            policy: std::ptr::null(),
            device: std::ptr::null(),
            validation: -1,
            queue_depth: 0,
        }
    }
}

impl TsOptions {
    /// The engine's options; the strings are read here, while the caller's pointers are live.
    unsafe fn to_engine_options(self) -> Result<EngineOptions, CapiError> {
        let policy = if self.policy.is_null() {
            None
        } else {
            let p = str_arg(self.policy, "options.policy")?;
            Some(
                p.parse::<Policy>()
                    .map_err(|e| CapiError::Invalid(e.to_string()))?,
            )
        };
        let device = if self.device.is_null() {
            None
        } else {
            Some(str_arg(self.device, "options.device")?.to_string())
        };
        // The C ABI is an edge of the library: what it leaves open comes from the environment.
        let defaults = EngineOptions::from_env();
        let validation = match self.validation {
            -1 => defaults.device.validation,
            0 => false,
            1 => true,
            v => {
                return Err(CapiError::Invalid(format!(
                    "options.validation is {v}; it takes 1, 0 or -1"
                )))
            }
        };
        Ok(EngineOptions {
            cap: (self.cap_bytes > 0).then_some(self.cap_bytes),
            policy,
            device: texstream::DeviceChoice {
                name: device.or(defaults.device.name.clone()),
                validation,
                ..defaults.device.clone()
            },
            queue_depth: if self.queue_depth == 0 {
                defaults.queue_depth
            } else {
                self.queue_depth
            },
            ..defaults
        })
    }
}

/// A running engine (an opaque handle). Thread-safe: any number of threads may call the
/// `ts_engine_*` functions on one engine at once, except `ts_engine_close`, which must be the
/// last call.
pub struct TsEngine {
    engine: Engine,
}

/// Fills `*options` with the defaults (every field "the workload's / the environment's").
///
/// # Safety
/// `options` is NULL or points to a writable `TsOptions`.
#[no_mangle]
pub unsafe extern "C" fn ts_options_default(options: *mut TsOptions) -> TsStatus {
    call("ts_options_default", || {
        write_out(options, "options", TsOptions::default())
    })
}

/// Opens the workload file at path `workload` (compiling its ONNX models where their packed
/// files are missing or stale), opens the device and places the workload under the cap; the
/// engine is in `*out`. `options` may be NULL (all defaults). The caller owns the engine and
/// closes it with `ts_engine_close`. On failure `*out` is left as it was and `ts_last_error()`
/// names the file, line and column, the model, or the cap minimum.
///
/// # Safety
/// `workload` is a NUL-terminated path; `options` is NULL or a valid `TsOptions` whose strings
/// are NUL-terminated; `out` points to writable memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ts_engine_open(
    workload: *const c_char,
    options: *const TsOptions,
    out: *mut *mut TsEngine,
) -> TsStatus {
    call("ts_engine_open", || {
        let path = path_arg(workload, "workload")?;
        let options = match options.as_ref() {
            Some(o) => o.to_engine_options()?,
            None => TsOptions::default().to_engine_options()?,
        };
        check_out(out, "out")?;
        let engine = Engine::open(&path, options)?;
        write_out(out, "out", Box::into_raw(Box::new(TsEngine { engine })))
    })
}

/// Queues a request of pipeline (or single model) `pipeline` with a copy of `inputs` (the
/// caller keeps `inputs` and may free or reuse it at once); the request is in `*out`, owned by
/// the caller and freed with `ts_request_free`. `deadline_ms` > 0 fails the request with
/// `TS_STATUS_DEADLINE_EXCEEDED` if it has not finished that many milliseconds from now; 0 is
/// no deadline. A full queue answers `TS_STATUS_BUSY` at once; an unknown pipeline
/// `TS_STATUS_UNKNOWN_PIPELINE`. Wrong inputs are reported by `ts_request_wait`.
///
/// # Safety
/// `engine` is a live engine; `pipeline` is a NUL-terminated string; `inputs` is a live
/// `TsValues`; `out` points to writable memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ts_engine_submit(
    engine: *const TsEngine,
    pipeline: *const c_char,
    inputs: *const TsValues,
    deadline_ms: u64,
    out: *mut *mut TsRequest,
) -> TsStatus {
    call("ts_engine_submit", || {
        let engine = &ref_arg(engine, "engine")?.engine;
        let pipeline = str_arg(pipeline, "pipeline")?;
        let inputs = ref_arg(inputs, "inputs")?;
        check_out(out, "out")?;
        // Answered here rather than at the wait, so the caller learns of a typo at once (the
        // worker checks again: a reload may change the pipelines in between).
        let loaded = engine.loaded();
        if loaded.graph_index(pipeline).is_none() {
            return Err(RequestError::UnknownPipeline {
                name: pipeline.into(),
                known: loaded.names(),
            }
            .into());
        }
        let opts = if deadline_ms > 0 {
            SubmitOptions::within(Duration::from_millis(deadline_ms))
        } else {
            SubmitOptions::default()
        };
        let handle = engine.submit(pipeline, inputs.to_values(), opts)?;
        let request = Box::into_raw(Box::new(TsRequest::new(handle)));
        write_out(out, "out", request)
    })
}

/// Swaps in the workload file at path `workload`: checked and compiled first, then swapped in
/// between requests (the queued ones finish on the old workload). On failure the old workload
/// keeps serving and the error is returned. Blocks until the swap is done.
///
/// # Safety
/// `engine` is a live engine; `workload` is a NUL-terminated path.
#[no_mangle]
pub unsafe extern "C" fn ts_engine_reload(
    engine: *const TsEngine,
    workload: *const c_char,
) -> TsStatus {
    call("ts_engine_reload", || {
        let engine = &ref_arg(engine, "engine")?.engine;
        let path = path_arg(workload, "workload")?;
        engine.reload(&path)?;
        Ok(())
    })
}

/// The engine's statistics as a JSON object in `*json` (requests, latencies per pipeline and
/// model, bytes streamed, GPU time, memory against the cap, re-plans, reloads). The caller
/// owns the string and frees it with `ts_string_free`.
///
/// # Safety
/// `engine` is a live engine; `json` points to writable memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ts_engine_stats_json(
    engine: *const TsEngine,
    json: *mut *mut c_char,
) -> TsStatus {
    call("ts_engine_stats_json", || {
        let engine = &ref_arg(engine, "engine")?.engine;
        check_out(json, "json")?;
        write_out(json, "json", owned_json(&engine.stats())?)
    })
}

/// Every pipeline and model a request may name, with its inputs and outputs (name, value type,
/// tensor shape), as a JSON array in `*json`. The caller owns the string and frees it with
/// `ts_string_free`.
///
/// # Safety
/// `engine` is a live engine; `json` points to writable memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ts_engine_pipelines_json(
    engine: *const TsEngine,
    json: *mut *mut c_char,
) -> TsStatus {
    call("ts_engine_pipelines_json", || {
        let engine = &ref_arg(engine, "engine")?.engine;
        check_out(json, "json")?;
        write_out(json, "json", owned_json(&engine.pipelines())?)
    })
}

fn owned_json(value: &impl serde::Serialize) -> Result<*mut c_char, CapiError> {
    let s = serde_json::to_string(value)
        .map_err(|e| CapiError::Invalid(format!("serializing to JSON: {e}")))?;
    Ok(c_string_lossy(&s).into_raw())
}

/// Stops taking requests, finishes the queued ones, releases the device and frees the engine;
/// NULL is ignored. Requests not yet freed stay valid: waiting on one that never ran answers
/// `TS_STATUS_SHUTDOWN`.
///
/// # Safety
/// `engine` is NULL or a live engine that no other thread uses and that is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ts_engine_close(engine: *mut TsEngine) {
    call_void("ts_engine_close", || {
        if !engine.is_null() {
            let e = Box::from_raw(engine);
            e.engine.shutdown();
        }
    })
}

/// Frees a string that a `ts_*` function gave the caller to own; NULL is ignored.
///
/// # Safety
/// `s` is NULL or a string from `ts_engine_stats_json` or `ts_engine_pipelines_json`, not
/// freed before.
#[no_mangle]
pub unsafe extern "C" fn ts_string_free(s: *mut c_char) {
    call_void("ts_string_free", || {
        if !s.is_null() {
            drop(CString::from_raw(s));
        }
    })
}
