//! Conv2d with groups, stride, dilation, asymmetric pads, fused bias and activation; a separate
//! depthwise fast path, split-reduction variants of both for small outputs, and an implicit GEMM
//! on cooperative matrices for dense convolutions ([`conv2d_kernel`] picks one). Filters and bias
//! are read through `fetch_weight`.

use crate::device::Device;
use crate::error::Result;
use crate::kernels::elementwise::UnaryOp;
use crate::kernels::launch::{kerr, launch, launch_specialized, unfolded, IMAGES_2, IMAGES_4};
use crate::kernels::push::PushConstants;
use crate::kernels::window::{check_out, dispatch_3d, rank4, Window2d};
use crate::pipeline::{BindingKind, KernelDesc, Specialization};
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

/// Bytes of every convolution kernel's push constants (`include/conv_push.glsl`).
pub(crate) const CONV_PUSH_BYTES: u32 = 128;

const CONV2D: KernelDesc = KernelDesc {
    name: "conv2d",
    // Input, output, addend and input scale (each bound to the input when there is none).
    bindings: IMAGES_4,
    push_constant_bytes: CONV_PUSH_BYTES,
    uses_weights: true,
};

/// `conv2d.comp` reading each filter row through its page found once (`conv2d_plain.comp`),
/// where every row lies in at most two pages with no compensated texel
/// ([`crate::Recorder::weight_rows_plain`]).
const CONV2D_PLAIN: KernelDesc = KernelDesc {
    name: "conv2d_plain",
    ..CONV2D
};

const CONV2D_SPLITK: KernelDesc = KernelDesc {
    name: "conv2d_splitk",
    bindings: IMAGES_4,
    push_constant_bytes: CONV_PUSH_BYTES,
    uses_weights: true,
};

/// `conv2d_splitk.comp` reading each filter row through its pages found once
/// (`conv2d_splitk_plain.comp`; see [`CONV2D_PLAIN`]).
const CONV2D_SPLITK_PLAIN: KernelDesc = KernelDesc {
    name: "conv2d_splitk_plain",
    ..CONV2D_SPLITK
};

const CONV2D_DW_SPLITK: KernelDesc = KernelDesc {
    name: "conv2d_dw_splitk",
    bindings: IMAGES_2,
    push_constant_bytes: CONV_PUSH_BYTES,
    uses_weights: true,
};

const CONV2D_COOP: KernelDesc = KernelDesc {
    name: "conv2d_coop",
    bindings: IMAGES_4,
    push_constant_bytes: CONV_PUSH_BYTES,
    uses_weights: true,
};

const CONV2D_COOP_WIDE: KernelDesc = KernelDesc {
    name: "conv2d_coop_wide",
    bindings: IMAGES_4,
    push_constant_bytes: CONV_PUSH_BYTES,
    uses_weights: true,
};

const CONV2D_COOP_LARGE: KernelDesc = KernelDesc {
    name: "conv2d_coop_large",
    bindings: IMAGES_4,
    push_constant_bytes: CONV_PUSH_BYTES,
    uses_weights: true,
};
/// The small and wide tiles over one span of the reduction a workgroup
/// (`conv2d_coop*_splitk.comp`), and the kernel that sums the spans and finishes the output
/// (`conv2d_coop_splitk_combine.comp`): input, output, addend, input scale, and the fp32
/// partial results; the partials' fold follows the convolution's push constants.
const COOP_SPLITK_BINDINGS: &[BindingKind] = &[
    BindingKind::StorageImage,
    BindingKind::StorageImage,
    BindingKind::StorageImage,
    BindingKind::StorageImage,
    BindingKind::StorageImageF32,
];
const CONV2D_COOP_SPLITK: KernelDesc = KernelDesc {
    name: "conv2d_coop_splitk",
    bindings: COOP_SPLITK_BINDINGS,
    push_constant_bytes: CONV_PUSH_BYTES,
    uses_weights: true,
};
const CONV2D_COOP_WIDE_SPLITK: KernelDesc = KernelDesc {
    name: "conv2d_coop_wide_splitk",
    ..CONV2D_COOP_SPLITK
};
const CONV2D_COOP_SPLITK_COMBINE: KernelDesc = KernelDesc {
    name: "conv2d_coop_splitk_combine",
    ..CONV2D_COOP_SPLITK
};
/// Invocations a workgroup of `conv2d_coop_splitk_combine.comp`.
const COOP_COMBINE_THREADS: u32 = 64;
/// Subgroups a workgroup of the small and wide tiles (`SUBGROUPS` in `include/conv_coop.glsl`),
/// each taking every eighth step of its span.
const COOP_SUBGROUPS: usize = 8;
/// Fewest steps a subgroup takes in a span: below it the partial results and their sum cost
/// more than the workgroups gained.
const COOP_SPLIT_MIN_SUBGROUP_STEPS: usize = 4;
/// Most spans a reduction splits into.
const COOP_SPLIT_MAX_SPANS: usize = 16;
/// Spans of a short reduction on the small tile ([`short_split_spans`]), and the fewest steps
/// each keeps.
const COOP_SHORT_SPLIT_SPANS: usize = 4;
const COOP_SHORT_SPLIT_MIN_STEPS: usize = 4;

