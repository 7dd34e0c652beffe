#version 450
// Finishes a tensor-core MatMul split over reduction spans (the matmul_const_coop*_splitk
// kernels): one invocation a texel of the partial results sums the spans' four columns of one
// row and finishes each through the MatMul epilogue (include/matmul_store.glsl: alpha, the bias,
// the activation), one value a texel (the output's channel dim is 1). Same push constants and
// bindings as the split kernels (include/matmul_common.glsl, include/matmul_partials.glsl): A at
// 0 goes unread, the output at 1 is written, the partials at 2 are read.
#include "tensor.glsl"
#include "activation.glsl"
#include "weights.glsl"
layout(local_size_x = 64) in;

TENSOR_OUT(1, img_out);
#include "matmul_common.glsl"
#define MATMUL_WEIGHTS
#include "matmul_store.glsl"
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
    for (uint j = 0u; j < 4u; j++) {
        uint n = 4u * n4 + j;
        if (n >= N) break;
        store_out(layer, 0u, m, n, vec4(s[j], 0.0, 0.0, 0.0));
    }
}
