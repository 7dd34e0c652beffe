//! ONNX LSTM (forward direction, layout 0, gates i,o,f,c, activations sigmoid/tanh/tanh, no
//! peepholes, no sequence_lens, no clip): one `lstm.comp` dispatch per time step.
//!
//! Shapes: X `[T, B, I]`, initial_h / initial_c `[1, B, H]`, Y `[T, 1, B, H]`, Y_h / Y_c
//! `[1, B, H]` (leading 1s may be dropped: shapes are compared after the rank rule's
//! right-alignment). W and R are constants in the weight space, each a `[K, 4H]` matrix packed by
//! [`crate::layout::pack_matrix_kn`] (ONNX's `W[0]` `[4H, I]` transposed to `[I, 4H]`, `R[0]`
//! `[4H, H]` to `[H, 4H]`); the bias is ONNX's `Wb + Rb` (`[4H]`) packed by
//! [`crate::layout::pack_vector`]. Step t reads H[t-1] back from Y and C[t-1] from Y_c, so the
//! recurrent state lives in the output images; outputs the caller does not want are scratch
//! tensors allocated here (kept alive by the recorder).

use crate::error::{Result, VkError};
use crate::kernels::push::PushConstants;
use crate::layout::dims6;
use crate::memory::MemoryCategory;
use crate::pipeline::{BindingKind, KernelDesc};
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const LSTM: KernelDesc = KernelDesc {
    name: "lstm",
    bindings: &[BindingKind::StorageImage; 6],
    push_constant_bytes: 128,
    uses_weights: true,
};

/// Hidden units per workgroup (`HX` in `lstm.comp`).
const HX: usize = 32;

/// Where an LSTM's constants live in the weight space (texel offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LstmWeights {
    /// W as `[I, 4H]` (packed by `pack_matrix_kn`).
    pub w_offset: u32,
    /// R as `[H, 4H]` (packed by `pack_matrix_kn`).
    pub r_offset: u32,
    /// `Wb + Rb` as `[4H]` (packed by `pack_vector`); `None` = zero bias.
    pub bias_offset: Option<u32>,
}

/// The three LSTM outputs; `None` ones are computed into internal scratch tensors.
#[derive(Debug, Clone, Copy, Default)]
pub struct LstmOutputs<'a> {
    /// Y `[T, 1, B, H]`.
    pub y: Option<&'a Tensor>,
    /// Y_h `[1, B, H]`.
    pub y_h: Option<&'a Tensor>,
    /// Y_c `[1, B, H]`.
    pub y_c: Option<&'a Tensor>,
}

fn err(reason: String) -> VkError {
    VkError::Kernel {
        kernel: "lstm".into(),
        reason,
    }
}

/// `(T, B, I)` of X `[T, B, I]`.
fn x_dims(x: &Tensor) -> Result<(usize, usize, usize)> {
    let d = dims6(x.shape())?;
    if d[0] * d[1] * d[2] != 1 || x.shape().len() > 3 {
        return Err(err(format!(
            "X `{}` has shape {:?}; expected [T, B, I]",
            x.name(),
            x.shape()
        )));
    }
    Ok((d[3], d[4], d[5]))
}

/// Output shapes `(Y [T, 1, B, H], Y_h [1, B, H], Y_c [1, B, H])` for X of shape `[T, B, I]`.
pub fn lstm_output_shapes(
    x_shape: &[usize],
    hidden_size: usize,
) -> Result<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    let d = dims6(x_shape)?;
    if d[0] * d[1] * d[2] != 1 || x_shape.len() > 3 {
        return Err(err(format!("X shape {x_shape:?} is not [T, B, I]")));
    }
    let (t, b) = (d[3], d[4]);
    Ok((
        vec![t, 1, b, hidden_size],
        vec![1, b, hidden_size],
        vec![1, b, hidden_size],
    ))
}

fn check_shape(what: &str, t: &Tensor, want: &[usize]) -> Result<()> {
    if dims6(t.shape())? != dims6(want)? {
        return Err(err(format!(
            "{what} `{}` has shape {:?}, expected {want:?}",
            t.name(),
            t.shape()
        )));
    }
    Ok(())
}