const CONV2D_COOP_LARGE_N96: KernelDesc = KernelDesc {
    name: "conv2d_coop_large_n96",
    ..CONV2D_COOP_LARGE
};

/// The output tile of a cooperative-matrix convolution (`include/conv_coop.glsl`,
/// `include/conv_coop_groups.glsl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CoopTile {
    /// 16 pixels x 16 channels, 64 k a step (`conv2d_coop.comp`): four times the workgroups
    /// of a wide tile, each lane with 16 texel loads in flight.
    Small,
    /// 32 pixels x 32 channels, 16 k a step (`conv2d_coop_wide.comp`): each staged texel
    /// serves twice the products.
    Wide,
    /// 64 pixels x 64 channels, 64 k a step over four K groups of 128 invocations
    /// (`conv2d_coop_large.comp`, the tensor-core MatMul's tile): each staged texel serves
    /// twice a wide tile's products, and each output texel is stored once.
    Large,
    /// The large tile 96 channels wide (`conv2d_coop_large_n96.comp`), where 64-channel tiles
    /// would overfill the device's first wave by a little and these fit it.
    LargeWide,
}

impl CoopTile {
    /// Input texels a step of the tile's K loop takes (the small tile 16, the wide one 4, the
    /// large ones 16 over their four K groups).
    fn step_texels(self) -> usize {
        match self {
            CoopTile::Wide => 4,
            _ => 16,
        }
    }

    /// Pixels x output channels per workgroup.
    pub fn pixels_channels(self) -> [u64; 2] {
        match self {
            CoopTile::Small => [16, 16],
            CoopTile::Wide => [32, 32],
            CoopTile::Large => [64, 64],
            CoopTile::LargeWide => [64, 96],
        }
    }
}

const CONV2D_DW: KernelDesc = KernelDesc {
    name: "conv2d_dw",
    bindings: IMAGES_2,
    push_constant_bytes: CONV_PUSH_BYTES,
    uses_weights: true,
};

/// `conv2d_dw.comp` reading its filter through the filter's pages found once
/// (`conv2d_dw_plain.comp`), where the whole filter lies in at most two pages with no
/// compensated texel (see [`CONV2D_PLAIN`]).
const CONV2D_DW_PLAIN: KernelDesc = KernelDesc {
    name: "conv2d_dw_plain",
    ..CONV2D_DW
};

/// Output pixels per invocation along W (the shaders' `PX`).
pub(crate) const CONV_PX: u64 = 4;
/// Invocations per workgroup of the split kernels (`include/conv_splitk.glsl`'s `WG`).
const SPLITK_WORKGROUP: u64 = 64;
/// Fewest reduction steps a lane keeps: each step waits on memory (~1.5 us on an H200), the
/// shared-memory sum of up to 64 lanes costs less than one.
const SPLITK_MIN_STEPS: u64 = 2;

/// log2 of the invocations that share one output unit (4 channels x `CONV_PX` pixels) whose
/// reduction takes `steps` (taps x input texels): 0 runs the direct kernel. Splits until the
/// conv has `target` invocations (half what the device runs at once: on an H200 the direct
/// kernel gives a 7x7 ResNet stage fewer than 2 k of its ~270 k) or a lane's share gets short.
/// Depends on the shapes and the device only, so every run of a model picks the same kernels.
pub(crate) fn conv_split_log2(units: u64, steps: u64, target: u64) -> u32 {
    let mut log2 = 0;
    while log2 < 6 && units << log2 < target && steps >> (log2 + 1) >= SPLITK_MIN_STEPS {
        log2 += 1;
    }
    log2
}

/// "No bias" marker in push constants.
pub(crate) const NO_BIAS: u32 = u32::MAX;

/// Where a conv's constants live in the weight space (texel offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvWeights {
    /// Filter packed by `layout::pack_conv_filter` (or `pack_depthwise_filter` when
    /// [`conv2d_is_depthwise`]).
    pub filter: u32,
    /// Bias `[O]` packed by `layout::pack_vector`.
    pub bias: Option<u32>,
}

/// Conv2d attributes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conv2dParams {
    pub window: Window2d,
    pub groups: usize,
    /// Output channels O (filter `[O, I/groups, KH, KW]`).
    pub out_channels: usize,
    /// Fused activation after the bias (`UnaryOp::Identity` for none).
    pub activation: UnaryOp,
}

/// True when the depthwise path (and `layout::pack_depthwise_filter`) is used:
/// `groups == in_channels == out_channels`.
pub fn conv2d_is_depthwise(in_channels: usize, out_channels: usize, groups: usize) -> bool {
    groups == in_channels && groups == out_channels
}

