#version 450
// Depthwise 2D convolution for outputs too small to fill the GPU: SPLIT invocations (a power of
// two up to 64, from the push constants) share one output unit of conv2d_dw.comp (one C4 texel at
// PX consecutive pixels of a row) and split its taps between them; partial sums meet in shared
// memory. conv2d_dw.comp walks every tap of a unit in one invocation, each a chain of page-table,
// weight and input reads: on a large GPU a 14x14 MobileNet stage has a few thousand such chains.
// Same bindings, push constants (the last word carries log2 SPLIT), filter packing
// (vk_backend::layout::pack_depthwise_filter), fused bias and activation as conv2d_dw.comp.
#include "tensor.glsl"
#include "weights.glsl"
#include "activation.glsl"

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);

#include "conv_push.glsl"

#include "conv_splitk.glsl"

void main() {
    SplitUnit u = split_unit(pc.out_t, pc.split_log2);
    uint layer = u.layer, ox0 = u.ox0, oy = u.oy, klane = u.klane, split = u.split;
    bool live = u.live;
    uint c4 = pc.out_t.c4;
    uint oc4 = layer % c4;

    vec4 acc[PX];
    for (int p = 0; p < PX; ++p) acc[p] = vec4(0.0);
    if (live) {
        CONV_WINDOW_LOCALS();
        int H = int(pc.in_t.h), W = int(pc.in_t.w);
        int ix0[PX];
        for (int p = 0; p < PX; ++p) ix0[p] = int((ox0 + uint(p)) * sw) - pl;
        int iy0 = int(oy * sh) - pt;
        for (uint tap = klane; tap < kh * kw; tap += split) {
            uint ky = tap / kw, kx = tap - ky * kw;
            int iy = iy0 + int(ky * dh);
            if (iy < 0 || iy >= H) continue;
            vec4 w = fetch_weight(pc.w_off + tap * c4 + oc4);
            for (int p = 0; p < PX; ++p) {
                int ix = ix0[p] + int(kx * dw);
                if (ix >= 0 && ix < W) acc[p] += LOAD_AT(img_in, pc.in_t, layer, uint(iy), uint(ix)) * w;
            }
        }
    }

    reduce_partials(u, acc);
    if (!live || klane != 0u) return;

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
