// Body of conv2d_coop_large.comp: a dense convolution (groups == 1) as an implicit GEMM on
// cooperative matrices (VK_NV_cooperative_matrix: fp16 16x16 A times 16x8 B into fp32 16x8,
// subgroups of 32) on the tensor-core MatMul's tile (include/matmul_coop_body.glsl): 64 output
// pixels x 64 output channels a workgroup of 512 invocations, four K groups of four subgroups.
// Each step's 16 input texels (64 k) are split between the groups; each group stages its four
// in shared memory and multiplies them into its own accumulators while it loads its next ones
// into registers, and the groups' tiles are summed through shared memory at the end. Same push
// constants, bindings, fused bias, addend and activation as conv2d.comp; the GEMM's k runs over
// k4 = tap * icg4 + i4 (include/conv_coop.glsl), B's texel w_off + o * K4 + k4 holds four k of
// output channel o (vk_backend::layout::pack_conv_filter). The 32x32 tile of
// conv2d_coop_wide.comp stages a texel for 32 products; this one for 64, and stores each
// output texel once from the summed tile.
#ifndef TEXSTREAM_CONV_COOP_GROUPS_GLSL
#define TEXSTREAM_CONV_COOP_GROUPS_GLSL

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "tensor.glsl"
#include "weights.glsl"
#include "activation.glsl"

layout(local_size_x = 512, local_size_y = 1, local_size_z = 1) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);
TENSOR_IN(2, img_add);

#include "conv_push.glsl"
#include "conv_input_scale.glsl"

#define KG 4u           // K groups
#define GT 128u         // invocations a group
#define TM 64u          // output pixels a tile
// Output channels a tile: 64, or 96 (conv2d_coop_large_n96.comp) where 64-channel tiles would
// overfill the device's first wave by a little and 96-channel ones fit it; the groups' tiles are
// then summed CS_COLS channels at a time, within 48 KiB of shared memory.
#ifndef TN
#define TN 64u
#endif
#ifndef CS_COLS
#define CS_COLS TN
#endif
#define CB (TN / 16u)   // column blocks of 8 a subgroup owns (two subgroups across a tile)
#define RB (TM / 32u)   // row blocks of 16 a subgroup owns
#define TKG4 4u         // input texels (16 k) a group takes a step
#define TKG (4u * TKG4)
#define STEP4 (KG * TKG4)  // input texels a step
#define A_PER (TM * TKG4 / GT)
#define B_PER (TN * TKG4 / GT)
// Row strides padded by 16 bytes (see matmul_coop_body.glsl): rows 48 bytes apart start in
// different bank groups for the tensor-core loads.
#define AS_STRIDE (TKG + 8u)
#define BS_STRIDE (TKG + 8u)
#define CS_STRIDE (CS_COLS + 4u)
shared float16_t As[KG][TM * AS_STRIDE];  // per group [pixel][k]
shared float16_t Bs[KG][TN * BS_STRIDE];  // per group [channel][k], read transposed
shared float Cs[TM * CS_STRIDE];          // [pixel][channel - c0] of channels c0.. c0 + CS_COLS

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>

uint M, K4, OW, m0, o0, batch;
vec4 ra[A_PER];
vec4 rs[A_PER];  // the input scale's factors of each A texel (INPUT_SCALED pipelines only)
vec4 rb[B_PER];

// Issues this group's loads of the step from input texel k0 (of K4) into ra / rb, zero outside
// the input, the reduction and the output channels; tid is the invocation's index in its group.
void load_step(uint tid, uint k0) {
    CONV_WINDOW_LOCALS();
    uint icg4 = pc.in_t.c4;
    // A: consecutive invocations walk pixels (neighbouring texels of an input row).
    [[unroll]] for (uint r = 0u; r < A_PER; r++) {
        uint e = tid + r * GT;
        uint mm = e % TM, j = e / TM;
        uint m = m0 + mm, k4 = k0 + j;
        vec4 v = vec4(0.0), f = vec4(1.0);
        if (m < M && k4 < K4) {
            uint tap = k4 / icg4, i4 = k4 % icg4;
            uint ky = tap / kw, kx = tap % kw;
            int iy = int((m / OW) * sh + ky * dh) - pt;
            int ix = int((m % OW) * sw + kx * dw) - pl;
            if (iy >= 0 && iy < int(pc.in_t.h) && ix >= 0 && ix < int(pc.in_t.w)) {
                v = LOAD_AT(img_in, pc.in_t, batch * icg4 + i4, uint(iy), uint(ix));
                if (conv_input_scaled()) f = conv_input_scale(batch * icg4 + i4);
            }
        }
        ra[r] = v;
        if (conv_input_scaled()) rs[r] = f;
    }
    // B: consecutive invocations walk k4 within an output channel (contiguous filter texels).
    WeightLoc loc[B_PER];
    bool valid[B_PER];
    [[unroll]] for (uint r = 0u; r < B_PER; r++) {
        uint e = tid + r * GT;
        uint j = e % TKG4, nn = e / TKG4;
        uint o = o0 + nn, k4 = k0 + j;
        valid[r] = o < pc.out_t.c && k4 < K4;
        loc[r] = weight_locate(pc.w_off + min(o, pc.out_t.c - 1u) * K4 + min(k4, K4 - 1u));
    }
    [[unroll]] for (uint r = 0u; r < B_PER; r++) {
        rb[r] = imageLoad(weight_atlas, loc[r].at);
    }
    [[unroll]] for (uint r = 0u; r < B_PER; r++) {
        rb[r] = valid[r] ? weight_finish(loc[r], rb[r]) : vec4(0.0);
    }
}

