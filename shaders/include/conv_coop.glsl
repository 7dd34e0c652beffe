// Dense 2D convolution (groups == 1) as an implicit GEMM on cooperative matrices
// (VK_NV_cooperative_matrix: fp16 16x16 A times 16x8 B into fp32 16x8, subgroups of 32), with
// the fused bias, activation and addend of conv2d.comp and its push constants. The including
// shader sets the tile: TM pixels (a multiple of 16) x TN output channels (a multiple of 8) per
// workgroup, KC 16-deep chunks of k per step, SLOTS partial tiles in shared memory at once.
// GEMM: out[pixel m][channel o] = sum over k4 = tap * icg4 + i4 (4 input channels each) of
// in[m at tap][i4] . filter[o][k4], where the filter's texel is w_off + o * K4 + k4
// (vk_backend::layout::pack_conv_filter), so B's texels run contiguously along k.
// A workgroup computes one tile of one image of the batch (gl_WorkGroupID.z). Its 8 subgroups
// split the reduction (subgroup s takes steps s, s + 8, ...; a step is 4 * KC input texels),
// each stages its own A and B slices in shared memory and loads the next step's texels into
// registers while its matrix products run. The 8 partial tiles meet through shared memory, and
// the epilogue writes one output texel per invocation. (No `+` on cooperative matrices: glslc's
// optimizer crashes on it.)
#ifndef TEXSTREAM_CONV_COOP_GLSL
#define TEXSTREAM_CONV_COOP_GLSL

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "tensor.glsl"
#include "weights.glsl"
#include "activation.glsl"

#define SUBGROUPS 8u
layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);
TENSOR_IN(2, img_add);

#include "conv_push.glsl"
#include "conv_input_scale.glsl"
#ifdef SPLIT_K
#include "conv_partials.glsl"
#endif

#define TMB (TM / 16u)        // 16-pixel row blocks
#define TNB (TN / 8u)         // 8-channel column blocks
#define TKS (16u * KC)        // k per step
#define STEP_TEXELS (4u * KC) // input texels per step
#define NA (TM * STEP_TEXELS / 32u)  // A texels a lane loads per step
#define NB (TN * STEP_TEXELS / 32u)  // B texels a lane loads per step

// Per subgroup: A as [m][k] (row stride TKS), B as [n][k] (column-major loads, stride TKS).
shared float16_t As[SUBGROUPS * TM * TKS];
shared float16_t Bs[SUBGROUPS * TN * TKS];
// SLOTS subgroups' partial tiles at a time, [m][n] with row stride TN.
shared float Cs[SLOTS * TM * TN];

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>

// The texels a lane stages for one step (registers between the steps).
vec4 next_a[NA];
vec4 next_s[NA];  // the input scale's factors of each A texel (INPUT_SCALED pipelines only)
vec4 next_b[NB];

void load_slice(uint step, uint lane, uint n, uint m0, uint o0, uint K4) {
    uint kw = pc.kernel >> 16u;
    uint sh = pc.stride & 0xFFFFu, sw = pc.stride >> 16u;
    uint dh = pc.dilation & 0xFFFFu, dw = pc.dilation >> 16u;
    int pt = int(pc.pad & 0xFFFFu), pl = int(pc.pad >> 16u);
    uint OW = pc.out_t.w, M = pc.out_t.h * OW;
    uint icg4 = pc.in_t.c4;
    // A: lanes walk pixels (neighbouring lanes read neighbouring texels of a row).
    [[unroll]] for (uint r = 0u; r < NA; r++) {
        uint e = lane + 32u * r;
        uint mm = e % TM, j = e / TM;
        uint m = m0 + mm, k4 = step * STEP_TEXELS + j;
        vec4 v = vec4(0.0), f = vec4(1.0);
        if (m < M && k4 < K4) {
            uint tap = k4 / icg4, i4 = k4 % icg4;
            uint ky = tap / kw, kx = tap % kw;
            int iy = int((m / OW) * sh + ky * dh) - pt;
            int ix = int((m % OW) * sw + kx * dw) - pl;
            if (iy >= 0 && iy < int(pc.in_t.h) && ix >= 0 && ix < int(pc.in_t.w)) {
                v = LOAD_TEXEL(img_in, pc.in_t,
                               texel_index(pc.in_t, n * icg4 + i4, uint(iy), uint(ix)));
                if (conv_input_scaled()) f = conv_input_scale(n * icg4 + i4);
            }
        }
        next_a[r] = v;
        if (conv_input_scaled()) next_s[r] = f;
    }
    // B: lanes walk k4 within an output channel (contiguous texels of the filter).
    [[unroll]] for (uint r = 0u; r < NB; r++) {
        uint e = lane + 32u * r;
        uint j = e % STEP_TEXELS, nn = e / STEP_TEXELS;
        uint o = o0 + nn, k4 = step * STEP_TEXELS + j;
        next_b[r] = (o < pc.out_t.c && k4 < K4) ? fetch_weight(pc.w_off + o * K4 + k4) : vec4(0.0);
    }
}

