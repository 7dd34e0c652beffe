// Body of conv2d.comp and conv2d_plain.comp.
// 2D convolution (groups, stride, dilation, asymmetric pads) with fused bias + activation, and
// optionally an addend of the output's shape summed before the activation (a convolution split
// into partial sums; the addend may be the output image itself: each invocation reads its own
// output texels' addend before writing them), and optionally a factor per input channel
// (include/conv_input_scale.glsl).
// One invocation computes one output C4 texel (4 output channels) at PX consecutive output
// pixels of a row, so every weight texel fetched is reused PX times and every input texel 4 times.
// All invocations of a workgroup share the output layer (gl_GlobalInvocationID.z), so they fetch
// the same weight texels: broadcast reads through the atlas.
// Filter: vk_backend::layout::pack_conv_filter, texel ((o*KH + ky)*KW + kx)*ceil(icg/4) + i/4.
// Two paths: "aligned" (groups == 1, or icg and ocg multiples of 4: an output texel lies in one
// group and its input channels start on a texel boundary) does vec4 x mat4 per input texel; the
// general grouped path gathers scalars per output lane.
// Entries: conv2d.comp reads each filter texel through fetch_weight; conv2d_plain.comp
// (PLAIN_WEIGHT_ROWS) where the recorder found every filter row in at most two pages, with no
// compensated texel (vk_backend::Recorder::weight_rows_plain), through the row's pages found
// once (weight_run).
#ifndef TEXSTREAM_CONV2D_BODY_GLSL
#define TEXSTREAM_CONV2D_BODY_GLSL
#include "tensor.glsl"
#include "weights.glsl"
#include "activation.glsl"

#define PX 4
layout(local_size_x = 8, local_size_y = 8, local_size_z = 1) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);
TENSOR_IN(2, img_add);

#include "conv_push.glsl"
#include "conv_filter_rows.glsl"
#include "conv_epilogue.glsl"
#include "conv_units.glsl"
#include "conv_input_scale.glsl"

void main() {
    uint layer, oy, ox0;
    if (!conv_unit(layer, oy, ox0)) return;
    uint n = layer / pc.out_t.c4;
    uint oc4 = layer % pc.out_t.c4;
    CONV_WINDOW_LOCALS();
    int H = int(pc.in_t.h), W = int(pc.in_t.w);
    uint icg4 = (pc.icg + 3u) / 4u;
    uint o0 = oc4 * 4u;

    int ix0[PX];
    for (int p = 0; p < PX; ++p) ix0[p] = int((ox0 + uint(p)) * sw) - pl;
    int iy0 = int(oy * sh) - pt;

    vec4 acc[PX];
    for (int p = 0; p < PX; ++p) acc[p] = vec4(0.0);

    if ((pc.act & 0x100u) == 0u) {
        CONV_FILTER_ROWS(n, o0, kh * kw * icg4);
        for (uint ky = 0u; ky < kh; ++ky) {
            int iy = iy0 + int(ky * dh);
            if (iy < 0 || iy >= H) continue;
            for (uint kx = 0u; kx < kw; ++kx) {
                bool ok[PX];
                uint xi[PX];
                for (int p = 0; p < PX; ++p) {
                    int ix = ix0[p] + int(kx * dw);
                    ok[p] = ix >= 0 && ix < W;
                    xi[p] = uint(max(ix, 0));
                }
                uint tap = (ky * kw + kx) * icg4;
                for (uint i4 = 0u; i4 < icg4; ++i4) {
                    uint t = tap + i4;
                    mat4 wm = mat4(FILTER_TEXEL(0, t), FILTER_TEXEL(1, t), FILTER_TEXEL(2, t), FILTER_TEXEL(3, t));
                    if (conv_input_scaled()) wm = conv_scaled_filter(wm, in_layer0 + i4);
                    // By coordinates (LOAD_AT): no fold's divisions a load where the input is
                    // unfolded (llvmpipe divides lane by lane).
                    for (int p = 0; p < PX; ++p) {
                        if (ok[p]) acc[p] += LOAD_AT(img_in, pc.in_t, in_layer0 + i4, uint(iy), xi[p]) * wm;
                    }
                }
            }
        }
    } else {
        for (uint j = 0u; j < 4u; ++j) {
            uint o = o0 + j;
            if (o >= pc.out_t.c) break;
            uint g = o / pc.ocg;
            for (uint ky = 0u; ky < kh; ++ky) {
                int iy = iy0 + int(ky * dh);
                if (iy < 0 || iy >= H) continue;
                for (uint kx = 0u; kx < kw; ++kx) {
                    uint wrow = pc.w_off + ((o * kh + ky) * kw + kx) * icg4;
                    for (int p = 0; p < PX; ++p) {
                        int ix = ix0[p] + int(kx * dw);
                        if (ix < 0 || ix >= W) continue;
                        float s = 0.0;
                        for (uint i = 0u; i < pc.icg; ++i) {
                            uint c = g * pc.icg + i;
                            float xv = LOAD_AT(img_in, pc.in_t, n * pc.in_t.c4 + c / 4u, uint(iy), uint(ix))[c % 4u];
                            s += xv * fetch_weight(wrow + i / 4u)[i % 4u];
                        }
                        acc[p][j] += s;
                    }
                }
            }
        }
    }

    store_conv_unit(layer, oc4, oy, ox0, acc);
}

#endif
