//! Kernel benchmark: the same kernels with activation tensors in images vs. storage buffers
//! (GPU timestamp queries, median of several runs), and upload bandwidth (staging -> image,
//! staging -> buffer) as a fraction of the device's own buffer -> buffer copy bandwidth.
//!
//! Backs `texstream bench kernels`. Every case uploads identical random inputs to both storage
//! kinds and reports the largest difference between the two outputs as a sanity check.

use std::cell::OnceCell;
use std::rc::Rc;

use crate::atlas::{AtlasConfig, WeightAtlas};
use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError};
use crate::kernels::{binary_into, matmul_into, unary_into, BinaryOp, MatMulOpts, MatRhs, UnaryOp};
use crate::layout::{pack_matrix_kn, Precision};
use crate::memory::MemoryCategory;
use crate::pipeline::StorageKind;
use crate::recorder::Recorder;
use crate::resource::Buffer;
use crate::tensor::Tensor;
use crate::testing::Rng;
use crate::timestamps::{timestamp_valid_bits, TimestampQueries};
use crate::vk;
use crate::MemoryLocation;

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub precision: Precision,
    /// Small sizes (CPU drivers such as lavapipe; finishes in well under a minute on 2 cores).
    pub quick: bool,
    /// Timed runs per case (the median is reported).
    pub runs: u32,
    /// Untimed runs before them.
    pub warmup: u32,
    /// Bytes per copy in the bandwidth test.
    pub copy_bytes: u64,
    /// Only cases whose name contains one of these (empty = all).
    pub filter: Vec<String>,
    /// Busy the GPU this long (wall clock) before measuring, so its clocks have ramped up.
    pub spin_up_ms: u64,
}

impl BenchConfig {
    /// Full sizes (GPUs) or `quick` sizes (CPU drivers).
    pub fn new(precision: Precision, quick: bool) -> Self {
        BenchConfig {
            precision,
            quick,
            runs: if quick { 3 } else { 10 },
            warmup: if quick { 1 } else { 3 },
            copy_bytes: if quick { 4 << 20 } else { 256 << 20 },
            filter: Vec::new(),
            spin_up_ms: if quick { 0 } else { 1000 },
        }
    }
}

/// Median / min of the timed runs of one storage kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub median_ms: f64,
    pub min_ms: f64,
    /// `flops / median`.
    pub gflops: f64,
    /// Activation bytes read + written per run / median.
    pub gbps: f64,
}

/// One kernel case.
#[derive(Debug, Clone)]
pub struct KernelResult {
    /// Kernel family: `matmul`, `conv2d`, `binary`, `unary`, ...
    pub kernel: String,
    /// Human description of the sizes.
    pub shape: String,
    pub flops: f64,
    pub bytes: f64,
    pub image: Timing,
    pub buffer: Timing,
    /// Largest `|image - buffer| / max(1, |image|)` over the outputs (both from the same inputs).
    pub max_rel_diff: f64,
}

/// One copy measurement.
#[derive(Debug, Clone)]
pub struct CopyResult {
    /// e.g. `staging -> image`.
    pub what: String,
    /// `compute` or `transfer` (dedicated transfer queue).
    pub queue: String,
    pub bytes: u64,
    pub median_ms: f64,
    pub gbps: f64,
    /// `gbps` / device buffer -> buffer copy GB/s (vkCmdCopyBuffer) on the compute queue.
    pub fraction_of_device_copy: f64,
    /// `gbps` / the fastest device-to-device copy of this run (vkCmdCopyBuffer or the identity
    /// kernel; on some GPUs a shader copies several times faster than vkCmdCopyBuffer).
    pub fraction_of_best_device_copy: f64,
}

