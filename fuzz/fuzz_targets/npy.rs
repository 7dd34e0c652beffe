//! Fuzzes the `.npy` reader (`texstream::fuzz_entry::npy`): any bytes must give Ok or an error,
//! never a panic or a wild allocation. Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run npy fuzz/corpus/npy`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    texstream::fuzz_entry::npy(data);
});
