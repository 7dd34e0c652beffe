//! `texstream infer`: runs an ONNX or packed model once (or `--repeat` more times) on `.npy`
//! inputs and writes one `.npy` per output. An `.onnx` model goes through the one compile chain
//! in memory; float inputs fix its input shapes and integer inputs (Silero VAD's `sr`) are bound
//! as constants.
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use texstream::compile::Compiler;
use texstream::ir::DType;
use texstream::packed::PackedModel;
use texstream::runtime::npy::{read_npy, write_npy, NpyWrite};
use texstream::runtime::{BuildOptions, Executable, HostTensor, TensorPrecisions};
use texstream::Precision;

use super::args::parse_named_path;

#[derive(clap::Args, Debug)]
pub struct InferArgs {
    /// An .onnx model (imported and compiled in memory) or a packed model from `texstream compile`.
    pub model: PathBuf,
    /// Model input from a .npy file, NAME=FILE.npy (repeat per input).
    #[arg(long = "input", value_name = "NAME=FILE.npy", value_parser = parse_named_path)]
    pub inputs: Vec<(String, PathBuf)>,
    /// Directory for the outputs (one `<output name>.npy` each).
    #[arg(short = 'o', long = "out")]
    pub out: PathBuf,
    /// Storage precision when compiling an .onnx model (a packed model keeps its own).
    #[arg(long, value_enum, default_value = "f16")]
    pub precision: Precision,
    /// Activation precision; defaults to the weights'. `--activations f32` over fp16 weights
    /// keeps the halved weight memory and computes every intermediate value in fp32.
    #[arg(long, value_enum)]
    pub activations: Option<Precision>,
    /// Vulkan device (index or name substring).
    #[arg(long)]
    pub device: Option<String>,
    /// Timed runs after the first.
    #[arg(long, default_value_t = 0)]
    pub repeat: usize,
    /// Fill every input not given by --input with this value, at the compiled shape (for timing
    /// a model without preparing inputs; an .onnx model needs every input given)
    #[arg(long, value_name = "VALUE")]
    pub fill_missing: Option<f32>,
    /// After the runs, time every node with GPU timestamps over N more runs and print where the
    /// time goes, by op and by node (median per node)
    #[arg(long, value_name = "N")]
    pub profile: Option<usize>,
    /// Rows the profile lists by shape and by node (with --profile)
    #[arg(long, value_name = "ROWS", default_value_t = 15)]
    pub profile_rows: usize,
    /// Record every run's commands again instead of replaying the second run's recording
    /// (to compare the host cost of recording).
    #[arg(long)]
    pub no_replay: bool,
}

/// Opens the device the environment selects ([`vk_backend::DeviceOptions::from_env`]), or the
/// one named by `--device`, and keeps the calling thread (which records and submits for the
/// commands that open it here) off the device's interrupt cores while the guard lives
/// (`vk_backend::placement`).
pub fn open_device(
    device: &Option<String>,
) -> anyhow::Result<(vk_backend::Device, vk_backend::placement::PlacedThread)> {
    let env = vk_backend::DeviceOptions::from_env();
    let opts = vk_backend::DeviceOptions {
        device: device.clone().or_else(|| env.device.clone()),
        ..env
    };
    let device = vk_backend::Device::new(&opts)
        .context("cannot open a Vulkan device (see `texstream devices`)")?;
    let placed = device.placement().place_current_thread();
    Ok((device, placed))
}