/// Everything one `bench kernels` run measured.
#[derive(Debug, Clone)]
pub struct BenchReport {
    pub device: String,
    pub precision: Precision,
    pub runs: u32,
    pub kernels: Vec<KernelResult>,
    pub copies: Vec<CopyResult>,
    /// Whether the staging buffers landed in host memory (false: device-local host-visible).
    pub staging_in_host_memory: bool,
    /// Cases that could not run, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// Records one dispatch of a case: inputs, output.
type RecordFn = Box<dyn Fn(&mut Recorder, &[Tensor], &Tensor) -> Result<()>>;

/// A kernel case: shapes, work and how to record it.
pub struct Case {
    pub kernel: &'static str,
    pub shape: String,
    pub inputs: Vec<Vec<usize>>,
    pub output: Vec<usize>,
    pub flops: f64,
    record: RecordFn,
}

impl Case {
    pub fn new(
        kernel: &'static str,
        shape: String,
        inputs: Vec<Vec<usize>>,
        output: Vec<usize>,
        flops: f64,
        record: impl Fn(&mut Recorder, &[Tensor], &Tensor) -> Result<()> + 'static,
    ) -> Self {
        Case {
            kernel,
            shape,
            inputs,
            output,
            flops,
            record: Box::new(record),
        }
    }
}

fn elems(s: &[usize]) -> usize {
    s.iter().product()
}

/// The kernel cases of this run (sizes depend on `quick`).
pub fn cases(cfg: &BenchConfig) -> Vec<Case> {
    let mut v = Vec::new();
    let ew: Vec<usize> = if cfg.quick {
        vec![1, 32, 64, 64]
    } else {
        vec![1, 64, 256, 256]
    };
    let n = elems(&ew) as f64;
    v.push(Case::new(
        "binary",
        format!("add {ew:?}"),
        vec![ew.clone(), ew.clone()],
        ew.clone(),
        n,
        |rec, x, y| binary_into(rec, BinaryOp::Add, &x[0], &x[1], y),
    ));
    v.push(Case::new(
        "unary",
        format!("gelu {ew:?}"),
        vec![ew.clone()],
        ew.clone(),
        n,
        |rec, x, y| unary_into(rec, UnaryOp::Gelu, &x[0], y),
    ));
    let mm: &[[usize; 3]] = if cfg.quick {
        &[[64, 64, 64], [128, 128, 128]]
    } else {
        &[
            [512, 512, 512],
            [1024, 1024, 1024],
            [2048, 2048, 2048],
            [4096, 1024, 4096],
        ]
    };
    for &[m, k, n] in mm {
        v.push(Case::new(
            "matmul",
            format!("M{m} K{k} N{n}, B activation"),
            vec![vec![m, k], vec![k, n]],
            vec![m, n],
            2.0 * (m * k * n) as f64,
            |rec, x, y| matmul_into(rec, &x[0], MatRhs::Tensor(&x[1]), &MatMulOpts::default(), y),
        ));
    }
    let mk = if cfg.quick { 128 } else { 1024 };
    v.push(matmul_const_case(mk, mk, mk));
    for c in crate::bench_conv::conv2d_cases(cfg.quick) {
        match c {
            Ok(c) => v.push(c),
            Err((name, why)) => log::warn!("bench case {name} left out: {why}"),
        }
    }
    v.retain(|c| {
        cfg.filter.is_empty()
            || cfg
                .filter
                .iter()
                .any(|f| c.kernel.contains(f.as_str()) || c.shape.contains(f.as_str()))
    });
    v
}

/// MatMul with a constant B `[K, N]` read through `fetch_weight` (the engine's path for weights):
/// only A and the output move between images and buffers.
fn matmul_const_case(m: usize, k: usize, n: usize) -> Case {
    let b = Rng::new(0xB0).vec(k * n, -0.1, 0.1);
    let atlas: Rc<OnceCell<WeightAtlas>> = Rc::new(OnceCell::new());
    Case::new(
        "matmul",
        format!("M{m} K{k} N{n}, B weights"),
        vec![vec![m, k]],
        vec![m, n],
        2.0 * (m * k * n) as f64,
        move |rec, x, y| {
            let a = lazy_atlas(&atlas, rec, y.precision(), || pack_matrix_kn(&b, k, n))?;
            rec.use_weights(a);
            let rhs = MatRhs::Weights {
                texel_offset: 0,
                k,
                n,
            };
            matmul_into(rec, &x[0], rhs, &MatMulOpts::default(), y)
        },
    )
}

/// A weight atlas holding `pack()`'s texels, built on first use from the recording device.
pub(crate) fn lazy_atlas<'a>(
    cell: &'a OnceCell<WeightAtlas>,
    rec: &Recorder,
    p: Precision,
    pack: impl FnOnce() -> Result<Vec<f32>>,
) -> Result<&'a WeightAtlas> {
    if cell.get().is_none() {
        let space = pack()?;
        let tpp = (crate::layout::PAGE_WIDTH * p.default_page_height()) as usize;
        let pages = (space.len() / 4).div_ceil(tpp).max(1) as u32;
        let a = WeightAtlas::new(
            rec.device(),
            AtlasConfig {
                slots: pages,
                precision: p,
                page_height: None,
                logical_pages: pages,
            },
        )?;
        a.load_all_now(&space)?;
        let _ = cell.set(a);
    }
    cell.get()
        .ok_or_else(|| VkError::Other("bench atlas was not created".into()))
}

