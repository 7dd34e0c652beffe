// Tiled MatMul/Gemm body shared by matmul.comp, matmul_bias.comp, matmul_const.comp,
// matmul_tbias.comp and matmul_const_tbias.comp.
// out[b, m, n] = act(alpha * sum_k A[b, m, k] * B[b, k, n] + beta * bias[m, n]).
// Layout (vk_backend::layout rank rule): M is H, N/K are W, batch dim d3 lives in the RGBA lanes,
// d0..d2 in the layer index. A texel of A at (m, k) therefore holds 4 batches, and the whole
// product runs lane-wise: each invocation accumulates vec4s = 4 batch matrices at once.
// Defines: MATMUL_CONST_B (B is a [K, N] weight packed by layout::pack_matrix_kn, read through
// fetch_weight; it is shared by every batch lane), MATMUL_WEIGHTS (bias available via fetch_weight),
// MATMUL_TENSOR_BIAS (bias is a run-time activation C of logical shape [1, 1, Hc, Wc] with
// Hc in {1, M}, Wc in {1, N}, lane 0; shared by every batch; bound before the output).
// Workgroup 16x16 computes a 32x32 output tile of one output layer; K goes through shared memory
// 16 at a time; every invocation owns 2x2 output texels.
// Scalar mode (flag bit 13, output C == 1, the usual rank-2/rank-3 case): only lane 0 is real, so
// the tiles hold 4 consecutive k per vec4 instead (64 k per step) and the inner loop is a dot
// product: 4x less ALU and shared memory traffic than the lane-batched path.
#include "tensor.glsl"
#include "activation.glsl"
#ifdef MATMUL_WEIGHTS
#include "weights.glsl"
#endif

#define TM 32u
#define TN 32u
#define TK 16u

layout(local_size_x = 16, local_size_y = 16) in;

TENSOR_IN(0, img_a);
#ifdef MATMUL_CONST_B
#define MATMUL_NEXT_BINDING 1
#else
TENSOR_IN(1, img_b);
#define MATMUL_NEXT_BINDING 2
#endif
#ifdef MATMUL_TENSOR_BIAS
TENSOR_IN(MATMUL_NEXT_BINDING, img_c);
TENSOR_OUT(MATMUL_NEXT_BINDING + 1, img_out);
#else
TENSOR_OUT(MATMUL_NEXT_BINDING, img_out);
#endif

#include "matmul_common.glsl"
#include "matmul_store.glsl"

#ifdef MATMUL_CONST_B
// B texel (k/4, n): B[4*(k/4) + j, n] in lane j. Flag bit 14: B is stored by rows, as B^T [N, K]
// (a lookup table the head shares, vk_backend::MatRhs::WeightRows): texel (n/4)*K + k, lane n%4,
// so the four k of one n are four texels.
vec4 const_b(uint kb, uint n, uint N, uint K) {
    if ((pc.flags & 16384u) == 0u) return fetch_weight(pc.b_t.n + (kb / 4u) * N + n);
    uint base = pc.b_t.n + (n / 4u) * K + kb, lane = n & 3u;
    vec4 v = vec4(0.0);
    for (uint j = 0u; j < 4u; j++) {
        if (kb + j < K) v[j] = fetch_weight(base + j)[lane];
    }
    return v;
}
#endif

shared vec4 As[TK][TM];
shared vec4 Bs[TK][TN];