pub fn run(args: &InferArgs) -> anyhow::Result<()> {
    super::args::check_output_dir(&args.out)?;
    let mut inputs: Vec<(String, HostTensor)> = Vec::new();
    for (name, file) in &args.inputs {
        inputs.push((name.clone(), read_npy(file)?));
    }
    let is_onnx = args
        .model
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
    let t0 = Instant::now();
    let (header, packed_onnx, packed_file) = if is_onnx {
        let p = Compiler::new(&args.model)
            .precision(args.precision)
            .for_inputs(&inputs)
            .compile()?
            .packed;
        (p.header.clone(), Some(p), None)
    } else {
        let m = PackedModel::open(&args.model)?;
        (m.header().clone(), None, Some(m))
    };
    // Integer inputs of an .onnx model were bound as constants at compile time; any other
    // name must be a model input.
    let graph_inputs: Vec<&str> = header
        .graph
        .inputs
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    for (name, a) in &inputs {
        let bound = is_onnx && a.integer;
        if !bound && !graph_inputs.contains(&name.as_str()) {
            bail!(
                "--input {name}=...: {} has no input `{name}` (its inputs: {})",
                args.model.display(),
                graph_inputs.join(", ")
            );
        }
    }
    let (device, _placed) = open_device(&args.device)?;
    let pages: &dyn vk_backend::PageSource = match (&packed_onnx, &packed_file) {
        (Some(p), _) => p,
        (_, Some(m)) => m,
        (None, None) => bail!("{}: nothing to run", args.model.display()),
    };
    let build_opts = BuildOptions {
        // One run: a cache (if the model has one) starts empty, at the activations' precision.
        precisions: TensorPrecisions {
            activations: header
                .activations_or_measured(args.activations)
                .map(texstream::runtime::weights::vk_precision),
            cache: None,
        },
        // TEXSTREAM_ARENA=off gives every tensor its own image (for debugging the arena).
        pool_arena: std::env::var("TEXSTREAM_ARENA").map_or(true, |v| v != "off"),
        replay: !args.no_replay,
    };
    let mut exe = Executable::with_options(&device, &header, pages, &build_opts)?;
    let build = t0.elapsed();
    let mut feeds: Vec<(String, HostTensor)> = inputs
        .into_iter()
        .filter(|(n, _)| graph_inputs.contains(&n.as_str()))
        .collect();
    if let Some(v) = args.fill_missing {
        for p in &header.graph.inputs {
            if !feeds.iter().any(|(n, _)| *n == p.name) {
                let shape = header.graph.tensors[p.tensor].shape.clone();
                let n = shape.iter().product();
                feeds.push((p.name.clone(), HostTensor::new(shape, vec![v; n])));
            }
        }
    }
    let t1 = Instant::now();
    let outs = exe.run(&feeds)?;
    let first = t1.elapsed();
    let first_timings = exe.last_timings;
    let mut times = Vec::new();
    for _ in 0..args.repeat {
        let t = Instant::now();
        exe.run(&feeds)?;
        times.push(RepeatTime::new(t.elapsed(), &exe.last_timings));
    }
    let profile = match args.profile {
        Some(n) => Some(super::profile::NodeProfile::measure(
            &mut exe,
            &feeds,
            n.max(1),
        )?),
        None => None,
    };
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
    let overrides = device.shader_overrides();
    if !overrides.is_empty() {
        let files: Vec<String> = overrides.iter().map(|p| p.display().to_string()).collect();
        println!(
            "kernels read from TEXSTREAM_SHADER_DIR instead of the build ({}): {}",
            files.len(),
            files.join(", ")
        );
    }
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
    if let Some((dispatches, barriers)) = exe.replay_counts() {
        println!("replayed commands: {dispatches} dispatches, {barriers} barriers");
    }
    let tm = first_timings;
    println!(
        "timings: build {:.1} ms, first run {:.1} ms (record {:.1} ms, gpu {:.1} ms)",
        build.as_secs_f64() * 1e3,
        first.as_secs_f64() * 1e3,
        tm.record.as_secs_f64() * 1e3,
        tm.gpu.as_secs_f64() * 1e3
    );
    if !times.is_empty() {
        let median = |f: fn(&RepeatTime) -> f64| {
            let mut v: Vec<f64> = times.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let gpu = if times.iter().all(|t| t.gpu_ms.is_some()) {
            format!("{:.3} ms", median(|t| t.gpu_ms.unwrap_or(0.0)))
        } else {
            "no timestamps".into()
        };
        println!(
            "repeat runs: median {:.3} ms over {} ({}; host before submit {:.3} ms, submit to done {:.3} ms, GPU {gpu}, readback {:.3} ms)",
            median(|t| t.total_ms),
            times.len(),
            if times.iter().all(|t| t.replayed) {
                "replayed"
            } else {
                "recorded each run"
            },
            median(|t| t.host_ms),
            median(|t| t.wait_ms),
            median(|t| t.readback_ms),
        );
    }
    if let Some(p) = profile {
        print!("{}", p.report(exe.graph(), args.profile_rows));
    }
    Ok(())
}

/// One repeat run's wall time and its split (milliseconds).
struct RepeatTime {
    total_ms: f64,
    host_ms: f64,
    wait_ms: f64,
    readback_ms: f64,
    gpu_ms: Option<f64>,
    replayed: bool,
}

impl RepeatTime {
    fn new(total: std::time::Duration, t: &texstream::runtime::RunTimings) -> RepeatTime {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        RepeatTime {
            total_ms: ms(total),
            host_ms: ms(t.record),
            wait_ms: ms(t.gpu),
            readback_ms: ms(t.readback),
            gpu_ms: t.gpu_ns.map(|n| n / 1e6),
            replayed: t.replayed,
        }
    }
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
