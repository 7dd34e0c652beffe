#version 450
// Finishes a tensor-core MatMul split over reduction spans (the matmul_const_coop*_splitk
// kernels): one invocation a texel of the partial results sums the spans' four columns of one
// row and applies alpha, the bias, and the activation to each, as the unsplit kernel's epilogue
// does, storing one value a texel (the output's channel dim is 1). Same push constants and
// bindings as the split kernels (include/matmul_common.glsl, include/matmul_partials.glsl): A at
// 0 goes unread, the output at 1 is written, the partials at 2 are read.
#include "tensor.glsl"
#include "activation.glsl"
#include "weights.glsl"
layout(local_size_x = 64) in;

TENSOR_OUT(1, img_out);
#include "matmul_common.glsl"
#include "matmul_partials.glsl"

void main() {
    uint M = pc.out_t.h, N = pc.out_t.w, n4s = (N + 3u) / 4u;
    uint layers = pc.out_t.n * pc.out_t.c4, splits = partial_splits();
    uint i = global_id_1d();
    if (i >= layers * M * n4s) return;
    uint n4 = i % n4s, m = (i / n4s) % M, layer = i / (n4s * M);
    vec4 s = vec4(0.0);
    for (uint p = 0u; p < splits; p++) {
        s += load_partial(partial_index(p, layers, layer, m, n4));
    }
    uint act = (pc.flags >> 16u) & 255u;
    for (uint j = 0u; j < 4u; j++) {
        uint n = 4u * n4 + j;
        if (n >= N) break;
        vec4 v = vec4(s[j] * pc.alpha, 0.0, 0.0, 0.0);
        if ((pc.flags & 4096u) != 0u) {
            bool per_row = (pc.flags & 1024u) != 0u, per_col = (pc.flags & 2048u) != 0u;
            uint bi = (per_row ? m : 0u) * (per_col ? N : 1u) + (per_col ? n : 0u);
            v.x += pc.beta * fetch_weight(pc.bias_offset + bi / 4u)[bi % 4u];
        }
        v = apply_unary(act, pc.act_a, pc.act_b, v);
        STORE_TEXEL(img_out, pc.out_t, texel_index(pc.out_t, layer, m, n), zero_padding(pc.out_t, 0u, v));
    }
}
