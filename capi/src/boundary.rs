//! The boundary every exported function goes through: [`call`] catches panics (they must not
//! unwind into C) and turns an error into its status code plus the thread's last-error message;
//! the pointer helpers check what C hands in, so that NULL, a misaligned or oversized buffer or
//! a non-UTF-8 string is an error code, never undefined behaviour.
use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;

use crate::status::{CapiError, TsStatus};

thread_local! {
    /// The message of the last failed call on this thread.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Runs `body` for the exported function `function`: `Ok` is `TS_STATUS_OK`; an error or a
/// panic sets this thread's last error to "`function`: what failed" and returns its code.
pub(crate) fn call(
    function: &'static str,
    body: impl FnOnce() -> Result<(), CapiError>,
) -> TsStatus {
    match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => TsStatus::Ok,
        Ok(Err(e)) => {
            set_last_error(&format!("{function}: {e}"));
            e.status()
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".into());
            set_last_error(&format!("{function}: texstream panicked: {what}"));
            TsStatus::Panic
        }
    }
}

/// Like [`call`] for the functions that return nothing (the frees): a panic is caught and
/// recorded as the last error, and otherwise ignored.
pub(crate) fn call_void(function: &'static str, body: impl FnOnce()) {
    let _ = call(function, || {
        body();
        Ok(())
    });
}

fn set_last_error(msg: &str) {
    let c = c_string_lossy(msg);
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// A pointer to this thread's last error message (empty before any call failed).
pub(crate) fn last_error_ptr() -> *const c_char {
    // The CString lives in the thread-local until the next failure on this thread replaces it.
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// `s` as a C string; interior NULs (which C cannot hold) become U+FFFD.
pub(crate) fn c_string_lossy(s: &str) -> CString {
    CString::new(s.replace('\0', "\u{FFFD}")).unwrap_or_default()
}

/// Checks a NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn str_arg<'a>(
    p: *const c_char,
    what: &'static str,
) -> Result<&'a str, CapiError> {
    if p.is_null() {
        return Err(CapiError::Null(what));
    }
    CStr::from_ptr(p)
        .to_str()
        .map_err(|_| CapiError::Utf8(what))
}

/// Checks a file path argument (raw bytes on Unix, UTF-8 elsewhere).
///
/// # Safety
/// As [`str_arg`].
pub(crate) unsafe fn path_arg(p: *const c_char, what: &'static str) -> Result<PathBuf, CapiError> {
    if p.is_null() {
        return Err(CapiError::Null(what));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(
            CStr::from_ptr(p).to_bytes(),
        )))
    }
    #[cfg(not(unix))]
    {
        str_arg(p, what).map(PathBuf::from)
    }
}

/// Checks a `(pointer, length)` array argument; NULL is allowed only with length 0.
///
/// # Safety
/// A non-NULL `p` points to `len` initialized values that outlive `'a`.
pub(crate) unsafe fn slice_arg<'a, T>(
    p: *const T,
    len: usize,
    what: &'static str,
) -> Result<&'a [T], CapiError> {
    if len == 0 {
        return Ok(&[]);
    }
    check_array(p, len, what)?;
    Ok(std::slice::from_raw_parts(p, len))
}

/// Checks a `(pointer, length)` output array; NULL is allowed only with length 0.
///
/// # Safety
/// A non-NULL `p` points to `len` writable values that outlive `'a` and nothing else uses.
pub(crate) unsafe fn slice_out<'a, T>(
    p: *mut T,
    len: usize,
    what: &'static str,
) -> Result<&'a mut [T], CapiError> {
    if len == 0 {
        return Ok(&mut []);
    }
    check_array(p, len, what)?;
    Ok(std::slice::from_raw_parts_mut(p, len))
}

fn check_array<T>(p: *const T, len: usize, what: &'static str) -> Result<(), CapiError> {
    if p.is_null() {
        return Err(CapiError::Null(what));
    }
    if !p.is_aligned() {
        return Err(CapiError::Invalid(format!(
            "argument `{what}` is not aligned to {} bytes",
            std::mem::align_of::<T>()
        )));
    }
    match len.checked_mul(std::mem::size_of::<T>()) {
        Some(bytes) if bytes <= isize::MAX as usize => Ok(()),
        _ => Err(CapiError::Invalid(format!(
            "argument `{what}`: {len} elements is more than any buffer can hold"
        ))),
    }
}

