#version 450
// MatMul of a few lane-batched rows (M <= 16, every RGBA lane a batch: a recognizer head packed
// four rows to a texel by the importer's row packing) against a constant packed B [K, N]. The
// tiled body (include/matmul_body.glsl) gives a workgroup 32 rows, so at PP-OCR's head (M = 10)
// it computed 32 and kept 10, through a shared-memory loop with two barriers every 16 k. Here a
// workgroup of 64 invocations owns 64 columns and up to MR rows (the rows split evenly over the
// dispatch's row blocks); each invocation reads its column's weight texel (4 k) once and
// multiplies it into MR accumulators. Every invocation of a workgroup reads the same texels of
// A, straight from its image (LOAD_AT, where the recorder knows A unfolded): staged in shared
// memory instead, llvmpipe loaded them lane by lane and the kernel took 7.6 ms on PP-OCR's head
// piece against 1.6 without those loads.
// Only on devices that run few invocations at once (vk_backend::kernels::matmul::uses_short):
// on a GPU one column an invocation leaves every A load in series (an H100 took 237 us a head
// piece here against 18 on the tiled body).
// Bias through fetch_weight (MATMUL_WEIGHTS); epilogue include/matmul_store.glsl.
#define MATMUL_WEIGHTS
#define MATMUL_CONST_B
#include "tensor.glsl"
#include "activation.glsl"
#include "weights.glsl"

#ifndef MR
#define MR 8u
#endif

layout(local_size_x = 64) in;

TENSOR_IN(0, img_a);
TENSOR_OUT(1, img_out);

#include "matmul_common.glsl"
#include "matmul_store.glsl"

void main() {
    uint M = pc.out_t.h, N = pc.out_t.w, K = pc.k;
    uint rows = (M + gl_NumWorkGroups.y - 1u) / gl_NumWorkGroups.y;
    uint m0 = gl_WorkGroupID.y * rows;
    uint n = gl_WorkGroupID.x * 64u + gl_LocalInvocationID.x;
    uint layer = gl_WorkGroupID.z;
    uint nidx = layer / pc.out_t.c4, c4i = layer % pc.out_t.c4;
    uint fa = pc.flags & 15u;
    bool ta = (pc.flags & 256u) != 0u;
    uint a_layer = operand_layer(pc.a_t, fa, nidx, c4i);

    // No branch on the column or the row: past N an invocation reads column N - 1, past the
    // block's rows it reads row M - 1, and neither is stored (every invocation then loads the
    // same A texels at the same time).
    uint col = min(n, N - 1u);
    uint row[MR];
    for (uint m = 0u; m < MR; m++) row[m] = min(m0 + min(m, rows - 1u), M - 1u);
    vec4 acc[MR];
    for (uint m = 0u; m < MR; m++) acc[m] = vec4(0.0);
    for (uint k0 = 0u; k0 < K; k0 += 4u) {
        vec4 w = fetch_weight(pc.b_t.n + (k0 / 4u) * N + col);
        for (uint j = 0u; j < min(4u, K - k0); j++) {
            uint k = k0 + j;
            for (uint m = 0u; m < MR; m++) {
                vec4 a = ta ? LOAD_AT(img_a, pc.a_t, a_layer, k, row[m]) : LOAD_AT(img_a, pc.a_t, a_layer, row[m], k);
                acc[m] += a * w[j];
            }
        }
    }
    if (n >= N) return;
    for (uint m = 0u; m < MR; m++) {
        if (m < rows && m0 + m < M) store_out(layer, c4i, m0 + m, n, acc[m]);
    }
}
