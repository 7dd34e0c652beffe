//! `texstream compile`: ONNX -> optimized IR -> packed model file.
use std::path::PathBuf;

use anyhow::{bail, Context};

use crate::ir::passes::optimize;
use crate::onnx::{import, ImportOptions};
use crate::packed::{pack_graph, PackOptions, StoredPrecision};

#[derive(clap::Args, Debug)]
pub struct CompileArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// Concrete input shape, NAME=D0xD1x... (repeatable), e.g. --input x=1x3x640x640.
    #[arg(long = "input", value_name = "NAME=DIMS")]
    pub inputs: Vec<String>,
    /// Bind a scalar input to a constant, NAME=VALUE (repeatable), e.g. --bind sr=16000.
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    pub binds: Vec<String>,
    /// Weight storage precision: f16 or f32.
    #[arg(long, default_value = "f16")]
    pub precision: String,
    /// Page size, e.g. 1MiB, 512KiB, 2097152.
    #[arg(long = "page-size", default_value = "1MiB")]
    pub page_size: String,
    /// fp16: weight tensors of at most this many values (biases, norm scales, the smallest
    /// filters) are stored as compensated hi + lo fp16 pairs for ~fp32 accuracy; 0 turns it off.
    #[arg(long, default_value_t = crate::packed::pack::DEFAULT_COMPENSATE_MAX_VALUES)]
    pub compensate_max_values: usize,
    /// Output file (.tspk).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Also print the N steps with the most live activation bytes and what is live there.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub liveness: usize,
}

/// Parses sizes like `1MiB`, `256KiB`, `4096`.
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let (num, mul) = if let Some(n) = t.strip_suffix("MiB") {
        (n, 1u64 << 20)
    } else if let Some(n) = t.strip_suffix("KiB") {
        (n, 1 << 10)
    } else if let Some(n) = t.strip_suffix("GiB") {
        (n, 1 << 30)
    } else {
        (t.strip_suffix('B').unwrap_or(t), 1)
    };
    let v: u64 = num
        .trim()
        .parse()
        .with_context(|| format!("bad size '{s}'"))?;
    v.checked_mul(mul)
        .with_context(|| format!("size '{s}' is too large"))
}