/// Output shape `[N, O, OH, OW]` of a conv over input shape `x` (must be rank 4).
pub fn conv2d_output_shape(x: &[usize], p: &Conv2dParams) -> Result<[usize; 4]> {
    let [n, c, h, w] = match *x {
        [n, c, h, w] => [n, c, h, w],
        _ => {
            return Err(kerr(
                "conv2d",
                format!("input shape {x:?} is not rank-4 [N, C, H, W]"),
            ))
        }
    };
    check_groups("conv2d", c, p.groups, p.out_channels)?;
    let [oh, ow] = p.window.output_hw("conv2d", [h, w], false)?;
    Ok([n, p.out_channels, oh, ow])
}

/// The run-time operands of a dense convolution beside its input, each optional: `addend`
/// (`out`'s layout, added before the activation; it may be `out` itself or a view of its
/// image) and `input_scale` (`[N, C, 1, 1]` at the input's precision: the input's channels
/// times these factors, as ONNX's broadcast `Mul(x, s)` before the convolution). Neither for
/// depthwise convolutions.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConvOperands<'a> {
    pub addend: Option<&'a Tensor>,
    pub input_scale: Option<&'a Tensor>,
}

/// Records `out = act(conv2d(x, W) + b)`; `out` must have [`conv2d_output_shape`].
/// Needs `rec.use_weights(..)` with the atlas holding the packed filter/bias.
pub fn conv2d_into(
    rec: &mut Recorder,
    x: &Tensor,
    weights: ConvWeights,
    p: &Conv2dParams,
    out: &Tensor,
) -> Result<()> {
    conv2d_add_into(rec, x, weights, p, ConvOperands::default(), out)
}

/// Records `out = act(conv2d(x * input_scale, W) + b + addend)` with the `operands` given
/// ([`ConvOperands`]).
pub fn conv2d_add_into(
    rec: &mut Recorder,
    x: &Tensor,
    weights: ConvWeights,
    p: &Conv2dParams,
    operands: ConvOperands<'_>,
    out: &Tensor,
) -> Result<()> {
    record_conv2d(rec, x, weights, p, operands, out, None)
}

/// [`conv2d_add_into`] with its reduction split over workgroups where
/// [`conv2d_split_shape`] gives `partials` (an fp32 tensor of that shape) for it: each span's
/// sum goes to `partials`, and a second kernel sums the spans and finishes the output.
pub fn conv2d_split_add_into(
    rec: &mut Recorder,
    x: &Tensor,
    weights: ConvWeights,
    p: &Conv2dParams,
    operands: ConvOperands<'_>,
    out: &Tensor,
    partials: &Tensor,
) -> Result<()> {
    record_conv2d(rec, x, weights, p, operands, out, Some(partials))
}

/// The shape of the fp32 partial results `[1, 4, spans * N * pixels, ceil(O / 4)]` that
/// [`conv2d_split_add_into`] needs, where the convolution runs on the small or wide
/// tensor-core tile and its workgroups leave most of the device idle while its reduction is
/// long ([`coop_split_spans`]); `None` elsewhere (run [`conv2d_add_into`]).
pub fn conv2d_split_shape(
    rec: &Recorder,
    x: &Tensor,
    p: &Conv2dParams,
    out: &Tensor,
) -> Result<Option<Vec<usize>>> {
    let ConvKernel::CoopGemm(tile) = conv2d_kernel(rec.device(), x.shape(), p, out.precision())?
    else {
        return Ok(None);
    };
    let spans = coop_split_spans(rec.device(), x.shape(), p, tile)?;
    let [n, o, oh, ow] = conv2d_output_shape(x.shape(), p)?;
    Ok((spans > 1).then(|| vec![1, 4, spans * n * oh * ow, o.div_ceil(4)]))
}

/// Reduction spans of a convolution on tensor-core tile `tile` over input shape `x`: one on the
/// large tiles; on the small and wide ones, where the tile's workgroups are at most half the
/// device's multiprocessors, as many as fill about two workgroups a multiprocessor while each
/// subgroup keeps [`COOP_SPLIT_MIN_SUBGROUP_STEPS`] steps a span, or as the device's options
/// fix ([`crate::DeviceOptions::conv_split_k`]). ResNet-50's 3x3 convolutions at 14x14 make 56
/// wide workgroups of 144 steps for 132 multiprocessors: four spans.
fn coop_split_spans(
    device: &Device,
    x: &[usize],
    p: &Conv2dParams,
    tile: CoopTile,
) -> Result<usize> {
    if !matches!(tile, CoopTile::Small | CoopTile::Wide) {
        return Ok(1);
    }
    let [n, o, oh, ow] = conv2d_output_shape(x, p)?;
    let [kh, kw] = p.window.kernel;
    let k4 = kh * kw * (x[1] / p.groups).div_ceil(4);
    let steps = k4.div_ceil(tile.step_texels());
    let [tp, tc] = tile.pixels_channels();
    let workgroups = ((oh * ow) as u64).div_ceil(tp) * (o as u64).div_ceil(tc) * n as u64;
    let features = device.features();
    let spans = split_spans(&features, workgroups, steps);
    if spans > 1 || tile != CoopTile::Small || features.conv_split_k.is_some() {
        return Ok(spans);
    }
    Ok(short_split_spans(
        features.multiprocessors(),
        workgroups,
        steps,
    ))
}

