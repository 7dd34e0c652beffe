//! Fuzzes the ONNX importer, the passes and the packer (`texstream::fuzz_entry::onnx_import`):
//! any bytes must give Ok or an error, never a panic. Run:
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run import fuzz/corpus/import`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    texstream::fuzz_entry::onnx_import(data);
});
