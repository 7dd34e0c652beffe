// Body of conv2d_dw.comp and conv2d_dw_plain.comp.
// Depthwise 2D convolution (groups == C_in == C_out) with fused bias + activation: channels stay
// in their texel lane, so the tap is a vec4 product. One invocation: one C4 texel at PX pixels.
// Filter: vk_backend::layout::pack_depthwise_filter, texel (ky*KW + kx)*ceil(C/4) + c/4.
// Push constants are the conv2d block (icg/ocg unused).
// Entries: conv2d_dw.comp reads each filter texel through fetch_weight; conv2d_dw_plain.comp
// (PLAIN_WEIGHT_ROWS) where the recorder found the whole filter in at most two pages with no
// compensated texel, through its pages found once (weight_run; see include/conv2d_body.glsl).
#ifndef TEXSTREAM_CONV2D_DW_BODY_GLSL
#define TEXSTREAM_CONV2D_DW_BODY_GLSL
#include "tensor.glsl"
#include "weights.glsl"
#include "activation.glsl"

#define PX 4
layout(local_size_x = 8, local_size_y = 8, local_size_z = 1) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);

#include "conv_push.glsl"
#include "conv_units.glsl"

void main() {
    uint layer, oy, ox0;
    if (!conv_unit(layer, oy, ox0)) return;
    uint c4 = pc.out_t.c4;
    uint oc4 = layer % c4;
    CONV_WINDOW_LOCALS();
    int H = int(pc.in_t.h), W = int(pc.in_t.w);

    int ix0[PX];
    for (int p = 0; p < PX; ++p) ix0[p] = int((ox0 + uint(p)) * sw) - pl;
    int iy0 = int(oy * sh) - pt;
    vec4 acc[PX];
    for (int p = 0; p < PX; ++p) acc[p] = vec4(0.0);

#ifdef PLAIN_WEIGHT_ROWS
    WeightRun filter_run = weight_run(pc.w_off);
#define FILTER_TAP(t) fetch_run(filter_run, (t) * c4 + oc4)
#else
#define FILTER_TAP(t) fetch_weight(pc.w_off + (t) * c4 + oc4)
#endif
    for (uint ky = 0u; ky < kh; ++ky) {
        int iy = iy0 + int(ky * dh);
        if (iy < 0 || iy >= H) continue;
        for (uint kx = 0u; kx < kw; ++kx) {
            vec4 w = FILTER_TAP(ky * kw + kx);
            for (int p = 0; p < PX; ++p) {
                int ix = ix0[p] + int(kx * dw);
                if (ix >= 0 && ix < W) acc[p] += LOAD_AT(img_in, pc.in_t, layer, uint(iy), uint(ix)) * w;
            }
        }
    }

    vec4 bias = pc.b_off == 0xFFFFFFFFu ? vec4(0.0) : fetch_weight(pc.b_off + oc4);
    uint act = pc.act & 0xFFu;
    uint orow_out = texel_index(pc.out_t, layer, oy, 0u);
    for (int p = 0; p < PX; ++p) {
        uint ox = ox0 + uint(p);
        if (ox >= pc.out_t.w) break;
        vec4 v = apply_unary(act, pc.alpha, pc.beta, acc[p] + bias);
        STORE_TEXEL(img_out, pc.out_t, orow_out + ox, zero_padding(pc.out_t, oc4, v));
    }
}

#endif