/// Spans of a small-tile convolution whose reduction is too short for [`split_spans`] (under
/// [`COOP_SPLIT_MIN_SUBGROUP_STEPS`] steps a subgroup) while its workgroups are so few that
/// [`COOP_SHORT_SPLIT_SPANS`] times them still fit the multiprocessors once: that many spans of
/// at least [`COOP_SHORT_SPLIT_MIN_STEPS`] steps each. Each workgroup's steps then run as a
/// quarter of the chain. On an H100 (session 39, run 6) DenseNet-121's 3x3 convolutions to 32
/// channels went from 24.9 to 15.9 us at 14x14 (26 workgroups of 18 steps) and from 23.2 to
/// 15.9 at 7x7 (8), where its 1x1 ones at 14x14 (104 workgroups) lost on four spans, 22.5 ->
/// 37.5 us; with this rule the model went from 3.575 to 3.30 ms (run 7), ResNet-50,
/// MobileNetV3-Large and the OCR classifier unchanged.
fn short_split_spans(multiprocessors: u64, workgroups: u64, steps: usize) -> usize {
    if workgroups * COOP_SHORT_SPLIT_SPANS as u64 > multiprocessors {
        return 1;
    }
    let want = COOP_SHORT_SPLIT_SPANS
        .min(steps / COOP_SHORT_SPLIT_MIN_STEPS)
        .max(1);
    steps.div_ceil(steps.div_ceil(want))
}

/// Spans for `workgroups` workgroups of `steps` steps each (see [`coop_split_spans`]), the
/// steps dealt out evenly so that no span is empty.
fn split_spans(features: &crate::DeviceFeatures, workgroups: u64, steps: usize) -> usize {
    let want = match features.conv_split_k {
        Some(n) => n as usize,
        None => {
            let multiprocessors = features.multiprocessors();
            if 2 * workgroups > multiprocessors {
                return 1;
            }
            let room = (2 * multiprocessors / workgroups.max(1)) as usize;
            room.min(steps / (COOP_SUBGROUPS * COOP_SPLIT_MIN_SUBGROUP_STEPS))
        }
    };
    let want = want.clamp(1, steps.clamp(1, COOP_SPLIT_MAX_SPANS));
    steps.div_ceil(steps.div_ceil(want))
}

