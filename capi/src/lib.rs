//! The C ABI of the texstream engine, for apps that embed C rather than Rust (camera apps on
//! phones): open a workload, submit requests from memory, wait for them, read their outputs,
//! reload, read statistics, close. The header `include/texstream.h` is generated from this
//! crate by cbindgen (`cbindgen.toml`) and checked in; `tests/header.rs` fails when it is out
//! of date.
//!
//! Conventions, the same for every function (the header repeats them):
//! - every function returns a [`TsStatus`]; results come back through out-pointers, which are
//!   written only on success; the frees return nothing and ignore NULL;
//! - a NULL, misaligned or oversized argument is an error code, never undefined behaviour, and
//!   a panic inside texstream is caught at the boundary and answered with `TS_STATUS_PANIC`;
//! - after a failure, [`ts_last_error`] says on the same thread what failed;
//! - whatever a function hands the caller to own says how to free it; pointers into a
//!   `TsValues` live as long as that `TsValues` is neither changed nor freed.
//!
//! The modules: `boundary` (panics, errors, pointer checks), [`status`] (codes and errors),
//! [`engine`] (`TsEngine`, `TsOptions`), [`request`] (`TsRequest`), [`values`] (`TsValues`).
pub(crate) mod boundary;
pub mod engine;
pub mod request;
pub mod status;
pub mod values;

use std::ffi::c_char;

pub use engine::{TsEngine, TsOptions};
pub use request::TsRequest;
pub use status::{CapiError, TsStatus};
pub use values::{TsValueKind, TsValues};

/// The message of the last call on this thread that did not return `TS_STATUS_OK`, naming the
/// function and what failed (empty if none has). Owned by texstream: valid on this thread until
/// the next failing call; never NULL. Successful calls leave it as it was.
#[no_mangle]
pub extern "C" fn ts_last_error() -> *const c_char {
    boundary::last_error_ptr()
}
