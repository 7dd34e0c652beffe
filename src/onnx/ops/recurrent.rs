//! Recurrent converters: LSTM (forward, layout 0, default activations, no sequence_lens).
use super::R;
use crate::ir::Op;
use crate::onnx::attrs::Attrs;
use crate::onnx::import::{Ctx, NodeRef};

pub(super) fn lstm(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let a = Attrs(n.proto);
    if a.string_or("direction", "forward") != "forward"
        || a.int_or("layout", 0) != 0
        || a.has("clip")
        || a.int_or("input_forget", 0) != 0
    {
        return Err(ctx.output_err(
            n,
            "only forward LSTM with layout 0, no clip, no input_forget is supported",
        ));
    }
    if let Some(acts) = a.strings("activations") {
        if acts != ["Sigmoid", "Tanh", "Tanh"] {
            return Err(ctx.output_err(n, format!("LSTM activations {acts:?} are not supported")));
        }
    }
    let hidden = a
        .int("hidden_size")
        .filter(|&h| h > 0)
        .ok_or_else(|| ctx.output_err(n, "missing hidden_size"))? as usize;
    if ctx.input(n, 4)?.is_some() {
        return Err(ctx.output_err(n, "LSTM sequence_lens is not supported"));
    }
    let x = ctx.need_input(n, 0)?;
    let isz = ctx.shape(x).get(2).copied().unwrap_or(0);
    for (i, what, want) in [
        (1, "W", vec![1, 4 * hidden, isz]),
        (2, "R", vec![1, 4 * hidden, hidden]),
        (3, "B", vec![1, 8 * hidden]),
    ] {
        // W and R are required; B is optional.
        if i < 3 || ctx.input(n, i)?.is_some() {
            let t = ctx
                .const_input(n, i, what)?
                .ok_or_else(|| ctx.node_err(n, what, "missing LSTM weight"))?;
            if t.shape != want {
                let msg = format!("LSTM {what} has shape {:?}, expected {want:?}", t.shape);
                return Err(ctx.node_err(n, what, msg));
            }
        }
    }
    let ins = (0..7).map(|i| ctx.input(n, i)).collect::<R<Vec<_>>>()?;
    ctx.emit(
        n,
        Op::Lstm {
            hidden_size: hidden,
        },
        ins,
    )?;
    Ok(())
}
