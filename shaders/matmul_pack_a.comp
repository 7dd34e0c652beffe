#version 450
// A's copy for the tensor-core MatMuls reading it four values a texel (`matmul_const_coop_pa*`):
// A, one matrix of M rows of K one value a texel, into [4, K/4, M] (texel (m, k/4) holding
// k..k+3 of row m). One invocation per texel written: four loads of one row, one store. The
// generic strided copy (copy.comp, six divisions a lane) that did it first added an estimated
// 10-16 us to each packing MatMul of a 128 x 2048 A on an H200 (session 30, run 1: the query and
// output projections, which copy, against the key and value ones, which reuse the query's).
#extension GL_EXT_control_flow_attributes : require
#include "tensor.glsl"

layout(local_size_x = 64, local_size_y = 4) in;

TENSOR_IN(0, img_a);
TENSOR_OUT(1, img_out);

layout(push_constant) uniform Push {
    TensorDesc out_t;
    TensorDesc a_t;
} pc;

void main() {
    uint m = gl_GlobalInvocationID.x, k4 = gl_GlobalInvocationID.y;
    uint M = pc.a_t.h, K = pc.a_t.w;
    if (m >= M || 4u * k4 >= K) {
        return;
    }
    vec4 v = vec4(0.0);
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        uint k = 4u * k4 + j;
        if (k < K) {
            v[j] = LOAD_AT(img_a, pc.a_t, 0u, m, k).x;
        }
    }
    STORE_TEXEL(img_out, pc.out_t, texel_index(pc.out_t, 0u, k4, m), v);
}
