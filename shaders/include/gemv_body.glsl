// Body of matmul_const_gemv.comp and matmul_const_gemv_deep.comp. MatMul/Gemm of a few rows (M <=
// 4: a decoder's one token, a head's rows) against a constant B read through fetch_weight, scalar
// mode only (output C == 1): the tiled body gives each workgroup 32 rows, so at M = 1 it idles 31
// of every 32 invocations and serializes K in few workgroups. Here a workgroup of 256 owns 4 * MP
// output columns (MP 1, 2 or 4, at least M rounded up, from flag bits 24-25; 4 unless the device's
// options fix another, see vk_backend::kernels::matmul::gemv_spread) in G column groups and splits
// K into S = 256 / G slices. A's rows are staged CHUNK = STAGE / MP vec4s (4 k each) at a time, so
// that every invocation has UNROLL weight texels per chunk (8, or 16 with the deep variant's STAGE
// 1024): it issues their page-table reads, then their atlas loads, before it uses any, since a
// GEMV is bound by the loads in flight (one at a time, an H200 read the 1.34 B decoder's fp16
// weights at about 100 GB/s). The slices' partial sums meet in shared memory (a tree down to 16),
// and slice 0 stores. (Staging A's whole row once and keeping the next batch's page-table reads in
// flight was slower on an H200: 6.66-7.76 against 4.67-4.90 ms for the 1.34 B decoder's
// projections, measurements/h200-2026-12-03-s17.)
// B layouts (flag bit 14, see include/matmul_body.glsl const_b):
//   packed [K, N]:  texel (k/4, n), 4 consecutive k in the lanes; G = 4 * MP groups of one
//                   column, the column is the fast invocation index (consecutive texels);
//   by rows (B^T):  texel (n/4)*K + k, 4 consecutive n in the lanes; G = MP groups of 4
//                   columns, the slice is the fast invocation index (consecutive k are
//                   consecutive texels).
// Bias through fetch_weight (MATMUL_WEIGHTS), no run-time C. Epilogue: include/matmul_store.glsl.
#define MATMUL_WEIGHTS
#define MATMUL_CONST_B
#ifndef TEXSTREAM_GEMV_BODY_GLSL
#define TEXSTREAM_GEMV_BODY_GLSL
#include "tensor.glsl"
#include "activation.glsl"
#include "weights.glsl"

#define MAX_ROWS 4u
// vec4s of A staged per chunk, over all rows, and weight texels per invocation and chunk (the
// entry file may set both: matmul_const_gemv_deep.comp takes twice as many of each).
#ifndef STAGE
#define STAGE 512u
#endif
#ifndef UNROLL
#define UNROLL 8u
#endif

layout(local_size_x = 256) in;

TENSOR_IN(0, img_a);
TENSOR_OUT(1, img_out);

#include "matmul_common.glsl"
#include "matmul_store.glsl"

// Row m's staged chunk is As[m * CHUNK ..].
shared vec4 As[STAGE];
// Partial sums: [slice][row][group], one lane per column (by rows) or lane 0 (packed).
shared vec4 red[256u * MAX_ROWS];