/// Bytes per element of the activation storage.
fn elem_bytes(p: Precision) -> f64 {
    p.bytes_per_texel() as f64 / 4.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Records `warmup` untimed and `runs` timed repetitions of `body` on `queue`, each timed run
/// between its own barrier-fenced timestamps; returns the per-run times in ms.
fn time_runs(
    device: &Device,
    queue: QueueKind,
    warmup: u32,
    runs: u32,
    mut body: impl FnMut(&mut Recorder) -> Result<()>,
) -> Result<Vec<f64>> {
    let q = TimestampQueries::new(device, queue, 2 * runs)?;
    let mut rec = Recorder::new(device, queue)?;
    for _ in 0..warmup {
        body(&mut rec)?;
    }
    for r in 0..runs {
        rec.barrier();
        rec.write_timestamp(&q, 2 * r)?;
        body(&mut rec)?;
        rec.write_timestamp(&q, 2 * r + 1)?;
    }
    rec.submit_and_wait()?;
    (0..runs)
        .map(|r| Ok(q.elapsed_ns(2 * r, 2 * r + 1)? / 1e6))
        .collect()
}

fn timing(mut ms: Vec<f64>, flops: f64, bytes: f64) -> Timing {
    let min_ms = ms.iter().copied().fold(f64::INFINITY, f64::min);
    let median_ms = median(&mut ms);
    Timing {
        median_ms,
        min_ms,
        gflops: flops / (median_ms * 1e6),
        gbps: bytes / (median_ms * 1e6),
    }
}

/// Runs one case in both storage kinds.
pub fn run_case(device: &Device, cfg: &BenchConfig, case: &Case) -> Result<KernelResult> {
    let p = cfg.precision;
    let mut rng = Rng::new(0x5EED);
    let data: Vec<Vec<f32>> = case
        .inputs
        .iter()
        .map(|s| rng.vec(elems(s), -1.0, 1.0))
        .collect();
    let mut outs = Vec::new();
    let mut timings = Vec::new();
    for storage in [StorageKind::Image, StorageKind::Buffer] {
        let make = |name: &str, s: &[usize]| {
            Tensor::with_storage(device, name, s, p, MemoryCategory::Activations, storage)
        };
        let inputs = case
            .inputs
            .iter()
            .zip(&data)
            .enumerate()
            .map(|(i, (s, d))| {
                let t = make(&format!("bench in{i}"), s)?;
                t.upload(d)?;
                Ok(t)
            })
            .collect::<Result<Vec<_>>>()?;
        let out = make("bench out", &case.output)?;
        if out.storage_kind() != storage || inputs.iter().any(|t| t.storage_kind() != storage) {
            return Err(VkError::Other(format!(
                "{} {}: a tensor does not fit the device's images",
                case.kernel, case.shape
            )));
        }
        let ms = time_runs(device, QueueKind::Compute, cfg.warmup, cfg.runs, |rec| {
            (case.record)(rec, &inputs, &out)
        })?;
        let bytes = (case.inputs.iter().map(|s| elems(s)).sum::<usize>() + elems(&case.output))
            as f64
            * elem_bytes(p);
        timings.push(timing(ms, case.flops, bytes));
        outs.push(out.download()?);
    }
    let max_rel_diff = outs[0]
        .iter()
        .zip(&outs[1])
        .map(|(a, b)| ((a - b).abs() / a.abs().max(1.0)) as f64)
        .fold(
            0.0,
            |m: f64, d| if d.is_nan() { f64::INFINITY } else { m.max(d) },
        );
    let bytes = (case.inputs.iter().map(|s| elems(s)).sum::<usize>() + elems(&case.output)) as f64
        * elem_bytes(p);
    Ok(KernelResult {
        kernel: case.kernel.to_string(),
        shape: case.shape.clone(),
        flops: case.flops,
        bytes,
        image: timings[0],
        buffer: timings[1],
        max_rel_diff,
    })
}

fn storage_buffer(device: &Device, name: &str, bytes: u64) -> Result<Buffer> {
    Buffer::storage(device, name, bytes, MemoryCategory::Scratch)
}

/// Fills a host-visible staging buffer with small finite fp16/fp32 bit patterns; returns whether
/// it landed in host (not device-local) memory.
fn staging(
    device: &Device,
    name: &str,
    bytes: u64,
    location: MemoryLocation,
) -> Result<(Buffer, bool)> {
    let host_before = device.memory_stats().host_bytes;
    let b = Buffer::new(
        device,
        name,
        bytes,
        vk::BufferUsageFlags::TRANSFER_SRC,
        location,
        MemoryCategory::Staging,
    )?;
    let in_host = device.memory_stats().host_bytes > host_before;
    b.with_mapped(|m| {
        for (i, v) in m.iter_mut().enumerate() {
            *v = (i * 7 % 251) as u8 & 0x3F;
        }
    })?;
    Ok((b, in_host))
}

fn mem_label(in_host: bool) -> &'static str {
    if in_host {
        "host"
    } else {
        "device-local"
    }
}

