// Body of conv2d_splitk.comp and conv2d_splitk_plain.comp.
// 2D convolution for outputs too small to fill the GPU: SPLIT invocations (a power of two up to
// 64, from the push constants) share one output unit of conv2d.comp (4 output channels at PX
// consecutive pixels of a row) and split its reduction over (ky, kx, input texel) between them;
// their partial sums meet in shared memory. conv2d.comp gives a unit one invocation, which walks
// every tap in a chain of page-table, weight and input reads: on a large GPU a 7x7 output (1792
// invocations of 1152 taps each) leaves nearly every core waiting on memory.
// Same bindings, push constants (the last word carries log2 SPLIT), filter packing, fused bias,
// activation and addend as conv2d.comp; aligned path only (groups == 1, or icg and ocg multiples
// of 4). Lanes of one unit are adjacent, so at a given step they read adjacent weight texels.
// Entries: conv2d_splitk.comp reads each filter texel through fetch_weight; with
// PLAIN_WEIGHT_ROWS (conv2d_splitk_plain.comp) each filter row through its pages found once, as
// include/conv2d_body.glsl.
#ifndef TEXSTREAM_CONV2D_SPLITK_BODY_GLSL
#define TEXSTREAM_CONV2D_SPLITK_BODY_GLSL
#extension GL_EXT_control_flow_attributes : require
#include "tensor.glsl"
#include "weights.glsl"
#include "activation.glsl"

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);
TENSOR_IN(2, img_add);

#include "conv_push.glsl"
#include "conv_filter_rows.glsl"
#include "conv_input_scale.glsl"

#include "conv_splitk.glsl"
#include "conv_epilogue.glsl"

// Steps of a 1x1 filter's reduction a lane has in flight at once.
#define STEPS_IN_FLIGHT 4u

void main() {
    SplitUnit u = split_unit(pc.out_t, pc.split_log2);
    uint layer = u.layer, ox0 = u.ox0, oy = u.oy, klane = u.klane, split = u.split;
    bool live = u.live;

    vec4 acc[PX];
    for (int p = 0; p < PX; ++p) acc[p] = vec4(0.0);

    uint n = layer / pc.out_t.c4;
    uint oc4 = layer % pc.out_t.c4;
    if (live) {
        CONV_WINDOW_LOCALS();
        int H = int(pc.in_t.h), W = int(pc.in_t.w);
        uint icg4 = (pc.icg + 3u) / 4u;
        uint o0 = oc4 * 4u;
        int ix0[PX];
        for (int p = 0; p < PX; ++p) ix0[p] = int((ox0 + uint(p)) * sw) - pl;
        int iy0 = int(oy * sh) - pt;
        CONV_FILTER_ROWS(n, o0, kh * kw * icg4);
        uint taps = kh * kw;
        // This lane's steps: flat index tap * icg4 + i4 = klane, klane + split, ...
        uint tap = 0u, i4 = klane;
        while (i4 >= icg4) { i4 -= icg4; ++tap; }
        if (taps == 1u && iy0 >= 0 && iy0 < H) {
            // A 1x1 filter: the steps are input texels alone, independent of each other. Each
            // round issues STEPS_IN_FLIGHT steps' page-table reads, then their weight and input
            // loads, before any is used: a squeeze-and-excitation convolution (one pixel, 60 to
            // 240 input texels over up to 64 lanes) otherwise waits on each step's chain of
            // reads in turn.
            bool okx[PX];
            for (int p = 0; p < PX; ++p) okx[p] = ix0[p] >= 0 && ix0[p] < W;
            for (uint b = i4; b < icg4; b += STEPS_IN_FLIGHT * split) {
#ifdef PLAIN_WEIGHT_ROWS
                vec4 wt[4u * STEPS_IN_FLIGHT];
                [[unroll]] for (uint s = 0u; s < STEPS_IN_FLIGHT; s++) {
                    uint t = min(b + s * split, icg4 - 1u);
                    [[unroll]] for (uint j = 0u; j < 4u; j++) wt[4u * s + j] = fetch_run(wr[j], t);
                }
#define STEP_WEIGHT(k) wt[k]
#else
                WeightLoc wl[4u * STEPS_IN_FLIGHT];
                [[unroll]] for (uint s = 0u; s < STEPS_IN_FLIGHT; s++) {
                    uvec4 t = wbase + min(b + s * split, icg4 - 1u);
                    [[unroll]] for (uint j = 0u; j < 4u; j++) wl[4u * s + j] = weight_locate(t[j]);
                }
                vec4 raw[4u * STEPS_IN_FLIGHT];
                [[unroll]] for (uint k = 0u; k < 4u * STEPS_IN_FLIGHT; k++) raw[k] = imageLoad(weight_atlas, wl[k].at);
#define STEP_WEIGHT(k) weight_finish(wl[k], raw[k])
#endif
                vec4 xs[STEPS_IN_FLIGHT * PX];
                [[unroll]] for (uint s = 0u; s < STEPS_IN_FLIGHT; s++) {
                    uint si = min(b + s * split, icg4 - 1u);
                    for (int p = 0; p < PX; ++p) {
                        xs[s * PX + uint(p)] = okx[p] ? LOAD_AT(img_in, pc.in_t, in_layer0 + si, uint(iy0), uint(ix0[p])) : vec4(0.0);
                    }
                    if (conv_input_scaled()) {
                        vec4 f = conv_input_scale(in_layer0 + si);
                        for (int p = 0; p < PX; ++p) xs[s * PX + uint(p)] *= f;
                    }
                }
                [[unroll]] for (uint s = 0u; s < STEPS_IN_FLIGHT; s++) {
                    if (b + s * split < icg4) {
                        mat4 wm = mat4(STEP_WEIGHT(4u * s), STEP_WEIGHT(4u * s + 1u), STEP_WEIGHT(4u * s + 2u), STEP_WEIGHT(4u * s + 3u));
                        for (int p = 0; p < PX; ++p) acc[p] += xs[s * PX + uint(p)] * wm;
                    }
                }
            }
            tap = taps;
        }
        while (tap < taps) {
            uint ky = tap / kw, kx = tap - ky * kw;
            int iy = iy0 + int(ky * dh);
            if (iy >= 0 && iy < H) {
                uint t = tap * icg4 + i4;
                mat4 wm = mat4(FILTER_TEXEL(0, t), FILTER_TEXEL(1, t), FILTER_TEXEL(2, t), FILTER_TEXEL(3, t));
                if (conv_input_scaled()) wm = conv_scaled_filter(wm, in_layer0 + i4);
                for (int p = 0; p < PX; ++p) {
                    int ix = ix0[p] + int(kx * dw);
                    if (ix >= 0 && ix < W) acc[p] += LOAD_AT(img_in, pc.in_t, in_layer0 + i4, uint(iy), uint(ix)) * wm;
                }
            }
            i4 += split;
            while (i4 >= icg4) { i4 -= icg4; ++tap; }
        }
    }

    reduce_partials(u, acc);
    if (!live || klane != 0u) return;

    store_conv_unit(layer, oc4, oy, ox0, acc);
}

#endif