// Writes the loaded texels to group g's shared memory as fp16.
void store_step(uint g, uint tid) {
    [[unroll]] for (uint r = 0u; r < A_PER; r++) {
        uint e = tid + r * GT;
        uint mm = e % TM, j = e / TM;
        f16vec4 h = f16vec4(conv_input_scaled() ? conv_scaled_half(ra[r], rs[r]) : ra[r]);
        uint at = mm * AS_STRIDE + 4u * j;
        As[g][at] = h.x;
        As[g][at + 1u] = h.y;
        As[g][at + 2u] = h.z;
        As[g][at + 3u] = h.w;
    }
    [[unroll]] for (uint r = 0u; r < B_PER; r++) {
        uint e = tid + r * GT;
        uint j = e % TKG4, nn = e / TKG4;
        f16vec4 h = f16vec4(rb[r]);
        uint at = nn * BS_STRIDE + 4u * j;
        Bs[g][at] = h.x;
        Bs[g][at + 1u] = h.y;
        Bs[g][at + 2u] = h.z;
        Bs[g][at + 3u] = h.w;
    }
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint g = tid / GT, gtid = tid % GT;
    uint sg = gtid / 32u;
    // Each subgroup of a group owns a TM/2 x TN/2 quarter: RB row blocks of 16 x CB column
    // blocks of 8.
    uint sm = (sg / 2u) * (TM / 2u), sn = (sg % 2u) * (TN / 2u);
    batch = gl_WorkGroupID.z;
    m0 = gl_WorkGroupID.x * TM;
    o0 = gl_WorkGroupID.y * TN;
    OW = pc.out_t.w;
    M = pc.out_t.h * OW;
    uint kh = pc.kernel & 0xFFFFu, kw = pc.kernel >> 16u;
    K4 = kh * kw * pc.in_t.c4;

    ACC acc[RB][CB];
    [[unroll]] for (uint i = 0u; i < RB; i++) {
        [[unroll]] for (uint j = 0u; j < CB; j++) {
            acc[i][j] = ACC(0.0);
        }
    }
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[RB];
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> b;
    // This group's part of each step: k0 + g * TKG4 on (past K4: zeros, the products add none).
    uint kg = g * TKG4;
    load_step(gtid, kg);
    for (uint k0 = 0u; k0 < K4; k0 += STEP4) {
        barrier();  // the previous step's products have read As and Bs
        store_step(g, gtid);
        barrier();
        if (k0 + STEP4 < K4) {
            load_step(gtid, k0 + STEP4 + kg);
        }
        [[unroll]] for (uint kk = 0u; kk < TKG; kk += 16u) {
            [[unroll]] for (uint i = 0u; i < RB; i++) {
                coopMatLoadNV(a[i], As[g], (sm + 16u * i) * AS_STRIDE + kk, AS_STRIDE, false);
            }
            [[unroll]] for (uint j = 0u; j < CB; j++) {
                coopMatLoadNV(b, Bs[g], (sn + 8u * j) * BS_STRIDE + kk, BS_STRIDE, true);
                [[unroll]] for (uint i = 0u; i < RB; i++) {
                    acc[i][j] = coopMatMulAddNV(a[i], b, acc[i][j]);
                }
            }
        }
    }
    // The groups' tiles summed, CS_COLS channels at a time: the last group stores its part, each
    // group before it in turn adds its own (element by element: the `+` operator crashes this
    // glslc's optimizer); the subgroups owning other channels wait.
    for (uint c0 = 0u; c0 < TN; c0 += CS_COLS) {
        bool mine = sn >= c0 && sn < c0 + CS_COLS;
        barrier();  // the previous channels' epilogue has read Cs
        if (g == KG - 1u && mine) {
            [[unroll]] for (uint i = 0u; i < RB; i++) {
                [[unroll]] for (uint j = 0u; j < CB; j++) {
                    coopMatStoreNV(acc[i][j], Cs, (sm + 16u * i) * CS_STRIDE + sn - c0 + 8u * j, CS_STRIDE, false);
                }
            }
        }
        for (int h = int(KG) - 2; h >= 0; h--) {
            barrier();
            if (g == uint(h) && mine) {
                ACC other;
                [[unroll]] for (uint i = 0u; i < RB; i++) {
                    [[unroll]] for (uint j = 0u; j < CB; j++) {
                        uint at = (sm + 16u * i) * CS_STRIDE + sn - c0 + 8u * j;
                        coopMatLoadNV(other, Cs, at, CS_STRIDE, false);
                        for (int e = 0; e < other.length(); e++) {
                            other[e] += acc[i][j][e];
                        }
                        coopMatStoreNV(other, Cs, at, CS_STRIDE, false);
                    }
                }
            }
        }
        barrier();
        // Epilogue: one output texel (a pixel's four channels) an invocation at a time.
        for (uint e = tid; e < TM * CS_COLS / 4u; e += KG * GT) {
            uint mm = e % TM, q = e / TM;
            uint m = m0 + mm, o = o0 + c0 + 4u * q;
            if (m >= M || o >= pc.out_t.c) continue;
            uint c = mm * CS_STRIDE + 4u * q;
            vec4 s = vec4(Cs[c], Cs[c + 1u], Cs[c + 2u], Cs[c + 3u]);
            uint oc4 = o / 4u;
            if (pc.b_off != 0xFFFFFFFFu) s += fetch_weight(pc.b_off + oc4);
            uint at = texel_index(pc.out_t, batch * pc.out_t.c4 + oc4, m / OW, m % OW);
            if ((pc.act & 0x200u) != 0u) s += LOAD_TEXEL(img_add, pc.out_t, at);
            vec4 v = apply_unary(pc.act & 0xFFu, pc.alpha, pc.beta, s);
            STORE_TEXEL(img_out, pc.out_t, at, zero_padding(pc.out_t, oc4, v));
        }
    }
}

#endif
