#version 450
// MatMul with a constant B ([K, N] weights read through fetch_weight) on cooperative matrices
// (VK_NV_cooperative_matrix: fp16 16x16 A times 16x8 B into fp32 16x8, one subgroup of 32 each).
// Only the scalar case (output C == 1, A not transposed, fp16 storage): vk_backend::kernels::matmul
// picks it when the device has the feature. Same push constants as matmul_const.comp; a workgroup
// computes a 64x64 output tile of one output layer (the dispatch uses COOP_TILE), its four
// subgroups 32x32 quarters. K goes through shared memory 16 at a time as fp16; accumulation is
// fp32, and bias, alpha and activation are applied on the way out, as in matmul_body.glsl.
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
#define TK 16u

shared float16_t As[TM * TK];  // [m][k], row stride TK
shared float16_t Bs[TK * TN];  // [k][n], row stride TN
shared float Cs[TM * TN];      // [m][n], row stride TN

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint sg = tid / 32u;
    // Each subgroup owns a 32 x 32 quarter: 2 row blocks of 16 x 4 column blocks of 8.
    uint sm = (sg / 2u) * 32u, sn = (sg % 2u) * 32u;
    uint m0 = gl_WorkGroupID.y * TM, n0 = gl_WorkGroupID.x * TN;
    uint layer = gl_WorkGroupID.z;
    uint M = pc.out_t.h, N = pc.out_t.w, K = pc.k;
    uint a_layer = operand_layer(pc.a_t, pc.flags & 15u, layer / pc.out_t.c4, 0u);

    ACC acc[2][4];
    for (uint i = 0u; i < 2u; i++) {
        for (uint j = 0u; j < 4u; j++) {
            acc[i][j] = ACC(0.0);
        }
    }
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[2];
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> b;
    for (uint k0 = 0u; k0 < K; k0 += TK) {
        // A: 64 x 16 values, 8 per invocation; consecutive invocations walk k (the image's x).
        for (uint r = 0u; r < 8u; r++) {
            uint e = tid + r * 128u;
            uint mm = e / TK, kk = e % TK;
            uint m = m0 + mm, k = k0 + kk;
            float v = 0.0;
            if (m < M && k < K) {
                v = LOAD_TEXEL(img_a, pc.a_t, texel_index(pc.a_t, a_layer, m, k)).x;
            }
            As[e] = float16_t(v);
        }
        // B: packed texel (k/4, n) holds 4 consecutive k; 4 x 64 texels, two per invocation.
        for (uint r = 0u; r < 2u; r++) {
            uint e = tid + r * 128u;
            uint k4 = e / TN, nn = e % TN;
            uint n = n0 + nn, kb = k0 + 4u * k4;
            vec4 w = vec4(0.0);
            if (n < N && kb < K) {
                w = fetch_weight(pc.b_t.n + (kb / 4u) * N + n);
            }
            for (uint j = 0u; j < 4u; j++) {
                Bs[(4u * k4 + j) * TN + nn] = float16_t(w[j]);
            }
        }
        barrier();
        for (uint i = 0u; i < 2u; i++) {
            coopMatLoadNV(a[i], As, (sm + 16u * i) * TK, TK, false);
        }
        for (uint j = 0u; j < 4u; j++) {
            coopMatLoadNV(b, Bs, sn + 8u * j, TN, false);
            for (uint i = 0u; i < 2u; i++) {
                acc[i][j] = coopMatMulAddNV(a[i], b, acc[i][j]);
            }
        }
        barrier();
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