void main() {
    uint tid = gl_LocalInvocationID.x;
    bool rows_b = (pc.flags & 16384u) != 0u;
    uint M = pc.out_t.h, N = pc.out_t.w, K = pc.k;
    uint mp = 1u << ((pc.flags >> 24u) & 3u);
    uint CHUNK = STAGE / mp;
    uint S = rows_b ? 4u * CHUNK / UNROLL : CHUNK / UNROLL;
    uint G = 256u / S;
    uint g = rows_b ? tid / S : tid % G;
    uint s = rows_b ? tid % S : tid / G;
    uint layer = gl_WorkGroupID.z;
    uint nidx = layer / pc.out_t.c4, c4i = layer % pc.out_t.c4;
    uint fa = pc.flags & 15u;
    bool ta = (pc.flags & 256u) != 0u;
    uint a_layer = operand_layer(pc.a_t, fa, nidx, c4i);
    // First column of this invocation's group.
    uint n = (gl_WorkGroupID.x * G + g) * (rows_b ? 4u : 1u);
    uint K4 = (K + 3u) / 4u;

    vec4 acc[MAX_ROWS];
    for (uint m = 0u; m < MAX_ROWS; m++) acc[m] = vec4(0.0);
    for (uint c0 = 0u; c0 < K4; c0 += CHUNK) {
        // Stage A[m, 4*(c0 + t) .. +3] for every row.
        for (uint e = tid; e < mp * CHUNK; e += 256u) {
            uint m = e / CHUNK, t = e % CHUNK;
            vec4 v = vec4(0.0);
            if (m < M && c0 + t < K4) {
                for (uint j = 0u; j < 4u; j++) {
                    uint k = 4u * (c0 + t) + j;
                    if (k < K) {
                        uint idx = ta ? texel_index(pc.a_t, a_layer, k, m) : texel_index(pc.a_t, a_layer, m, k);
                        v[j] = LOAD_TEXEL(img_a, pc.a_t, idx).x;
                    }
                }
            }
            As[e] = v;
        }
        barrier();
        uint end = min(CHUNK, K4 - c0);
        WeightLoc loc[UNROLL];
        vec4 w[UNROLL];
        if (!rows_b && n < N) {
            for (uint u = 0u; u < UNROLL; u++) {
                uint t = min(s + u * S, end - 1u);
                loc[u] = weight_locate(pc.b_t.n + (c0 + t) * N + n);
            }
            for (uint u = 0u; u < UNROLL; u++) w[u] = imageLoad(weight_atlas, loc[u].at);
            for (uint u = 0u; u < UNROLL; u++) {
                uint t = s + u * S;
                if (t < end) {
                    vec4 wv = weight_finish(loc[u], w[u]);
                    for (uint m = 0u; m < MAX_ROWS; m++) {
                        if (m < M) acc[m].x += dot(As[m * CHUNK + t], wv);
                    }
                }
            }
        } else if (rows_b && n < N) {
            uint base = pc.b_t.n + (n / 4u) * K;
            uint k0 = 4u * c0, k_end = min(K, 4u * (c0 + end));
            for (uint u = 0u; u < UNROLL; u++) {
                uint k = min(k0 + s + u * S, k_end - 1u);
                loc[u] = weight_locate(base + k);
            }
            for (uint u = 0u; u < UNROLL; u++) w[u] = imageLoad(weight_atlas, loc[u].at);
            for (uint u = 0u; u < UNROLL; u++) {
                uint k = k0 + s + u * S;
                if (k < k_end) {
                    vec4 wv = weight_finish(loc[u], w[u]);
                    uint t = k / 4u - c0, j = k % 4u;
                    for (uint m = 0u; m < MAX_ROWS; m++) {
                        if (m < M) acc[m] += As[m * CHUNK + t][j] * wv;
                    }
                }
            }
        }
        barrier();
    }
    for (uint m = 0u; m < MAX_ROWS; m++) red[(s * MAX_ROWS + m) * G + g] = acc[m];
    // Halve the slices in a tree down to 16, which slice 0 sums (a barrier costs more than
    // summing 16 on a CPU device, where S is 16 and the tree is skipped).
    for (uint stride = S / 2u; stride >= 16u; stride >>= 1u) {
        barrier();
        if (s < stride) {
            for (uint m = 0u; m < MAX_ROWS; m++) {
                red[(s * MAX_ROWS + m) * G + g] += red[((s + stride) * MAX_ROWS + m) * G + g];
            }
        }
    }
    barrier();
    if (s != 0u || n >= N) return;
    for (uint m = 0u; m < M && m < MAX_ROWS; m++) {
        vec4 v = vec4(0.0);
        for (uint i = 0u; i < min(S, 16u); i++) v += red[(i * MAX_ROWS + m) * G + g];
        if (rows_b) {
            for (uint l = 0u; l < 4u && n + l < N; l++) store_out(layer, c4i, m, n + l, vec4(v[l], 0.0, 0.0, 0.0));
        } else {
            store_out(layer, c4i, m, n, vec4(v.x, 0.0, 0.0, 0.0));
        }
    }
}

#endif