/// Copy bandwidths: device buffer -> buffer with vkCmdCopyBuffer (the reference), staging ->
/// image and staging -> buffer (staging from `Buffer::staging_upload`, which prefers device-local
/// host-visible memory where the device has it, and from plain host memory), device buffer ->
/// image, and the `Identity` kernel copying image -> image and buffer -> buffer, on the compute
/// queue and (uploads only) the dedicated transfer queue. Returns the results and whether the
/// engine's staging (`staging_upload`) landed in host memory.
pub fn run_copies(device: &Device, cfg: &BenchConfig) -> Result<(Vec<CopyResult>, bool)> {
    let p = cfg.precision;
    let bpt = p.bytes_per_texel() as u64;
    // An image of `copy_bytes`: [1, 4, H, W] is one layer of H x W texels.
    let w = device.image_limits().max_image_dimension_2d.min(4096) as u64;
    let h = (cfg.copy_bytes / bpt / w).max(1);
    let h = h.min(device.image_limits().max_image_dimension_2d as u64);
    let bytes = w * h * bpt;
    let shape = [1, 4, h as usize, w as usize];
    let image = Tensor::new(device, "bench copy image", &shape, p)?;
    let image2 = Tensor::new(device, "bench copy image 2", &shape, p)?;
    let (up, up_host) = staging(device, "bench staging", bytes, MemoryLocation::CpuToGpu)?;
    let mut stagings = vec![(up, up_host)];
    if !up_host {
        // The engine's staging is device-local (resizable BAR / UMA); also measure plain host memory.
        let (hs, hs_host) = staging(
            device,
            "bench host staging",
            bytes,
            MemoryLocation::GpuToCpu,
        )?;
        if hs_host {
            stagings.push((hs, hs_host));
        }
    }
    let src = storage_buffer(device, "bench copy src", bytes)?;
    let dst = storage_buffer(device, "bench copy dst", bytes)?;
    let src_tensor = Tensor::new_buffer(device, "bench copy buffer tensor", &shape, p)?;
    let dst_tensor = Tensor::new_buffer(device, "bench copy buffer tensor 2", &shape, p)?;
    {
        // Contents do not matter for bandwidth, but keep them finite and initialized.
        let mut rec = Recorder::new(device, QueueKind::Compute)?;
        rec.copy_buffer(&stagings[0].0, 0, &src, 0, bytes)?;
        rec.copy_buffer_to_tensor(&stagings[0].0, 0, &src_tensor)?;
        rec.copy_buffer_to_tensor(&stagings[0].0, 0, &image)?;
        rec.clear_tensor(&image2)?;
        rec.clear_tensor(&dst_tensor)?;
        rec.submit_and_wait()?;
    }

    type Copy<'a> = (String, Box<dyn Fn(&mut Recorder) -> Result<()> + 'a>);
    let device_copy = |rec: &mut Recorder| rec.copy_buffer(&src, 0, &dst, 0, bytes);
    let mut uploads: Vec<Copy<'_>> = Vec::new();
    let (image_ref, dst_ref) = (&image, &dst_tensor);
    for (b, in_host) in &stagings {
        let m = mem_label(*in_host);
        uploads.push((
            format!("staging[{m}] -> image"),
            Box::new(move |rec: &mut Recorder| rec.copy_buffer_to_tensor(b, 0, image_ref)),
        ));
        uploads.push((
            format!("staging[{m}] -> buffer"),
            Box::new(move |rec: &mut Recorder| rec.copy_buffer_to_tensor(b, 0, dst_ref)),
        ));
    }
    uploads.push((
        "buffer -> image (device)".into(),
        Box::new(|rec: &mut Recorder| rec.copy_buffer_to_tensor(&src, 0, &image2)),
    ));
    let kernels: Vec<Copy<'_>> = vec![
        (
            "identity kernel image -> image".into(),
            Box::new(|rec: &mut Recorder| unary_into(rec, UnaryOp::Identity, &image, &image2)),
        ),
        (
            "identity kernel buffer -> buffer".into(),
            Box::new(|rec: &mut Recorder| {
                unary_into(rec, UnaryOp::Identity, &src_tensor, &dst_tensor)
            }),
        ),
    ];

    let mut out = Vec::new();
    let mut reference = f64::NAN;
    let mut measure = |queue: QueueKind, what: &str, f: &dyn Fn(&mut Recorder) -> Result<()>| {
        let mut ms = time_runs(device, queue, cfg.warmup, cfg.runs, f)?;
        let med = median(&mut ms);
        let gbps = bytes as f64 / (med * 1e6);
        if queue == QueueKind::Compute && what == "buffer -> buffer (device)" {
            reference = gbps;
        }
        out.push(CopyResult {
            what: what.to_string(),
            queue: match queue {
                QueueKind::Compute => "compute",
                QueueKind::Transfer => "transfer",
            }
            .to_string(),
            bytes,
            median_ms: med,
            gbps,
            fraction_of_device_copy: gbps / reference,
            fraction_of_best_device_copy: f64::NAN,
        });
        Ok::<(), VkError>(())
    };
    measure(
        QueueKind::Compute,
        "buffer -> buffer (device)",
        &device_copy,
    )?;
    for (what, f) in &uploads {
        measure(QueueKind::Compute, what, &**f)?;
    }
    for (what, f) in &kernels {
        measure(QueueKind::Compute, what, &**f)?;
    }
    if device.has_dedicated_transfer_queue()
        && timestamp_valid_bits(device, QueueKind::Transfer) > 0
    {
        for (what, f) in &uploads {
            measure(QueueKind::Transfer, what, &**f)?;
        }
    }
    let best = out
        .iter()
        .filter(|c| !c.what.starts_with("staging"))
        .map(|c| c.gbps)
        .fold(0.0, f64::max);
    for c in &mut out {
        c.fraction_of_best_device_copy = c.gbps / best;
    }
    Ok((out, up_host))
}