void stage_slice(uint lane, uint abase, uint bbase) {
    [[unroll]] for (uint r = 0u; r < NA; r++) {
        uint e = lane + 32u * r;
        uint mm = e % TM, j = e / TM;
        f16vec4 h = f16vec4(conv_input_scaled() ? conv_scaled_half(next_a[r], next_s[r]) : next_a[r]);
        uint at = abase + mm * TKS + 4u * j;
        As[at] = h.x;
        As[at + 1u] = h.y;
        As[at + 2u] = h.z;
        As[at + 3u] = h.w;
    }
    [[unroll]] for (uint r = 0u; r < NB; r++) {
        uint e = lane + 32u * r;
        uint j = e % STEP_TEXELS, nn = e / STEP_TEXELS;
        f16vec4 h = f16vec4(next_b[r]);
        uint bt = bbase + nn * TKS + 4u * j;
        Bs[bt] = h.x;
        Bs[bt + 1u] = h.y;
        Bs[bt + 2u] = h.z;
        Bs[bt + 3u] = h.w;
    }
}

void main() {
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    uint m0 = gl_WorkGroupID.x * TM, o0 = gl_WorkGroupID.y * TN;
    uint kh = pc.kernel & 0xFFFFu, kw = pc.kernel >> 16u;
    uint K4 = kh * kw * pc.in_t.c4;
    uint steps = (K4 + STEP_TEXELS - 1u) / STEP_TEXELS;
#ifdef SPLIT_K
    // SPLIT_K (the `_splitk` kernels): this workgroup's span of the steps, gl_WorkGroupID.z =
    // image * spans + span.
    uint splits = conv_splits(), span = gl_WorkGroupID.z % splits;
    uint n = gl_WorkGroupID.z / splits;
    uint per = (steps + splits - 1u) / splits;
    uint s_begin = span * per, s_end = min(steps, s_begin + per);
#else
    uint n = gl_WorkGroupID.z;
    uint s_begin = 0u, s_end = steps;
#endif
    uint abase = sg * TM * TKS, bbase = sg * TN * TKS;

    ACC acc[TMB][TNB];
    [[unroll]] for (uint i = 0u; i < TMB; i++) {
        [[unroll]] for (uint j = 0u; j < TNB; j++) {
            acc[i][j] = ACC(0.0);
        }
    }
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[TMB];
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> b;

    // The loop's trip count is uniform within a subgroup, so subgroup barriers are safe in it.
    if (s_begin + sg < s_end) load_slice(s_begin + sg, lane, n, m0, o0, K4);
    for (uint step = s_begin + sg; step < s_end; step += SUBGROUPS) {
        stage_slice(lane, abase, bbase);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        if (step + SUBGROUPS < s_end) load_slice(step + SUBGROUPS, lane, n, m0, o0, K4);
        [[unroll]] for (uint kc = 0u; kc < KC; kc++) {
            [[unroll]] for (uint i = 0u; i < TMB; i++) {
                coopMatLoadNV(a[i], As, abase + 16u * i * TKS + 16u * kc, TKS, false);
            }
            [[unroll]] for (uint j = 0u; j < TNB; j++) {
                coopMatLoadNV(b, Bs, bbase + 8u * j * TKS + 16u * kc, TKS, true);
                [[unroll]] for (uint i = 0u; i < TMB; i++) {
                    acc[i][j] = coopMatMulAddNV(a[i], b, acc[i][j]);
                }
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
    }

    // The 8 partial tiles meet SLOTS at a time; invocation t sums the 4 values of its output
    // texel (pixel t % TM, channels 4 * (t / TM) ..).
    uint t = gl_LocalInvocationID.x;
    uint mm = t % TM, q = t / TM;
    bool holds = t < TM * TN / 4u;
    vec4 s = vec4(0.0);
    for (uint round_ = 0u; round_ < SUBGROUPS / SLOTS; round_++) {
        if (sg / SLOTS == round_) {
            uint slot = (sg % SLOTS) * TM * TN;
            [[unroll]] for (uint i = 0u; i < TMB; i++) {
                [[unroll]] for (uint j = 0u; j < TNB; j++) {
                    coopMatStoreNV(acc[i][j], Cs, slot + 16u * i * TN + 8u * j, TN, false);
                }
            }
        }
        barrier();
        for (uint slot = 0u; holds && slot < SLOTS; slot++) {
            uint at = slot * TM * TN + mm * TN + 4u * q;
            s += vec4(Cs[at], Cs[at + 1u], Cs[at + 2u], Cs[at + 3u]);
        }
        barrier();
    }

    // Epilogue: one output texel per invocation.
    uint m = m0 + mm, o = o0 + 4u * q;
    uint OW = pc.out_t.w;
    if (!holds || m >= pc.out_t.h * OW || o >= pc.out_t.c) return;
    uint oc4 = o / 4u;
#ifdef SPLIT_K
    // The span's sum as it is: the combine adds the bias and the addend and applies the
    // activation to the spans' total.
    store_partial(conv_partial_index(span, gl_NumWorkGroups.z / splits, n, m, oc4), s);
    return;
#endif
    if (pc.b_off != 0xFFFFFFFFu) s += fetch_weight(pc.b_off + oc4);
    uint at = texel_index(pc.out_t, n * pc.out_t.c4 + oc4, m / OW, m % OW);
    if ((pc.act & 0x200u) != 0u) s += LOAD_TEXEL(img_add, pc.out_t, at);
    vec4 v = apply_unary(pc.act & 0xFFu, pc.alpha, pc.beta, s);
    STORE_TEXEL(img_out, pc.out_t, at, zero_padding(pc.out_t, oc4, v));
}

#endif