/// Checks a pointer to one value the caller owns (an opaque handle or a struct).
///
/// # Safety
/// A non-NULL `p` points to a live, aligned `T` that outlives `'a`.
pub(crate) unsafe fn ref_arg<'a, T>(p: *const T, what: &'static str) -> Result<&'a T, CapiError> {
    p.as_ref().ok_or(CapiError::Null(what))
}

/// Checks a mutable handle argument.
///
/// # Safety
/// A non-NULL `p` points to a live `T` that outlives `'a` and that no other thread uses.
pub(crate) unsafe fn mut_arg<'a, T>(p: *mut T, what: &'static str) -> Result<&'a mut T, CapiError> {
    p.as_mut().ok_or(CapiError::Null(what))
}

/// Checks an output pointer and writes `value` through it (only once the call succeeded, so
/// that a failed call leaves the caller's variable as it was).
///
/// # Safety
/// A non-NULL `p` points to writable memory for one `T`.
pub(crate) unsafe fn write_out<T>(
    p: *mut T,
    what: &'static str,
    value: T,
) -> Result<(), CapiError> {
    check_out(p, what)?;
    p.write(value);
    Ok(())
}

/// Checks an output pointer before the work that fills it (so a NULL is reported before, say,
/// a request is queued whose handle could not be returned).
pub(crate) fn check_out<T>(p: *mut T, what: &'static str) -> Result<(), CapiError> {
    if p.is_null() {
        Err(CapiError::Null(what))
    } else if !p.is_aligned() {
        Err(CapiError::Invalid(format!(
            "argument `{what}` is misaligned"
        )))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        unsafe { CStr::from_ptr(last_error_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let status = call("ts_test", || panic!("index out of bounds"));
        assert_eq!(status, TsStatus::Panic);
        assert_eq!(
            last_error(),
            "ts_test: texstream panicked: index out of bounds"
        );
        let status = call("ts_test", || panic!("{}", String::from("formatted")));
        assert_eq!(status, TsStatus::Panic);
        assert!(last_error().ends_with("formatted"), "{}", last_error());
    }

    #[test]
    fn errors_name_the_function_and_success_keeps_the_last_message() {
        assert_eq!(
            call("ts_a", || Err(CapiError::Null("out"))),
            TsStatus::NullArgument
        );
        assert_eq!(last_error(), "ts_a: argument `out` is NULL");
        assert_eq!(call("ts_b", || Ok(())), TsStatus::Ok);
        assert_eq!(last_error(), "ts_a: argument `out` is NULL");
    }

    #[test]
    fn the_last_error_is_per_thread() {
        let _ = call("ts_here", || Err(CapiError::Invalid("here".into())));
        std::thread::spawn(|| {
            assert_eq!(last_error(), "");
            let _ = call("ts_there", || Err(CapiError::Invalid("there".into())));
            assert_eq!(last_error(), "ts_there: there");
        })
        .join()
        .expect("thread");
        assert_eq!(last_error(), "ts_here: here");
    }

    #[test]
    fn arrays_are_checked_before_they_are_read() {
        unsafe {
            assert!(slice_arg::<f32>(std::ptr::null(), 0, "data").is_ok());
            assert!(matches!(
                slice_arg::<f32>(std::ptr::null(), 3, "data"),
                Err(CapiError::Null("data"))
            ));
            let v = [0u32; 4];
            let misaligned = (v.as_ptr() as *const u8).add(1) as *const u32;
            let e = slice_arg(misaligned, 2, "data").unwrap_err();
            assert!(e.to_string().contains("aligned"), "{e}");
            let e = slice_arg(v.as_ptr(), usize::MAX / 2, "data").unwrap_err();
            assert!(e.to_string().contains("more than any buffer"), "{e}");
            assert_eq!(slice_arg(v.as_ptr(), 4, "data").unwrap(), &v);
        }
    }

    #[test]
    fn strings_are_checked_for_null_and_utf8() {
        unsafe {
            assert!(matches!(
                str_arg(std::ptr::null(), "name"),
                Err(CapiError::Null("name"))
            ));
            let bad = b"\xff\xfe\0";
            assert!(matches!(
                str_arg(bad.as_ptr().cast(), "name"),
                Err(CapiError::Utf8("name"))
            ));
            assert_eq!(str_arg(c"ok".as_ptr(), "name").unwrap(), "ok");
        }
        assert_eq!(c_string_lossy("a\0b").to_str().unwrap(), "a\u{FFFD}b");
    }
}
