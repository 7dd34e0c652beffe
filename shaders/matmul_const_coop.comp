#version 450
// MatMul with a constant B ([K, N] weights read through fetch_weight) on cooperative matrices
// (VK_NV_cooperative_matrix: fp16 16x16 A times 16x8 B into fp32 16x8, one subgroup of 32 each).
// Only the scalar case (output C == 1, A not transposed, fp16 storage): vk_backend::kernels::matmul
// picks it when the device has the feature. Same push constants as matmul_const.comp; a workgroup
// computes a 64x64 output tile of one output layer (the dispatch uses COOP_TILE), its four
// subgroups 32x32 quarters. K goes through shared memory TK = 64 at a time as fp16, and the next
// step's A and B values are loaded into registers while the tensor cores work on this one: with
// 16 at a time and nothing in flight across the barriers, a 128-token prefill's MLP projection
// ([1, 128, 2048] x [2048, 6656]) took 543 us on an H200 (6.4 TFLOP/s; session 18), bound by the
// load latency of each of its 128 steps. Accumulation is fp32, and bias, alpha and activation are
// applied on the way out, as in matmul_body.glsl.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "tensor.glsl"
#include "activation.glsl"
#include "weights.glsl"

layout(local_size_x = 128) in;

TENSOR_IN(0, img_a);
TENSOR_OUT(1, img_out);

#include "matmul_common.glsl"

#define TM 64u
#define TN 64u
#define TK 64u
// Values of A and texels of B each invocation loads a step.
#define A_PER (TM * TK / 128u)
#define B_PER (TK / 4u * TN / 128u)

shared float16_t As[TM * TK];  // [m][k], row stride TK
shared float16_t Bs[TK * TN];  // [k][n], row stride TN
shared float Cs[TM * TN];      // [m][n], row stride TN

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>

uint M, N, K, a_layer, m0, n0;
float ra[A_PER];
vec4 rb[B_PER];

// Issues step k0's loads into ra / rb (all of them before any is used).
void load_step(uint tid, uint k0) {
    for (uint r = 0u; r < A_PER; r++) {
        uint e = tid + r * 128u;
        uint m = m0 + e / TK, k = k0 + e % TK;
        // Out of range: a valid texel, its value dropped below.
        ra[r] = LOAD_AT(img_a, pc.a_t, a_layer, min(m, M - 1u), min(k, K - 1u)).x;
    }
    WeightLoc loc[B_PER];
    for (uint r = 0u; r < B_PER; r++) {
        uint e = tid + r * 128u;
        uint n = min(n0 + e % TN, N - 1u), kb = min(k0 + 4u * (e / TN), K - 1u) & ~3u;
        loc[r] = weight_locate(pc.b_t.n + (kb / 4u) * N + n);
    }
    for (uint r = 0u; r < B_PER; r++) {
        rb[r] = imageLoad(weight_atlas, loc[r].at);
    }
    for (uint r = 0u; r < B_PER; r++) {
        rb[r] = weight_finish(loc[r], rb[r]);
    }
}

// Writes the loaded step to shared memory as fp16, zero outside the matrices.
void store_step(uint tid, uint k0) {
    for (uint r = 0u; r < A_PER; r++) {
        uint e = tid + r * 128u;
        bool inside = m0 + e / TK < M && k0 + e % TK < K;
        As[e] = float16_t(inside ? ra[r] : 0.0);
    }
    for (uint r = 0u; r < B_PER; r++) {
        uint e = tid + r * 128u;
        uint k4 = e / TN, nn = e % TN;
        bool col = n0 + nn < N;
        for (uint j = 0u; j < 4u; j++) {
            bool inside = col && k0 + 4u * k4 + j < K;
            Bs[(4u * k4 + j) * TN + nn] = float16_t(inside ? rb[r][j] : 0.0);
        }
    }
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint sg = tid / 32u;
    // Each subgroup owns a 32 x 32 quarter: 2 row blocks of 16 x 4 column blocks of 8.
    uint sm = (sg / 2u) * 32u, sn = (sg % 2u) * 32u;
    m0 = gl_WorkGroupID.y * TM;
    n0 = gl_WorkGroupID.x * TN;
    uint layer = gl_WorkGroupID.z;
    M = pc.out_t.h;
    N = pc.out_t.w;
    K = pc.k;
    a_layer = operand_layer(pc.a_t, pc.flags & 15u, layer / pc.out_t.c4, 0u);

    ACC acc[2][4];
    for (uint i = 0u; i < 2u; i++) {
        for (uint j = 0u; j < 4u; j++) {
            acc[i][j] = ACC(0.0);
        }
    }
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[2];
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> b;
    load_step(tid, 0u);
    for (uint k0 = 0u; k0 < K; k0 += TK) {
        barrier(); // the previous step's products have read As and Bs
        store_step(tid, k0);
        barrier();
        if (k0 + TK < K) {
            load_step(tid, k0 + TK);
        }
        for (uint kk = 0u; kk < TK; kk += 16u) {
            for (uint i = 0u; i < 2u; i++) {
                coopMatLoadNV(a[i], As, (sm + 16u * i) * TK + kk, TK, false);
            }
            for (uint j = 0u; j < 4u; j++) {
                coopMatLoadNV(b, Bs, kk * TN + sn + 8u * j, TN, false);
                for (uint i = 0u; i < 2u; i++) {
                    acc[i][j] = coopMatMulAddNV(a[i], b, acc[i][j]);
                }
            }
        }
    }
    for (uint i = 0u; i < 2u; i++) {
        for (uint j = 0u; j < 4u; j++) {
            coopMatStoreNV(acc[i][j], Cs, (sm + 16u * i) * TN + sn + 8u * j, TN, false);
        }
    }
    barrier();
    uint act = (pc.flags >> 16u) & 255u;
    for (uint r = 0u; r < 32u; r++) {
        uint e = tid + r * 128u;
        uint mm = e / TN, nn = e % TN;
        uint m = m0 + mm, n = n0 + nn;
        if (m >= M || n >= N) continue;
        vec4 v = vec4(Cs[e] * pc.alpha, 0.0, 0.0, 0.0);
        if ((pc.flags & 4096u) != 0u) {
            bool per_row = (pc.flags & 1024u) != 0u, per_col = (pc.flags & 2048u) != 0u;
            uint bi = (per_row ? m : 0u) * (per_col ? N : 1u) + (per_col ? n : 0u);
            v.x += pc.beta * fetch_weight(pc.bias_offset + bi / 4u)[bi % 4u];
        }
        v = apply_unary(act, pc.act_a, pc.act_b, v);
        STORE_TEXEL(img_out, pc.out_t, texel_index(pc.out_t, layer, m, n), zero_padding(pc.out_t, 0u, v));
    }
}
