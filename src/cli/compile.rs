//! `texstream compile`: ONNX → optimized IR → packed model file, through the one compile chain
//! ([`texstream::compile::Compiler`]).
use std::path::PathBuf;

use anyhow::{bail, Context};
use texstream::compile::Compiler;
use texstream::Precision;

use super::args::{parse_named_path, parse_size_arg};

/// How `--activations` decides.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivationMode {
    /// Measure on the device: fp16 activations where they land within the tolerance of fp32
    /// activations on the calibration inputs, fp32 otherwise; recorded in the packed file.
    Auto,
}

#[derive(clap::Args, Debug)]
pub struct CompileArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// Concrete input shape, NAME=D0xD1x... (repeatable), e.g. --shape x=1x3x640x640.
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    pub shapes: Vec<String>,
    /// (Renamed: input shapes are given with --shape.)
    #[arg(long = "input", value_name = "NAME=DIMS", hide = true)]
    pub old_inputs: Vec<String>,
    /// A decoder exported with past keys and values: keep them in a key/value cache of this
    /// many positions on the device, written in place (what a workload's `kv_cache` does).
    #[arg(long = "kv-cache", value_name = "MAX_LEN")]
    pub kv_cache: Option<u32>,
    /// With --kv-cache: the input holding a run's first position.
    #[arg(
        long = "kv-position-input",
        value_name = "NAME",
        default_value = "position_ids"
    )]
    pub kv_position_input: String,
    /// Bind a scalar input to a constant, NAME=VALUE (repeatable), e.g. --bind sr=16000.
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    pub binds: Vec<String>,
    /// Weight storage precision.
    #[arg(long, value_enum, default_value = "f16")]
    pub precision: Precision,
    /// Page size, e.g. 1MiB, 512KiB, 1.5MiB, 1MB or bytes.
    #[arg(long = "page-size", default_value = "1MiB", value_parser = parse_size_arg)]
    pub page_size: u64,
    /// fp16: weight tensors of at most this many values (biases, norm scales, the smallest
    /// filters) are stored as compensated hi + lo fp16 pairs for ~fp32 accuracy; 0 turns it off.
    #[arg(long, default_value_t = texstream::packed::pack::DEFAULT_COMPENSATE_MAX_VALUES)]
    pub compensate_max_values: usize,
    /// Output file (.tspk).
    #[arg(short = 'o', long = "out")]
    pub out: PathBuf,
    /// Also print the N steps with the most live activation bytes and what is live there.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub liveness: usize,
    /// Choose the activation precision by measurement (fp16 weights only); the engine and
    /// `infer` use the recorded choice where nothing else names one.
    #[arg(long, value_enum)]
    pub activations: Option<ActivationMode>,
    /// A calibration input for --activations auto, NAME=FILE.npy (one per model input).
    #[arg(long = "calibrate", value_name = "NAME=FILE", value_parser = parse_named_path)]
    pub calibrate: Vec<(String, PathBuf)>,
    /// Largest error of fp16 activations, as a fraction of an output's range, that keeps them.
    #[arg(long, default_value_t = texstream::compile::precision::DEFAULT_TOLERANCE)]
    pub activation_tolerance: f64,
    /// Vulkan device for --activations auto (index or name substring).
    #[arg(long)]
    pub device: Option<String>,
}

pub fn run(args: &CompileArgs) -> anyhow::Result<()> {
    if let Some(s) = args.old_inputs.first() {
        bail!("--input {s}: input shapes are given with --shape NAME=DIMS now (--input NAME=FILE gives a file)");
    }
    super::args::check_writable(&args.out)?;
    // Before the import: a page that no atlas layer holds would only fail (or fill RAM) later.
    texstream::packed::format::texels_per_page(args.page_size, args.precision)
        .map_err(|e| anyhow::anyhow!("--page-size {}: {e}", args.page_size))?;
    let mut c = Compiler::new(&args.model)
        .precision(args.precision)
        .page_bytes(args.page_size)
        .compensate_max_values(args.compensate_max_values);
    for s in &args.shapes {
        c = c.shape_spec(s)?;
    }
    for s in &args.binds {
        c = c.bind_spec(s)?;
    }
    if let Some(max_len) = args.kv_cache {
        if max_len == 0 {
            bail!("--kv-cache must be at least 1 position");
        }
        c = c.kv_cache(max_len as usize, &args.kv_position_input);
    }
    if args.activations.is_none() && !args.calibrate.is_empty() {
        bail!("--calibrate is for --activations auto");
    }
    if !(args.activation_tolerance > 0.0 && args.activation_tolerance.is_finite()) {
        bail!(
            "--activation-tolerance must be a positive fraction, got {}",
            args.activation_tolerance
        );
    }
    let mut compiled = c.clone().compile()?;
    if args.activations == Some(ActivationMode::Auto) {
        let mut inputs = Vec::new();
        for (name, file) in &args.calibrate {
            inputs.push((name.clone(), texstream::runtime::npy::read_npy(file)?));
        }
        if args.precision != Precision::F16 {
            bail!(
                "--activations auto chooses for fp16 weights; these are {}",
                args.precision
            );
        }
        // The fp32 model, the measure of both.
        let reference = c.precision(Precision::F32).compile()?.packed;
        let (device, _placed) = super::infer::open_device(&args.device)?;
        let p = &compiled.packed;
        let choice = texstream::compile::precision::choose_activations(
            &device,
            (&p.header, p),
            (&reference.header, &reference),
            &inputs,
            args.activation_tolerance,
        )
        .with_context(|| format!("{}: --activations auto", args.model.display()))?;
        println!(
            "activations: against the fp32 model, fp16 activations land {:.3e} of output `{}`'s \
             range and fp32 activations {:.3e} (tolerance {:.0e}): {} chosen",
            choice.fp16_error,
            choice.worst_output,
            choice.fp32_error,
            choice.tolerance,
            choice.precision
        );
        if choice.fp32_error > choice.tolerance {
            eprintln!(
                "warning: even fp32 activations miss the tolerance over fp16 weights; compile \
                 with --precision f32 for this model"
            );
        }
        compiled.packed.header.activations = Some(choice);
    }
    compiled
        .packed
        .write(&args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    let (h, r) = (&compiled.packed.header, &compiled.report);
    let weight_texels: u64 = h.weights.iter().map(|w| w.texels).sum();
    let flops: u64 = h.steps.iter().map(|s| s.flops).sum();
    println!(
        "compiled {} -> {}",
        args.model.display(),
        args.out.display()
    );
    println!("  opset {}, ONNX ops: {:?}", r.opset, r.onnx_ops);
    println!(
        "  IR nodes: {} after import, {} after passes; ops: {:?}",
        r.nodes_imported,
        h.graph.nodes.len(),
        r.op_histogram
    );
    println!("  passes: {:?}", r.passes);
    println!("  layout transforms (real copies): {}", h.layout_transforms);
    println!(
        "  weights: {} tensors, {} texels ({}), {} pages of {} bytes",
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
            p.name,
            h.graph.port_shape(p),
            h.graph.tensors[p.tensor].dtype
        );
    }
    if args.liveness > 0 {
        print!(
            "{}",
            texstream::packed::report::liveness_report(h, args.liveness)
        );
    }
    for k in h.metadata.keys() {
        println!("  metadata: {k} ({} chars)", h.metadata[k].chars().count());
    }
    Ok(())
}