void main() {
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint tid = ty * 16u + tx;
    uint m0 = gl_WorkGroupID.y * TM, n0 = gl_WorkGroupID.x * TN;
    uint layer = gl_WorkGroupID.z;
    uint M = pc.out_t.h, N = pc.out_t.w, K = pc.k;
    uint nidx = layer / pc.out_t.c4, c4i = layer % pc.out_t.c4;
    uint fa = pc.flags & 15u;
    bool ta = (pc.flags & 256u) != 0u;
    uint a_layer = operand_layer(pc.a_t, fa, nidx, c4i);
    bool a_splat = (fa & 8u) != 0u;
#ifndef MATMUL_CONST_B
    uint fb = (pc.flags >> 4u) & 15u;
    bool tb = (pc.flags & 512u) != 0u;
    uint b_layer = operand_layer(pc.b_t, fb, nidx, c4i);
    bool b_splat = (fb & 8u) != 0u;
#endif

    vec4 acc00 = vec4(0.0), acc01 = vec4(0.0), acc10 = vec4(0.0), acc11 = vec4(0.0);
    bool scalar = (pc.flags & 8192u) != 0u;
    for (uint k0 = 0u; scalar && k0 < K; k0 += 4u * TK) {
        // As[k4][m] = A[m, k0 + 4*k4 .. +3]; 16 x 32 entries, 2 per invocation.
        for (uint r = 0u; r < 2u; r++) {
            uint e = tid + r * 256u;
            uint k4 = ta ? e / TM : e % TK;
            uint mm = ta ? e % TM : e / TK;
            uint m = m0 + mm, kb = k0 + 4u * k4;
            vec4 v = vec4(0.0);
            if (m < M) {
                for (uint j = 0u; j < 4u; j++) {
                    uint k = kb + j;
                    if (k < K) {
                        uint idx = ta ? texel_index(pc.a_t, a_layer, k, m) : texel_index(pc.a_t, a_layer, m, k);
                        v[j] = LOAD_TEXEL(img_a, pc.a_t, idx).x;
                    }
                }
            }
            As[k4][mm] = v;
        }
        for (uint r = 0u; r < 2u; r++) {
            uint e = tid + r * 256u;
#ifdef MATMUL_CONST_B
            uint k4 = e / TN, nn = e % TN;
            uint n = n0 + nn, kb = k0 + 4u * k4;
            Bs[k4][nn] = (n < N && kb < K) ? const_b(kb, n, N, K) : vec4(0.0);
#else
            uint k4 = tb ? e % TK : e / TN;
            uint nn = tb ? e / TK : e % TN;
            uint n = n0 + nn, kb = k0 + 4u * k4;
            vec4 v = vec4(0.0);
            if (n < N) {
                for (uint j = 0u; j < 4u; j++) {
                    uint k = kb + j;
                    if (k < K) {
                        uint idx = tb ? texel_index(pc.b_t, b_layer, n, k) : texel_index(pc.b_t, b_layer, k, n);
                        v[j] = LOAD_TEXEL(img_b, pc.b_t, idx).x;
                    }
                }
            }
            Bs[k4][nn] = v;
#endif
        }
        barrier();
        for (uint k4 = 0u; k4 < TK; k4++) {
            vec4 a0 = As[k4][ty], a1 = As[k4][ty + 16u];
            vec4 b0 = Bs[k4][tx], b1 = Bs[k4][tx + 16u];
            acc00.x += dot(a0, b0);
            acc01.x += dot(a0, b1);
            acc10.x += dot(a1, b0);
            acc11.x += dot(a1, b1);
        }
        barrier();
    }
    for (uint k0 = 0u; !scalar && k0 < K; k0 += TK) {
        // A tile: 16 k x 32 m; consecutive invocations walk the image's x axis.
        for (uint r = 0u; r < 2u; r++) {
            uint e = tid + r * 256u;
            uint kk = ta ? e / TM : e % TK;
            uint mm = ta ? e % TM : e / TK;
            uint k = k0 + kk, m = m0 + mm;
            vec4 v = vec4(0.0);
            if (k < K && m < M) {
                uint idx = ta ? texel_index(pc.a_t, a_layer, k, m) : texel_index(pc.a_t, a_layer, m, k);
                v = LOAD_TEXEL(img_a, pc.a_t, idx);
                if (a_splat) v = v.xxxx;
            }
            As[kk][mm] = v;
        }
#ifdef MATMUL_CONST_B
        // Packed B texel (k/4, n) holds 4 consecutive k: 4 x 32 fetches fill the 16 x 32 tile.
        if (tid < 128u) {
            uint nn = tid % TN, k4 = tid / TN;
            uint n = n0 + nn, kb = k0 + k4 * 4u;
            vec4 w = vec4(0.0);
            if (n < N && kb < K) w = const_b(kb, n, N, K);
            Bs[k4 * 4u][nn] = vec4(w.x);
            Bs[k4 * 4u + 1u][nn] = vec4(w.y);
            Bs[k4 * 4u + 2u][nn] = vec4(w.z);
            Bs[k4 * 4u + 3u][nn] = vec4(w.w);
        }
#else
        for (uint r = 0u; r < 2u; r++) {
            uint e = tid + r * 256u;
            uint kk = tb ? e % TK : e / TN;
            uint nn = tb ? e / TK : e % TN;
            uint k = k0 + kk, n = n0 + nn;
            vec4 v = vec4(0.0);
            if (k < K && n < N) {
                uint idx = tb ? texel_index(pc.b_t, b_layer, n, k) : texel_index(pc.b_t, b_layer, k, n);
                v = LOAD_TEXEL(img_b, pc.b_t, idx);
                if (b_splat) v = v.xxxx;
            }
            Bs[kk][nn] = v;
        }
#endif
        barrier();
        for (uint kk = 0u; kk < TK; kk++) {
            vec4 a0 = As[kk][ty], a1 = As[kk][ty + 16u];
            vec4 b0 = Bs[kk][tx], b1 = Bs[kk][tx + 16u];
            acc00 += a0 * b0;
            acc01 += a0 * b1;
            acc10 += a1 * b0;
            acc11 += a1 * b1;
        }
        barrier();
    }

    for (uint i = 0u; i < 2u; i++) {
        for (uint j = 0u; j < 2u; j++) {
            uint m = m0 + ty + 16u * i, n = n0 + tx + 16u * j;
            if (m >= M || n >= N) continue;
            store_out(layer, c4i, m, n, i == 0u ? (j == 0u ? acc00 : acc01) : (j == 0u ? acc10 : acc11));
        }
    }
}