/// Keeps the GPU busy for about `ms` milliseconds (wall clock) so power management has raised
/// its clocks before anything is timed.
pub fn spin_up(device: &Device, p: Precision, ms: u64) -> Result<()> {
    if ms == 0 {
        return Ok(());
    }
    let shape = [1, 64, 512, 512];
    let x = Tensor::new(device, "bench spin-up x", &shape, p)?;
    let y = Tensor::new(device, "bench spin-up y", &shape, p)?;
    let mut rec = Recorder::new(device, QueueKind::Compute)?;
    rec.clear_tensor(&x)?;
    rec.submit_and_wait()?;
    let start = std::time::Instant::now();
    while start.elapsed().as_millis() < ms as u128 {
        let mut rec = Recorder::new(device, QueueKind::Compute)?;
        for _ in 0..20 {
            unary_into(&mut rec, UnaryOp::Gelu, &x, &y)?;
        }
        rec.submit_and_wait()?;
    }
    Ok(())
}

/// Runs every case and the copy test.
pub fn run(device: &Device, cfg: &BenchConfig) -> Result<BenchReport> {
    spin_up(device, cfg.precision, cfg.spin_up_ms)?;
    let mut kernels = Vec::new();
    let mut skipped = Vec::new();
    for case in cases(cfg) {
        match run_case(device, cfg, &case) {
            Ok(r) => kernels.push(r),
            Err(e) => skipped.push((format!("{} {}", case.kernel, case.shape), e.to_string())),
        }
    }
    let (copies, staging_in_host_memory) = run_copies(device, cfg)?;
    Ok(BenchReport {
        device: device.name().to_string(),
        precision: cfg.precision,
        runs: cfg.runs,
        kernels,
        copies,
        staging_in_host_memory,
        skipped,
    })
}