pub fn run(args: &CompileArgs) -> anyhow::Result<()> {
    let mut opts = ImportOptions::default();
    for s in &args.inputs {
        opts.add_input_spec(s).map_err(anyhow::Error::msg)?;
    }
    for s in &args.binds {
        opts.add_binding(s).map_err(anyhow::Error::msg)?;
    }
    let precision = match args.precision.as_str() {
        "f16" => StoredPrecision::F16,
        "f32" => StoredPrecision::F32,
        p => bail!("--precision must be f16 or f32, got '{p}'"),
    };
    let page_bytes = parse_size(&args.page_size)?;
    // Before the import: a page that no atlas layer holds would only fail (or fill RAM) later.
    crate::packed::format::texels_per_page(page_bytes, precision)
        .map_err(|e| anyhow::anyhow!("--page-size {}: {e}", args.page_size))?;
    let mut model = import(&args.model, &opts)?;
    let nodes_in = model.graph.nodes.len();
    let report = optimize(&mut model.graph);
    let hist = model.graph.op_histogram();
    let source = args.model.display().to_string();
    let meta = model.metadata().clone();
    let packed = pack_graph(
        model.graph,
        &source,
        report.clone(),
        meta,
        PackOptions {
            precision,
            page_bytes,
            compensate_max_values: args.compensate_max_values,
        },
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", args.model.display()))?;
    packed.write(&args.output)?;
    let h = &packed.header;
    let weight_texels: u64 = h.weights.iter().map(|w| w.texels).sum();
    let flops: u64 = h.steps.iter().map(|s| s.flops).sum();
    println!(
        "compiled {} -> {}",
        args.model.display(),
        args.output.display()
    );
    println!("  opset {}, ONNX ops: {:?}", model.opset, model.onnx_ops);
    println!(
        "  IR nodes: {nodes_in} after import, {} after passes; ops: {hist:?}",
        h.graph.nodes.len()
    );
    println!("  passes: {report:?}");
    println!("  layout transforms (real copies): {}", h.layout_transforms);
    println!(
        "  weights: {} tensors, {} texels ({:?}), {} pages of {} bytes",
        h.weights.len(),
        weight_texels,
        h.precision,
        h.page_count,
        h.page_bytes
    );
    println!(
        "  steps: {}, total {:.3} GFLOP, peak live activations {} bytes",
        h.steps.len(),
        flops as f64 / 1e9,
        h.peak_activation_bytes
    );
    for p in &h.graph.inputs {
        println!(
            "  input  {} {:?} {:?}",
            p.name, h.graph.tensors[p.tensor].shape, h.graph.tensors[p.tensor].dtype
        );
    }
    for p in &h.graph.outputs {
        println!(
            "  output {} {:?} {:?}",
            p.name, h.graph.tensors[p.tensor].shape, h.graph.tensors[p.tensor].dtype
        );
    }
    if args.liveness > 0 {
        print_liveness(h, args.liveness);
    }
    for k in h.metadata.keys() {
        println!("  metadata: {k} ({} chars)", h.metadata[k].chars().count());
    }
    Ok(())
}

/// The steps where the most activation bytes are live, and the largest tensors live there: where
/// a model's share of the cap goes.
fn print_liveness(h: &crate::packed::PackedHeader, top: usize) {
    let g = &h.graph;
    let bpv = h.precision.bytes_per_value();
    let mut order: Vec<usize> = (0..h.steps.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(h.steps[i].live_activation_bytes));
    let spans = crate::ir::liveness::live_spans(g);
    // The header's graph no longer holds the weights as constants; they live in pages.
    let weights: std::collections::HashSet<usize> = h.weights.iter().map(|w| w.tensor).collect();
    let mut by_pages: Vec<usize> = (0..h.steps.len()).collect();
    by_pages.sort_by_key(|&i| std::cmp::Reverse(h.steps[i].pages.len()));
    println!("  weight pages (top {top} steps):");
    for &i in by_pages.iter().take(top) {
        let s = &h.steps[i];
        let names: Vec<&str> = s
            .weights
            .iter()
            .filter_map(|&(_, w)| h.weights.get(w).map(|w| w.name.as_str()))
            .collect();
        println!(
            "    step {i:>4} {:<16} {:<28} {} pages {:?} ({})",
            s.op,
            s.name,
            s.pages.len(),
            s.pages,
            names.join(", ")
        );
    }
    println!("  liveness (top {top} steps):");
    for &i in order.iter().take(top) {
        let s = &h.steps[i];
        let mut live: Vec<(u64, usize)> = spans
            .iter()
            .enumerate()
            .filter(|(t, sp)| !weights.contains(t) && sp.is_some_and(|(a, b)| a <= i && i <= b))
            .map(|(t, _)| (crate::ir::c4_bytes(&g.tensors[t].shape, bpv) as u64, t))
            .collect();
        live.sort_unstable_by(|a, b| b.cmp(a));
        println!(
            "    step {i:>4} {:<16} {:<28} live {:>10} B",
            s.op, s.name, s.live_activation_bytes
        );
        for (b, t) in live.iter().take(6) {
            println!(
                "           {:>10} B  {} {:?}",
                b, g.tensors[*t].name, g.tensors[*t].shape
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("256KiB").unwrap(), 256 << 10);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4096B").unwrap(), 4096);
        assert!(parse_size("1.5MiB").is_err());
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn compile_tiny_model_end_to_end() {
        let dir = std::env::temp_dir().join(format!("texstream-compile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("tiny.tspk");
        let args = CompileArgs {
            model: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/import/tiny_conv.onnx"),
            inputs: vec!["x=1x3x8x8".into()],
            binds: vec![],
            precision: "f32".into(),
            page_size: "64KiB".into(),
            compensate_max_values: crate::packed::pack::DEFAULT_COMPENSATE_MAX_VALUES,
            output: out.clone(),
            liveness: 3,
        };
        run(&args).unwrap();
        let pm = crate::packed::PackedModel::open(&out).unwrap();
        assert_eq!(pm.page_bytes(), 64 << 10);
        assert_eq!(pm.header().precision, StoredPrecision::F32);
        let bad = CompileArgs {
            page_size: "1000".into(),
            ..args
        };
        assert!(run(&bad).unwrap_err().to_string().contains("page size"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
