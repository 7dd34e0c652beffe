//! Fuzzes RON workload parsing and checking (`texstream::fuzz_entry::workload`): any bytes must
//! give Ok or an error, never a panic. Run:
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run workload fuzz/corpus/workload`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    texstream::fuzz_entry::workload(data);
});