#[allow(clippy::too_many_arguments)]
fn record_conv2d(
    rec: &mut Recorder,
    x: &Tensor,
    weights: ConvWeights,
    p: &Conv2dParams,
    operands: ConvOperands<'_>,
    out: &Tensor,
    partials: Option<&Tensor>,
) -> Result<()> {
    let [n, c, _, _] = rank4("conv2d", x)?;
    let want = conv2d_output_shape(x.shape(), p)?;
    check_out("conv2d", x, out, &want)?;
    let (icg, ocg) = (c / p.groups, p.out_channels / p.groups);
    let depthwise = conv2d_is_depthwise(c, p.out_channels, p.groups);
    let ConvOperands {
        addend,
        input_scale,
    } = operands;
    if let Some(s) = input_scale {
        if depthwise || s.shape() != [n, c, 1, 1] || s.precision() != x.precision() {
            return Err(kerr(
                "conv2d",
                format!(
                    "input scale `{}` {:?} {:?} must be [N, C, 1, 1] of input `{}` {:?} {:?}, \
                     of a non-depthwise conv",
                    s.name(),
                    s.shape(),
                    s.precision(),
                    x.name(),
                    x.shape(),
                    x.precision()
                ),
            ));
        }
    }
    if let Some(a) = addend {
        if depthwise || a.layout() != out.layout() || a.precision() != out.precision() {
            return Err(kerr(
                "conv2d",
                format!(
                    "addend `{}` {:?} must match output `{}` {:?} of a non-depthwise conv",
                    a.name(),
                    a.shape(),
                    out.name(),
                    out.shape()
                ),
            ));
        }
    }
    let aligned = p.groups == 1 || (icg.is_multiple_of(4) && ocg.is_multiple_of(4));
    let l = out.layout();
    let args = if depthwise {
        vec![Arg::input(x), Arg::output(out)]
    } else {
        vec![
            Arg::input(x),
            Arg::output(out),
            Arg::input(addend.unwrap_or(x)),
            Arg::input(input_scale.unwrap_or(x)),
        ]
    };
    let addend_flag = if addend.is_some() { 0x200 } else { 0 };
    // The input scale's fold (its width and height are 1).
    let [scale_pw, scale_ph] = input_scale.map_or([1, 1], |s| {
        let sl = s.layout();
        [sl.pw, sl.ph]
    });
    // Every kernel takes the same push constants; `flags` adds the direct kernel's path bit.
    let push = |flags: u32| {
        conv_push_constants(
            x,
            out,
            &p.window,
            [icg, ocg],
            weights,
            p.activation,
            flags | addend_flag,
        )
        .set_word(30, scale_pw)
        .set_word(31, scale_ph)
    };
    let units_x = (l.w as u64).div_ceil(CONV_PX);
    // The split and direct kernels read the input with LOAD_AT; a scaled input is a pipeline
    // of its own (`INPUT_SCALED`).
    let spec = |unfolded| Specialization {
        unfolded,
        input_scaled: input_scale.is_some(),
    };
    let input_unfolded = unfolded(&[x]);
    match conv2d_kernel(rec.device(), x.shape(), p, out.precision())? {
        ConvKernel::CoopGemm(tile) => {
            let [tp, tc] = tile.pixels_channels();
            let groups = dispatch_3d(
                rec.device(),
                "conv2d",
                [
                    (l.h as u64 * l.w as u64).div_ceil(tp),
                    (p.out_channels as u64).div_ceil(tc),
                    l.n as u64,
                ],
                [1, 1, 1],
            )?;
            let spans = match partials {
                Some(_) => coop_split_spans(rec.device(), x.shape(), p, tile)?,
                None => 1,
            };
            if let (Some(partials), true) = (partials, spans > 1) {
                return record_coop_split(
                    rec,
                    (tile, spans),
                    (&args, partials),
                    (push(0), spec(false)),
                    out,
                );
            }
            let desc = match tile {
                CoopTile::Small => &CONV2D_COOP,
                CoopTile::Wide => &CONV2D_COOP_WIDE,
                CoopTile::Large => &CONV2D_COOP_LARGE,
                CoopTile::LargeWide => &CONV2D_COOP_LARGE_N96,
            };
            launch_specialized(
                rec,
                desc,
                out.precision(),
                &args,
                &push(0),
                groups,
                spec(false),
            )
        }
        ConvKernel::Split { lanes } => {
            let split = lanes.trailing_zeros();
            let per_group = SPLITK_WORKGROUP >> split;
            let units = UnitGrid::new(units_x, l.h as u64, l.layers());
            let flat = units.counts_flat(rec.device(), [per_group, 1]);
            let groups = if flat {
                dispatch_3d(
                    rec.device(),
                    "conv2d",
                    [units.total(), 1, 1],
                    [per_group as u32, 1, 1],
                )?
            } else {
                dispatch_3d(
                    rec.device(),
                    "conv2d",
                    [(units_x * l.h as u64).div_ceil(per_group), 1, l.layers()],
                    [1, 1, 1],
                )?
            };
            let desc = if depthwise {
                &CONV2D_DW_SPLITK
            } else if plain_filter_rows(rec, weights, p, icg) {
                &CONV2D_SPLITK_PLAIN
            } else {
                &CONV2D_SPLITK
            };
            let pc = push(if flat { CONV_FLAT_UNITS } else { 0 }).set_word(27, split);
            launch_specialized(
                rec,
                desc,
                out.precision(),
                &args,
                &pc,
                groups,
                spec(input_unfolded),
            )
        }
        ConvKernel::Direct => {
            let units = UnitGrid::new(units_x, l.h as u64, l.layers());
            let flat = units.counts_flat(rec.device(), [8, 8]);
            let general = if aligned || depthwise { 0 } else { 0x100 };
            let pc = push(general | if flat { CONV_FLAT_UNITS } else { 0 });
            let desc = if depthwise && plain_depthwise_filter(rec, weights, p, c) {
                &CONV2D_DW_PLAIN
            } else if depthwise {
                &CONV2D_DW
            } else if plain_filter_rows(rec, weights, p, icg) {
                &CONV2D_PLAIN
            } else {
                &CONV2D
            };
            let groups = if flat {
                dispatch_3d(rec.device(), "conv2d", [units.total(), 1, 1], [64, 1, 1])?
            } else {
                dispatch_3d(
                    rec.device(),
                    "conv2d",
                    [units_x, l.h as u64, l.layers()],
                    [8, 8, 1],
                )?
            };
            launch_specialized(
                rec,
                desc,
                out.precision(),
                &args,
                &pc,
                groups,
                spec(input_unfolded),
            )
        }
    }
}

/// The `flags` bit of the direct and split kernels' push constants that counts their output
/// units across rows and layers in one dimension (`include/conv_units.glsl`).
const CONV_FLAT_UNITS: u32 = 0x400;

/// A convolution's output units (4 channels at `CONV_PX` pixels of a row): `x` a row, `rows`,
/// `layers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UnitGrid {
    x: u64,
    rows: u64,
    layers: u64,
}

impl UnitGrid {
    fn new(x: u64, rows: u64, layers: u64) -> Self {
        Self { x, rows, layers }
    }

    fn total(self) -> u64 {
        self.x * self.rows * self.layers
    }

    /// Whether the kernel counts the units flat (`CONV_FLAT_UNITS`) rather than in workgroups of
    /// `workgroup` units (along a row, over rows) within one layer: on a device that runs a
    /// workgroup's invocations in batches one after another ([`DeviceFeatures::runs_few_invocations`]:
    /// lavapipe) where the per-layer grid would hold over a fifth more invocations than the
    /// units need. There a squeeze-and-excitation convolution's 50 layers of one unit ran 50
    /// workgroups of 64 (the PP-OCR classifier's took 0.5 ms each). Elsewhere a workgroup keeps
    /// one layer, so its invocations read the same filter texels.
    ///
    /// [`DeviceFeatures::runs_few_invocations`]: crate::DeviceFeatures::runs_few_invocations
    fn counts_flat(self, device: &Device, workgroup: [u64; 2]) -> bool {
        let [wx, wy] = workgroup;
        let grid = self.x.div_ceil(wx) * wx * self.rows.div_ceil(wy) * wy * self.layers;
        let per_group = wx * wy;
        let flat = self.total().div_ceil(per_group) * per_group;
        device.features().runs_few_invocations() && grid * 4 > flat * 5
    }
}

