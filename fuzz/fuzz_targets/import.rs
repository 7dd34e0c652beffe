//! Fuzzes the ONNX importer entry point plus the passes: any bytes must give Ok or an error, never
//! a panic. Run: `cargo +nightly fuzz run import fuzz/corpus/import`.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use texstream::onnx::{import_bytes, ImportOptions};

fuzz_target!(|data: &[u8]| {
    let mut opts = ImportOptions::default();
    let _ = opts.add_input_spec("x=1x3x8x8");
    if let Ok(mut m) = import_bytes(
        data,
        Path::new("fuzz.onnx"),
        Path::new("/nonexistent"),
        &opts,
    ) {
        let _ = texstream::ir::passes::optimize(&mut m.graph);
    }
});
