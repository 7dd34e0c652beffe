// Body of conv_transpose2d.comp and conv_transpose2d_plain.comp.
// ConvTranspose2d (groups, stride, pads, dilation; output_padding only changes the output size)
// with fused bias + activation, in gather form: output (oy, ox) takes input (iy, ix) through tap
// (ky, kx) when oy = iy*sh - pt + ky*dh (same for x). One invocation: one output C4 texel at one
// pixel; a workgroup shares the output layer so weight fetches are uniform.
// Filter: vk_backend::layout::pack_conv_transpose_filter (conv filter layout of the gather form),
// one row an output channel as conv2d.comp's, addressed the same way (include/conv_filter_rows.glsl):
// the aligned path reads the rows through fetch_weight, or in conv_transpose2d_plain.comp
// (PLAIN_WEIGHT_ROWS) through their pages found once, as conv2d_plain.comp does.
#ifndef TEXSTREAM_CONV_TRANSPOSE2D_BODY_GLSL
#define TEXSTREAM_CONV_TRANSPOSE2D_BODY_GLSL
#include "tensor.glsl"
#include "weights.glsl"
#include "activation.glsl"

layout(local_size_x = 8, local_size_y = 8, local_size_z = 1) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);

#include "conv_push.glsl"
#include "conv_filter_rows.glsl"

// The input row (or column) that reaches output offset `t` (the output coordinate plus the pad,
// less the tap's dilated offset) through stride `stride`, or -1 where none does.
int tap_source(int t, int stride, int size) {
    if (t < 0 || t % stride != 0) return -1;
    int i = t / stride;
    return i < size ? i : -1;
}

void main() {
    uint ox = gl_GlobalInvocationID.x;
    uint oy = gl_GlobalInvocationID.y;
    uint layer = gl_GlobalInvocationID.z;
    if (ox >= pc.out_t.w || oy >= pc.out_t.h || layer >= pc.out_t.n * pc.out_t.c4) return;
    uint n = layer / pc.out_t.c4;
    uint oc4 = layer % pc.out_t.c4;
    uint kh = pc.kernel & 0xFFFFu, kw = pc.kernel >> 16u;
    int sh = int(pc.stride & 0xFFFFu), sw = int(pc.stride >> 16u);
    int dh = int(pc.dilation & 0xFFFFu), dw = int(pc.dilation >> 16u);
    int ty0 = int(oy) + int(pc.pad & 0xFFFFu), tx0 = int(ox) + int(pc.pad >> 16u);
    int H = int(pc.in_t.h), W = int(pc.in_t.w);
    uint icg4 = (pc.icg + 3u) / 4u;
    uint o0 = oc4 * 4u;
    bool general = (pc.act & 0x100u) != 0u;
    CONV_FILTER_ROWS(n, o0, kh * kw * icg4);

    // The aligned path and the general one each walk the taps in a loop of their own: a test
    // of `general` inside the taps' loop cost llvmpipe, which runs every branch in a loop
    // lane by lane, as much again.
    vec4 acc = vec4(0.0);
    if (!general) {
        for (uint ky = 0u; ky < kh; ++ky) {
            int iy = tap_source(ty0 - int(ky) * dh, sh, H);
            if (iy < 0) continue;
            for (uint kx = 0u; kx < kw; ++kx) {
                int ix = tap_source(tx0 - int(kx) * dw, sw, W);
                if (ix < 0) continue;
                uint tap = (ky * kw + kx) * icg4;
                // By coordinates (LOAD_AT), as conv2d.comp: no fold's divisions a load.
                for (uint i4 = 0u; i4 < icg4; ++i4) {
                    uint t = tap + i4;
                    mat4 wm = mat4(FILTER_TEXEL(0, t), FILTER_TEXEL(1, t), FILTER_TEXEL(2, t), FILTER_TEXEL(3, t));
                    acc += LOAD_AT(img_in, pc.in_t, in_layer0 + i4, uint(iy), uint(ix)) * wm;
                }
            }
        }
    } else {
        for (uint ky = 0u; ky < kh; ++ky) {
            int iy = tap_source(ty0 - int(ky) * dh, sh, H);
            if (iy < 0) continue;
            for (uint kx = 0u; kx < kw; ++kx) {
                int ix = tap_source(tx0 - int(kx) * dw, sw, W);
                if (ix < 0) continue;
                for (uint j = 0u; j < 4u; ++j) {
                    uint o = o0 + j;
                    if (o >= pc.out_t.c) break;
                    uint gj = o / pc.ocg;
                    uint wrow = pc.w_off + ((o * kh + ky) * kw + kx) * icg4;
                    float s = 0.0;
                    for (uint i = 0u; i < pc.icg; ++i) {
                        uint c = gj * pc.icg + i;
                        float xv = LOAD_AT(img_in, pc.in_t, n * pc.in_t.c4 + c / 4u, uint(iy), uint(ix))[c % 4u];
                        s += xv * fetch_weight(wrow + i / 4u)[i % 4u];
                    }
                    acc[j] += s;
                }
            }
        }
    }
    vec4 bias = pc.b_off == 0xFFFFFFFFu ? vec4(0.0) : fetch_weight(pc.b_off + oc4);
    vec4 v = apply_unary(pc.act & 0xFFu, pc.alpha, pc.beta, acc + bias);
    STORE_TEXEL(img_out, pc.out_t, texel_index(pc.out_t, layer, oy, ox), zero_padding(pc.out_t, oc4, v));
}

#endif
