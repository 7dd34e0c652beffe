//! One entry point per input format, called by the fuzz targets (`fuzz/fuzz_targets/`) and by
//! the stable replay test (`tests/fuzz_replay.rs`), so both exercise the same code: any bytes
//! must give Ok or an error, never a panic. Each returns whether the input parsed.
use std::path::Path;

/// ONNX bytes through the importer, the graph passes and the packer (no external data: the
/// model "lives" in a directory that does not exist).
pub fn onnx_import(data: &[u8]) -> bool {
    let mut opts = crate::onnx::ImportOptions::default();
    // A valid spec: ignoring the result cannot hide anything.
    let _ = opts.add_input_spec("x=1x3x8x8");
    let Ok(mut model) = crate::onnx::import_bytes(
        data,
        Path::new("fuzz.onnx"),
        Path::new("/nonexistent"),
        &opts,
    ) else {
        return false;
    };
    let report = crate::ir::passes::optimize(&mut model.graph);
    let packed = crate::packed::pack_graph(
        model.graph,
        "fuzz.onnx",
        report,
        Default::default(),
        crate::packed::PackOptions::default(),
    );
    packed.is_ok()
}

/// `.npy` bytes.
pub fn npy(data: &[u8]) -> bool {
    crate::runtime::npy::parse_npy(Path::new("fuzz.npy"), data).is_ok()
}

/// A packed model: a whole `.tspk` file (starting with the magic; preamble, checksum, header)
/// or a bare JSON header (checked as `PackedModel::open` checks it after the checksum). A
/// header that passes also gives its scheduler load profile.
pub fn packed_header(data: &[u8]) -> bool {
    let file = Path::new("fuzz.tspk");
    let header = if data.starts_with(crate::packed::format::MAGIC) {
        crate::packed::parse_bytes(file, data)
    } else {
        crate::packed::parse_header(file, data)
    };
    let Ok(header) = header else {
        return false;
    };
    // What runs on a header before any GPU work: the scheduler's load profile, liveness and
    // the executor's arena plan (here with every image in a pool of its own size).
    let cost = crate::packed::CostModel {
        flops_per_s: 1e12,
        bytes_per_s: 1e11,
    };
    let _profile = header.load_profile("fuzz", cost);
    let bytes_per_value = header.precision.bytes_per_value();
    let _liveness = crate::ir::liveness::liveness(&header.graph, bytes_per_value);
    let g = &header.graph;
    let _arena = crate::runtime::arena::plan(
        g,
        |t| {
            let bytes = crate::ir::c4_bytes(&g.tensors[t].shape, bytes_per_value) as u64;
            (None, bytes)
        },
        &[],
        &[],
    );
    true
}

/// RON workload text (checked as `workload::load_workload` checks it), then the planner's
/// view of every pipeline.
pub fn workload(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(w) = crate::workload::parse_workload(text, Path::new("fuzz.ron")) else {
        return false;
    };
    for p in &w.spec.pipelines {
        let _ = w.planner_pipeline(p);
    }
    true
}
