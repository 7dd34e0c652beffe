//! `texstream infer`: runs an ONNX or packed model on .npy inputs and writes one .npy per output.
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};

use crate::ir::DType;
use crate::packed::{PackedModel, StoredPrecision};
use crate::runtime::executor::compile_onnx;
use crate::runtime::npy::{read_npy, write_npy, NpyWrite};
use crate::runtime::{BuildOptions, Executable, HostTensor};

#[derive(clap::Args, Debug)]
pub struct InferArgs {
    /// An .onnx model (imported and compiled in memory) or a packed model from `texstream compile`.
    pub model: PathBuf,
    /// Model input from a .npy file (repeat per input).
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    pub inputs: Vec<String>,
    /// Directory for the outputs (one `<output name>.npy` each).
    #[arg(long = "out")]
    pub out: PathBuf,
    /// Storage precision when compiling an .onnx model (a packed model keeps its own).
    #[arg(long, default_value = "f16")]
    pub precision: String,
    /// Activation precision (f16 or f32); defaults to the weights'. `--activations f32` over fp16
    /// weights keeps the halved weight memory and computes every intermediate value in fp32.
    #[arg(long)]
    pub activations: Option<String>,
    /// Vulkan device (index or name substring).
    #[arg(long)]
    pub device: Option<String>,
    /// Timed runs after the first.
    #[arg(long, default_value_t = 0)]
    pub repeat: usize,
}

pub fn parse_precision(s: &str) -> anyhow::Result<StoredPrecision> {
    Ok(match s {
        "f16" => StoredPrecision::F16,
        "f32" => StoredPrecision::F32,
        p => bail!("--precision must be f16 or f32, got '{p}'"),
    })
}

/// Opens the device the environment selects ([`vk_backend::DeviceOptions::from_env`]), or the
/// one named by `--device`.
pub fn open_device(device: &Option<String>) -> anyhow::Result<vk_backend::Device> {
    let env = vk_backend::DeviceOptions::from_env();
    let opts = vk_backend::DeviceOptions {
        device: device.clone().or_else(|| env.device.clone()),
        ..env
    };
    vk_backend::Device::new(&opts).context("opening the Vulkan device")
}

pub fn run(args: &InferArgs) -> anyhow::Result<()> {
    let mut inputs: Vec<(String, HostTensor)> = Vec::new();
    for spec in &args.inputs {
        let (name, file) = spec
            .split_once('=')
            .with_context(|| format!("--input '{spec}' is not NAME=FILE.npy"))?;
        inputs.push((name.to_string(), read_npy(std::path::Path::new(file))?));
    }
    let device = open_device(&args.device)?;
    let t0 = Instant::now();
    let is_onnx = args
        .model
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
    let activations = args
        .activations
        .as_deref()
        .map(|a| {
            parse_precision(a)
                .map(crate::runtime::weights::vk_precision)
                .context("--activations")
        })
        .transpose()?;
    let build_opts = BuildOptions {
        activations,
        // TEXSTREAM_ARENA=off gives every tensor its own image (for debugging the arena).
        pool_arena: std::env::var("TEXSTREAM_ARENA").map_or(true, |v| v != "off"),
    };
    let build_exe = |header: &crate::packed::PackedHeader, pages: &dyn vk_backend::PageSource| {
        Executable::with_options(&device, header, pages, &build_opts)
    };
    let mut exe = if is_onnx {
        let packed = compile_onnx(&args.model, &inputs, parse_precision(&args.precision)?)
            .map_err(anyhow::Error::msg)?;
        build_exe(&packed.header, &packed)?
    } else {
        let m = PackedModel::open(&args.model)?;
        build_exe(m.header(), &m)?
    };
    let build = t0.elapsed();
    // Integer inputs of an .onnx model were bound as constants at compile time.
    let feeds: Vec<(String, HostTensor)> = inputs
        .into_iter()
        .filter(|(n, _)| exe.graph().inputs.iter().any(|p| &p.name == n))
        .collect();
    let t1 = Instant::now();
    let outs = exe.run(&feeds)?;
    let first = t1.elapsed();
    let mut times = Vec::new();
    for _ in 0..args.repeat {
        let t = Instant::now();
        exe.run(&feeds)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    for (name, t) in &outs {
        let dtype = match exe.output_dtype(name) {
            Some(DType::Bool) => NpyWrite::Bool,
            Some(d) if !d.is_float() => NpyWrite::I64,
            _ => NpyWrite::F32,
        };
        let file = args.out.join(format!("{}.npy", sanitize(name)));
        write_npy(&file, &t.shape, &t.data, dtype)?;
        println!("output {name} {:?} -> {}", t.shape, file.display());
    }
    let a = exe.arena_stats();
    println!("device: {}", device.name());
    println!(
        "precision {:?} weights, {:?} activations; layout transforms (real copies): {}; weights {} bytes in {} pages",
        exe.precision(),
        exe.activation_precision(),
        exe.graph().layout_transform_count(),
        exe.weight_bytes(),
        exe.header().page_count
    );
    println!(
        "activation arena: {} images, {} bytes (naive {} bytes, live peak {} bytes)",
        a.images, a.allocated_bytes, a.naive_bytes, a.live_peak_bytes
    );
    let tm = exe.last_timings;
    println!(
        "timings: build {:.1} ms, first run {:.1} ms (record {:.1} ms, gpu {:.1} ms)",
        build.as_secs_f64() * 1e3,
        first.as_secs_f64() * 1e3,
        tm.record.as_secs_f64() * 1e3,
        tm.gpu.as_secs_f64() * 1e3
    );
    if !times.is_empty() {
        times.sort_by(f64::total_cmp);
        println!(
            "repeat runs: median {:.1} ms over {}",
            times[times.len() / 2],
            times.len()
        );
    }
    Ok(())
}

/// Output names may contain '/' or ':'; file names keep only safe characters.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}
