//! Fuzzes packed model parsing and header validation (`texstream::fuzz_entry::packed_header`:
//! whole `.tspk` files or bare JSON headers): any bytes must give Ok or an error, never a panic.
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run packed_header fuzz/corpus/packed_header`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    texstream::fuzz_entry::packed_header(data);
});
