//! Pooling kernels: MaxPool, AveragePool (count_include_pad, ceil_mode, pads, strides, dilation)
//! and GlobalAveragePool (workgroup tree reduction).

use crate::error::Result;
use crate::kernels::launch::{kerr, launch_per_texel, launch_unfolded, unfolded, IMAGES_2};
use crate::kernels::push::{dispatch_1d, PushConstants};
use crate::kernels::window::{check_out, rank4, Window2d};
use crate::pipeline::KernelDesc;
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const POOL2D: KernelDesc = KernelDesc {
    name: "pool2d",
    bindings: IMAGES_2,
    push_constant_bytes: 96,
    uses_weights: false,
};

const GLOBAL_AVG_POOL: KernelDesc = KernelDesc {
    name: "global_avg_pool",
    bindings: IMAGES_2,
    push_constant_bytes: 64,
    uses_weights: false,
};

/// Invocations a workgroup of `global_avg_pool.comp` and of `global_avg_pool_narrow.comp`
/// (their `WG`).
const GLOBAL_AVG_POOL_WORKGROUP: u64 = 256;
const GLOBAL_AVG_POOL_NARROW_WORKGROUP: u64 = 64;

/// `global_avg_pool.comp` on 64 invocations an output texel (`global_avg_pool_narrow.comp`).
const GLOBAL_AVG_POOL_NARROW: KernelDesc = KernelDesc {
    name: "global_avg_pool_narrow",
    ..GLOBAL_AVG_POOL
};

/// Which pooling reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    /// ONNX AveragePool; `count_include_pad` counts padding taps in the divisor.
    Average {
        count_include_pad: bool,
    },
}

/// MaxPool / AveragePool attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool2dParams {
    pub kind: PoolKind,
    pub window: Window2d,
    pub ceil_mode: bool,
}

/// Output shape `[N, C, OH, OW]` of a pool over rank-4 input shape `x`.
pub fn pool2d_output_shape(x: &[usize], p: &Pool2dParams) -> Result<[usize; 4]> {
    let [n, c, h, w] = match *x {
        [n, c, h, w] => [n, c, h, w],
        _ => {
            return Err(kerr(
                "pool2d",
                format!("input shape {x:?} is not rank-4 [N, C, H, W]"),
            ))
        }
    };
    let [oh, ow] = p.window.output_hw("pool2d", [h, w], p.ceil_mode)?;
    Ok([n, c, oh, ow])
}

/// Records a MaxPool / AveragePool of `x` into `out` (shape [`pool2d_output_shape`]).
pub fn pool2d_into(rec: &mut Recorder, x: &Tensor, p: &Pool2dParams, out: &Tensor) -> Result<()> {
    rank4("pool2d", x)?;
    let want = pool2d_output_shape(x.shape(), p)?;
    check_out("pool2d", x, out, &want)?;
    let w = p.window.words();
    let pads_end = p.window.pads[2] as u32 | ((p.window.pads[3] as u32) << 16);
    let mode = match p.kind {
        PoolKind::Max => 0,
        PoolKind::Average {
            count_include_pad: false,
        } => 1,
        PoolKind::Average {
            count_include_pad: true,
        } => 2,
    };
    let pc = PushConstants::new()
        .tensor(x.desc())
        .tensor(out.desc())
        .u32(w[0])
        .u32(w[1])
        .u32(w[2])
        .u32(w[3])
        .u32(pads_end)
        .u32(mode)
        .pad_to(24);
    launch_per_texel(rec, &POOL2D, out, &[Arg::input(x), Arg::output(out)], &pc)
}

/// Allocates the output and records the pool.
pub fn pool2d(rec: &mut Recorder, x: &Tensor, p: &Pool2dParams, name: &str) -> Result<Tensor> {
    let shape = pool2d_output_shape(x.shape(), p)?;
    let out = Tensor::new(rec.device(), name, &shape, x.precision())?;
    pool2d_into(rec, x, p, &out)?;
    Ok(out)
}

/// Records GlobalAveragePool: `out [N, C, 1, 1]` = mean of `x [N, C, H, W]` over H and W.
pub fn global_avg_pool_into(rec: &mut Recorder, x: &Tensor, out: &Tensor) -> Result<()> {
    let [n, c, _, _] = rank4("global_avg_pool", x)?;
    check_out("global_avg_pool", x, out, &[n, c, 1, 1])?;
    let pc = PushConstants::new().tensor(x.desc()).tensor(out.desc());
    // One workgroup per output texel; it reads by coordinates.
    let (desc, workgroup) =
        // Devices that run few invocations at once (CPU drivers) pool on the narrow workgroup:
        // on llvmpipe the wide one took the PP-OCR classifier's ten pools from 1.2 to 2.4 ms
        // (session 40), where on an H100 it took the detector's eight from 161 to 103 us.
        if !rec.device().features().runs_few_invocations() {
            (&GLOBAL_AVG_POOL, GLOBAL_AVG_POOL_WORKGROUP)
        } else {
            (&GLOBAL_AVG_POOL_NARROW, GLOBAL_AVG_POOL_NARROW_WORKGROUP)
        };
    let groups = dispatch_1d(
        rec.device(),
        out.layout().texels() * workgroup,
        workgroup as u32,
    );
    let args = [Arg::input(x), Arg::output(out)];
    let input_unfolded = unfolded(&[x]);
    launch_unfolded(
        rec,
        desc,
        out.precision(),
        &args,
        &pc,
        groups,
        input_unfolded,
    )
}

/// Allocates `[N, C, 1, 1]` and records GlobalAveragePool.
pub fn global_avg_pool(rec: &mut Recorder, x: &Tensor, name: &str) -> Result<Tensor> {
    let [n, c, _, _] = rank4("global_avg_pool", x)?;
    let out = Tensor::new(rec.device(), name, &[n, c, 1, 1], x.precision())?;
    global_avg_pool_into(rec, x, &out)?;
    Ok(out)
}
