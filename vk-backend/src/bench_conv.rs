//! Conv2d cases for the kernel benchmark (`texstream bench kernels`): dense 3x3, strided 3x3,
//! pointwise and depthwise convs with fused bias + activation, filters read through a weight atlas
//! that is built on first use from the recording device.

use std::cell::OnceCell;
use std::rc::Rc;

use crate::atlas::WeightAtlas;
use crate::bench::Case;
use crate::error::Result;
use crate::kernels::{
    conv2d_into, conv2d_is_depthwise, conv2d_output_shape, Conv2dParams, ConvWeights, UnaryOp,
    Window2d,
};
use crate::layout::{pack_conv_filter, pack_depthwise_filter, pack_vector};
use crate::testing::Rng;

/// One conv case: input `[N, C, H, W]`, output channels, kernel, stride, groups.
fn case(x: [usize; 4], o: usize, k: usize, stride: usize, groups: usize) -> Result<Case> {
    let params = Conv2dParams {
        window: Window2d {
            kernel: [k, k],
            strides: [stride, stride],
            dilations: [1, 1],
            pads: [k / 2; 4],
        },
        groups,
        out_channels: o,
        activation: UnaryOp::Relu,
    };
    let out = conv2d_output_shape(&x, &params)?;
    let icg = x[1] / groups;
    let flops = 2.0 * (out.iter().product::<usize>() * icg * k * k) as f64;
    let depthwise = conv2d_is_depthwise(x[1], o, groups);
    let mut rng = Rng::new(0xC0);
    let w = rng.vec(o * icg * k * k, -0.1, 0.1);
    let b = rng.vec(o, -0.1, 0.1);
    let mut space = if depthwise {
        pack_depthwise_filter(&w, o, k, k)?
    } else {
        pack_conv_filter(&w, o, icg, k, k)?
    };
    let bias = (space.len() / 4) as u32;
    space.extend(pack_vector(&b));
    let weights = ConvWeights {
        filter: 0,
        bias: Some(bias),
    };
    let atlas: Rc<OnceCell<WeightAtlas>> = Rc::new(OnceCell::new());
    let kind = if depthwise { "depthwise" } else { "conv" };
    let shape = format!("{kind} {k}x{k}/s{stride} {x:?} -> {out:?}");
    Ok(Case::new(
        "conv2d",
        shape,
        vec![x.to_vec()],
        out.to_vec(),
        flops,
        move |rec, inputs, y| {
            let a = crate::bench::lazy_atlas(&atlas, rec, y.precision(), || Ok(space.clone()))?;
            rec.use_weights(a);
            conv2d_into(rec, &inputs[0], weights, &params, y)
        },
    ))
}

/// The conv2d cases (small sizes when `quick`). A case whose construction fails is left out
/// with its error so the caller can report it.
pub fn conv2d_cases(quick: bool) -> Vec<std::result::Result<Case, (String, String)>> {
    let specs: Vec<([usize; 4], usize, usize, usize, usize)> = if quick {
        vec![
            ([1, 32, 32, 32], 32, 3, 1, 1),
            ([1, 64, 32, 32], 64, 1, 1, 1),
            ([1, 64, 32, 32], 64, 3, 1, 64),
        ]
    } else {
        vec![
            ([1, 64, 112, 112], 64, 3, 1, 1),
            ([1, 256, 56, 56], 256, 1, 1, 1),
            ([1, 32, 320, 320], 64, 3, 2, 1),
            ([1, 128, 160, 160], 128, 3, 1, 128),
            ([1, 64, 256, 256], 64, 3, 1, 1),
        ]
    };
    specs
        .into_iter()
        .map(|(x, o, k, s, g)| {
            case(x, o, k, s, g).map_err(|e| (format!("conv2d {x:?} k{k} s{s} g{g}"), e.to_string()))
        })
        .collect()
}