/// Whether a dense convolution's filter rows (one an output channel, `pack_conv_filter`) each
/// lie in at most two pages of the bound atlas with no compensated texel, so that the `_plain`
/// kernels may read them through their pages found once ([`Recorder::weight_rows_plain`]).
fn plain_filter_rows(rec: &Recorder, weights: ConvWeights, p: &Conv2dParams, icg: usize) -> bool {
    let [kh, kw] = p.window.kernel;
    let row_texels = (kh * kw * icg.div_ceil(4)) as u64;
    rec.weight_rows_plain(weights.filter as u64, p.out_channels as u64, row_texels)
}

/// Whether a depthwise filter over `channels` (`pack_depthwise_filter`: the taps of all
/// channels, one run) lies in at most two pages of the bound atlas with no compensated texel,
/// so that `conv2d_dw_plain.comp` may read it through its pages found once.
fn plain_depthwise_filter(
    rec: &Recorder,
    weights: ConvWeights,
    p: &Conv2dParams,
    channels: usize,
) -> bool {
    let [kh, kw] = p.window.kernel;
    let texels = crate::layout::depthwise_filter_texels(channels, kh, kw) as u64;
    rec.weight_rows_plain(weights.filter as u64, 1, texels)
}

/// Records a convolution on the small or wide tensor-core `tile` over `spans` reduction spans
/// (`args`: input, output, addend; `push`: its push constants), each span's sum into
/// `partials`, then the kernel that sums them into `out`.
fn record_coop_split(
    rec: &mut Recorder,
    (tile, spans): (CoopTile, usize),
    (args, partials): (&[Arg<'_>], &Tensor),
    (push, spec): (PushConstants, Specialization),
    out: &Tensor,
) -> Result<()> {
    let l = out.layout();
    let pixels = l.h as u64 * l.w as u64;
    let want = [1, 4, spans * l.n as usize * pixels as usize, l.c4 as usize];
    if partials.shape() != want || partials.precision() != crate::layout::Precision::F32 {
        return Err(kerr(
            "conv2d",
            format!(
                "partials `{}` {:?} {:?}: expected an fp32 tensor {want:?}",
                partials.name(),
                partials.shape(),
                partials.precision()
            ),
        ));
    }
    let [tp, tc] = tile.pixels_channels();
    let groups = dispatch_3d(
        rec.device(),
        "conv2d",
        [
            pixels.div_ceil(tp),
            (l.c as u64).div_ceil(tc),
            l.n as u64 * spans as u64,
        ],
        [1, 1, 1],
    )?;
    let pl = partials.layout();
    let pc = push
        .set_word(27, spans as u32)
        .set_word(28, pl.pw)
        .set_word(29, pl.ph);
    let desc = match tile {
        CoopTile::Small => &CONV2D_COOP_SPLITK,
        _ => &CONV2D_COOP_WIDE_SPLITK,
    };
    let split_args = [args, &[Arg::output(partials)]].concat();
    launch_specialized(rec, desc, out.precision(), &split_args, &pc, groups, spec)?;
    // One invocation an output texel.
    let combine_args = [args, &[Arg::input(partials)]].concat();
    let texels = l.n as u64 * l.c4 as u64 * pixels;
    let groups = crate::kernels::push::dispatch_1d(rec.device(), texels, COOP_COMBINE_THREADS);
    launch(
        rec,
        &CONV2D_COOP_SPLITK_COMBINE,
        out.precision(),
        &combine_args,
        &pc,
        groups,
    )
}

/// Which kernel runs a convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConvKernel {
    /// One invocation per output unit (`conv2d.comp`, `conv2d_dw.comp`).
    Direct,
    /// `lanes` invocations (a power of two, 2..=64) share one output unit's reduction
    /// (`conv2d_splitk.comp`, `conv2d_dw_splitk.comp`).
    Split { lanes: u32 },
    /// Implicit GEMM on cooperative matrices, on one of its tiles.
    CoopGemm(CoopTile),
}

/// Fewest output channels and input texels of reduction for which the implicit GEMM runs:
/// below them its tiles and steps are mostly padding.
const COOP_MIN_CHANNELS: usize = 16;
const COOP_MIN_TEXELS: usize = 8;
/// Fewest output pixels (over the batch) for which the implicit GEMM runs: the small tile's 16.
/// Below it the tile's rows are mostly padding and its few workgroups each walk the whole
/// reduction; the split direct kernel spreads that reduction over up to 64 invocations a
/// unit instead (MobileNetV3's squeeze-and-excitation convolutions on one pixel).
const COOP_MIN_PIXELS: usize = 16;
/// Small tiles only where wide ones would leave most of the device idle: fewer wide workgroups
/// than a third of its SMs (2 k invocations each: 44 workgroups on an H200). On the H200 the small
/// tile lost wherever the wide one had more (ResNet-50's 1x1 convolutions at 56x56: 173 against
/// 43 us; its 3x3 at 14x14: 88 against 77 us; `measurements/h200-2026-12-02-s14/run2`).
const COOP_SMALL_SM_DIVISOR: u64 = 3;
/// Large tiles where they make at least a third of the SMs' count of workgroups (44 on an H100
/// or H200). On an H100 (`measurements/h100-2026-12-05-s33/run3`) the large tile won from 49
/// workgroups up (ResNet-50's 1x1 convolutions at 28x28 to 512 channels, 104 of them: 28.9 ->
/// 10.9 us; its 3x3 at 56x56, 49: 33.2 -> 23.0; the OCR detector's 1x1 at 24x48 to 384, 108:
/// 41.4 -> 14.3) and lost at 32 and fewer (its 3x3 at 7x7, 8: 136 -> 164 us, where the small
/// tile takes 79).
const COOP_LARGE_SM_DIVISOR: u64 = 3;

/// The kernel that runs conv `p` over input shape `x` with `precision` activations. Dense
/// convolutions (groups 1) run as an implicit GEMM on cooperative matrices where the device
/// enabled them and activations are fp16. Elsewhere, the direct kernels split an output unit's
/// reduction over more invocations when the output is small and the reduction long
/// ([`conv_split_log2`]); the general grouped path never splits. Depends on the shapes and the
/// device only, so every run of a model picks the same kernels.
pub fn conv2d_kernel(
    device: &Device,
    x: &[usize],
    p: &Conv2dParams,
    precision: crate::layout::Precision,
) -> Result<ConvKernel> {
    let [n, o, oh, ow] = conv2d_output_shape(x, p)?;
    let c = x[1];
    let (icg, ocg) = (c / p.groups, p.out_channels / p.groups);
    let [kh, kw] = p.window.kernel;
    let depthwise = conv2d_is_depthwise(c, o, p.groups);
    let features = device.features();
    if features.cooperative_matrix_f16
        && precision == crate::layout::Precision::F16
        && p.groups == 1
        && !depthwise
        && o >= COOP_MIN_CHANNELS
        && n * oh * ow
            >= features
                .coop_conv_min_pixels
                .map_or(COOP_MIN_PIXELS, |p| p as usize)
        && kh * kw * icg.div_ceil(4) >= COOP_MIN_TEXELS
    {
        let groups = |tile: CoopTile| {
            let [tp, tc] = tile.pixels_channels();
            ((oh * ow) as u64).div_ceil(tp) * (o as u64).div_ceil(tc) * n as u64
        };
        let by_shape = coop_tile_by_shape(features.multiprocessors(), groups);
        // Where the small tile would take it for want of workgroups and its own reduction is
        // long (each subgroup at least COOP_SPLIT_MIN_SUBGROUP_STEPS steps), the wide one split
        // over reduction spans instead, if it splits: each staged texel serves twice the
        // products. On an H100 (session 38, runs 8 and 11) ResNet-50's 7x7 convolutions went
        // from 79.6 to 52.1 us (3x3, 512 channels) and from 47.4 to 29.6 (1x1 from 2048), while
        // DenseNet-121's 3x3 ones to 32 channels (two or three steps a subgroup on the small
        // tile) lost on the wide one split, 24.8 against 31.6 us.
        let k4 = kh * kw * icg.div_ceil(4);
        let small_steps = k4.div_ceil(CoopTile::Small.step_texels());
        let long = small_steps.div_ceil(COOP_SUBGROUPS) >= COOP_SPLIT_MIN_SUBGROUP_STEPS;
        let wide_spans = || {
            split_spans(
                &features,
                groups(CoopTile::Wide),
                k4.div_ceil(CoopTile::Wide.step_texels()),
            )
        };
        let by_shape = match by_shape {
            CoopTile::Small if long && wide_spans() > 1 => CoopTile::Wide,
            tile => tile,
        };
        let tile = features.coop_conv_tile.unwrap_or(by_shape);
        return Ok(ConvKernel::CoopGemm(tile));
    }
    let aligned = p.groups == 1 || (icg.is_multiple_of(4) && ocg.is_multiple_of(4));
    // A depthwise unit's reduction is its taps (one input texel each).
    if !aligned && !depthwise {
        return Ok(ConvKernel::Direct);
    }
    let units = (ow as u64).div_ceil(CONV_PX) * (oh * n * o.div_ceil(4)) as u64;
    let steps = (kh * kw * icg.div_ceil(4)) as u64;
    let target = features.concurrent_invocations / 2;
    Ok(match conv_split_log2(units, steps, target) {
        0 => ConvKernel::Direct,
        log2 => ConvKernel::Split { lanes: 1 << log2 },
    })
}

/// The tile an implicit GEMM takes on a device of `sms` multiprocessors, given the workgroups
/// each tile makes: the large tile 96 channels wide where 64-channel ones would be more than
/// the multiprocessors and 96-channel ones no more (one wave where there were two, the second
/// nearly empty), the large tile where it makes a third of their count, else the wide tile, or
/// the small one where wide ones would leave most of the device idle.
fn coop_tile_by_shape(sms: u64, groups: impl Fn(CoopTile) -> u64) -> CoopTile {
    let large = groups(CoopTile::Large);
    if large > sms && groups(CoopTile::LargeWide) <= sms {
        CoopTile::LargeWide
    } else if large * COOP_LARGE_SM_DIVISOR >= sms {
        CoopTile::Large
    } else if groups(CoopTile::Wide) * COOP_SMALL_SM_DIVISOR < sms {
        CoopTile::Small
    } else {
        CoopTile::Wide
    }
}

/// Groups must divide the input and output channel counts (errors name `kernel`).
pub(crate) fn check_groups(
    kernel: &str,
    in_channels: usize,
    groups: usize,
    out_channels: usize,
) -> Result<()> {
    let (c, g) = (in_channels, groups);
    if g == 0 || !c.is_multiple_of(g) || !out_channels.is_multiple_of(g) || out_channels == 0 {
        return Err(kerr(
            kernel,
            format!("groups {g} must divide input channels {c} and output channels {out_channels}"),
        ));
    }
    Ok(())
}

/// The push-constant block of every convolution kernel (`include/conv_push.glsl`):
/// both tensors, the window, channels per group `[in, out]`, the weights' texel offsets, and
/// the fused activation with the shader's `flags` bits; the words after them (the split
/// kernels' lanes or spans, the partials' and the input scale's folds) zero.
pub(crate) fn conv_push_constants(
    x: &Tensor,
    out: &Tensor,
    window: &Window2d,
    [icg, ocg]: [usize; 2],
    weights: ConvWeights,
    activation: UnaryOp,
    flags: u32,
) -> PushConstants {
    let (act, alpha, beta) = activation.code();
    let w = window.words();
    PushConstants::new()
        .tensor(x.desc())
        .tensor(out.desc())
        .u32(w[0])
        .u32(w[1])
        .u32(w[2])
        .u32(w[3])
        .u32(icg as u32)
        .u32(ocg as u32)
        .u32(weights.filter)
        .u32(weights.bias.unwrap_or(NO_BIAS))
        .u32(act | flags)
        .f32(alpha)
        .f32(beta)
        .pad_to(CONV_PUSH_BYTES as usize / 4)
}

/// Allocates the output and records the conv.
pub fn conv2d(
    rec: &mut Recorder,
    x: &Tensor,
    weights: ConvWeights,
    p: &Conv2dParams,
    name: &str,
) -> Result<Tensor> {
    let shape = conv2d_output_shape(x.shape(), p)?;
    let out = Tensor::new(rec.device(), name, &shape, x.precision())?;
    conv2d_into(rec, x, weights, p, &out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Workgroups of each tile over `pixels` x `channels`.
    fn groups(pixels: u64, channels: u64) -> impl Fn(CoopTile) -> u64 {
        move |t: CoopTile| {
            let [tp, tc] = t.pixels_channels();
            pixels.div_ceil(tp) * channels.div_ceil(tc)
        }
    }

    #[test]
    fn tiles_by_shape_fill_the_first_wave() {
        // 132 multiprocessors (an H100 or H200). The Whisper-tiny encoder's second convolution,
        // 1500 pixels x 384 channels: 144 large tiles, 96 of 96 channels.
        assert_eq!(
            coop_tile_by_shape(132, groups(1500, 384)),
            CoopTile::LargeWide
        );
        // Its first, 3000 pixels: 282 large tiles, 188 wide ones, two waves either way.
        assert_eq!(coop_tile_by_shape(132, groups(3000, 384)), CoopTile::Large);
        // ResNet-50's 1x1 convolutions at 28x28 to 512 channels: 104 large tiles.
        assert_eq!(coop_tile_by_shape(132, groups(784, 512)), CoopTile::Large);
        // Its 3x3 at 7x7 (8 large tiles, 26 wide): small; at 14x14 to 256 (16, 49): wide.
        assert_eq!(coop_tile_by_shape(132, groups(49, 512)), CoopTile::Small);
        assert_eq!(coop_tile_by_shape(132, groups(196, 256)), CoopTile::Wide);
    }

    #[test]
    fn short_reductions_split_where_their_workgroups_are_few() {
        // DenseNet-121's 3x3 convolutions from 128 channels to 32 (18 small-tile steps): 26
        // workgroups at 14x14 and 8 at 7x7 take four spans; its 1x1 ones at 14x14 (104) none.
        assert_eq!(short_split_spans(132, 26, 18), 4);
        assert_eq!(short_split_spans(132, 8, 18), 4);
        assert_eq!(short_split_spans(132, 104, 16), 1);
        // Spans keep four steps each, dealt out evenly.
        assert_eq!(short_split_spans(132, 8, 9), 2);
        assert_eq!(short_split_spans(132, 8, 6), 1);
    }
}