/// Records an ONNX LSTM over the whole sequence: T dispatches (the recorder puts a barrier
/// between steps). Needs `rec.use_weights(..)` first. `initial_h` / `initial_c` absent = zeros.
pub fn lstm_into(
    rec: &mut Recorder,
    x: &Tensor,
    weights: LstmWeights,
    hidden_size: usize,
    initial_h: Option<&Tensor>,
    initial_c: Option<&Tensor>,
    out: LstmOutputs<'_>,
) -> Result<()> {
    let (t_len, batch, input) = x_dims(x)?;
    if t_len == 0 || batch == 0 || input == 0 || hidden_size == 0 {
        return Err(err(format!(
            "empty LSTM: X `{}` {:?}, hidden_size {hidden_size}",
            x.name(),
            x.shape()
        )));
    }
    let (y_shape, s_shape, _) = lstm_output_shapes(x.shape(), hidden_size)?;
    let u32_of = |v: usize, what: &str| {
        u32::try_from(v).map_err(|_| err(format!("{what} = {v} does not fit 32 bits")))
    };
    // Weight texel indices must stay in u32 (fetch_weight's index type).
    let n4 = 4 * hidden_size;
    u32_of(
        input.div_ceil(4) * n4 + hidden_size.div_ceil(4) * n4,
        "weight texels",
    )?;
    let groups_x = u32_of(hidden_size.div_ceil(HX), "hidden workgroups")?;
    let groups_y = u32_of(batch, "batch")?;
    let limits = rec
        .device()
        .properties()
        .limits
        .max_compute_work_group_count;
    if groups_x > limits[0] || groups_y > limits[1] {
        return Err(err(format!(
            "hidden_size {hidden_size} x batch {batch} needs [{groups_x}, {groups_y}] \
             workgroups, the device allows {limits:?}"
        )));
    }

    if let Some(h0) = initial_h {
        check_shape("initial_h", h0, &s_shape)?;
    }
    if let Some(c0) = initial_c {
        check_shape("initial_c", c0, &s_shape)?;
    }
    let scratch = |name: &str, shape: &[usize]| {
        Tensor::with_storage(
            rec.device(),
            &format!("{} {name} (lstm scratch)", x.name()),
            shape,
            x.precision(),
            MemoryCategory::Activations,
            x.storage_kind(),
        )
    };
    // Outputs the caller does not want still need a tensor to write (the shader writes all).
    let given_or_scratch = |name: &str, given: Option<&Tensor>, shape: &[usize]| match given {
        Some(t) => check_shape(name, t, shape).map(|()| t.clone()),
        None => scratch(name, shape),
    };
    let y = &given_or_scratch("Y", out.y, &y_shape)?;
    let y_h = &given_or_scratch("Y_h", out.y_h, &s_shape)?;
    let y_c = &given_or_scratch("Y_c", out.y_c, &s_shape)?;
    // State tensors share logical dims; each keeps its own fold (views over larger images).
    let fold = |t: &Tensor| {
        let d = t.desc();
        (d.pw, d.ph)
    };
    let (h0_f, c0_f) = (
        initial_h.map(fold).unwrap_or((1, 1)),
        initial_c.map(fold).unwrap_or((1, 1)),
    );
    let (yh_f, yc_f) = (fold(y_h), fold(y_c));

    let mut flags = 0u32;
    if initial_h.is_some() {
        flags |= 1;
    }
    if initial_c.is_some() {
        flags |= 2;
    }
    if weights.bias_offset.is_some() {
        flags |= 4;
    }
    let pipeline = rec.device().pipeline(&LSTM, x.precision())?;
    // Absent initial states bind X in their slot; the shader never reads it (flags).
    let h0 = initial_h.unwrap_or(x);
    let c0 = initial_c.unwrap_or(x);
    for step in 0..t_len {
        let pc = PushConstants::new()
            .tensor(x.desc())
            .tensor(y.desc())
            .u32(h0_f.0)
            .u32(h0_f.1)
            .u32(c0_f.0)
            .u32(c0_f.1)
            .u32(yh_f.0)
            .u32(yh_f.1)
            .u32(yc_f.0)
            .u32(yc_f.1)
            .u32(weights.w_offset)
            .u32(weights.r_offset)
            .u32(weights.bias_offset.unwrap_or(0))
            .u32(step as u32)
            .u32(flags)
            .pad_to(32);
        rec.dispatch(
            &pipeline,
            &[
                Arg::input(x),
                Arg::input(h0),
                Arg::input(c0),
                Arg::inout(y),
                Arg::inout(y_c),
                Arg::output(y_h),
            ],
            &pc.bytes(),
            [groups_x, groups_y, 1],
        )?;
    }
    Ok(())
}

/// Allocates Y, Y_h, Y_c (named `{name}.y`, `{name}.y_h`, `{name}.y_c`, precision of X) and
/// records the LSTM.
pub fn lstm(
    rec: &mut Recorder,
    x: &Tensor,
    weights: LstmWeights,
    hidden_size: usize,
    initial_h: Option<&Tensor>,
    initial_c: Option<&Tensor>,
    name: &str,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (ys, hs, cs) = lstm_output_shapes(x.shape(), hidden_size)?;
    let y = Tensor::new(rec.device(), &format!("{name}.y"), &ys, x.precision())?;
    let y_h = Tensor::new(rec.device(), &format!("{name}.y_h"), &hs, x.precision())?;
    let y_c = Tensor::new(rec.device(), &format!("{name}.y_c"), &cs, x.precision())?;
    lstm_into(
        rec,
        x,
        weights,
        hidden_size,
        initial_h,
        initial_c,
        LstmOutputs {
            y: Some(&y),
            y_h: Some(&y_h),
            y_c: Some(&y_c),
        },
    )?;
    Ok((y, y_h, y_c))
}
