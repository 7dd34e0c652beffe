// Body of matmul_const_coop.comp (B packed [K, N]) and matmul_const_coop_rows.comp (ROWS_B: B
// stored by rows, B^T). See matmul_const_coop.comp. SPLIT_K (the `_splitk` variants): the
// reduction is split into spans over workgroups (gl_WorkGroupID.z = layer * splits + span, the
// splits in flags bits 24-29 as splits - 1), and each span's tile goes to the fp32 partial
// results (include/matmul_partials.glsl) unscaled, for matmul_splitk_combine.comp to sum and
// finish.
#ifndef TEXSTREAM_MATMUL_COOP_BODY_GLSL
#define TEXSTREAM_MATMUL_COOP_BODY_GLSL
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "tensor.glsl"
#include "activation.glsl"
#include "weights.glsl"

// KG K groups of 128 invocations (four subgroups each): each step's K range is split between
// them, each group stages its part and multiplies it into its own accumulators, and the groups'
// tiles are summed through shared memory at the end. A 64x64 tile leaves an H200 with one or two
// workgroups a streaming multiprocessor (a prefill's projections have 16 to 208 tiles), and with
// one group each scheduler then had a single subgroup that waited out every latency alone: with
// every load and product switched off, its K loop still took 200 us of a 390 us projection
// (session 25, run 5). Two groups: 376 -> 344 us; four: 153 us (runs 8, 9). KG is 4 unless the
// build defines it (2 for experiments; TK / KG must stay a multiple of 16).
#ifndef KG
#define KG 4            // K groups (2 or 4)
#endif
#if KG == 4
layout(local_size_x = 512) in;
#else
layout(local_size_x = 256) in;
#endif

TENSOR_IN(0, img_a);
TENSOR_OUT(1, img_out);

#include "matmul_common.glsl"
// The epilogue (alpha, the bias through fetch_weight, the activation, the store).
#define MATMUL_WEIGHTS
#include "matmul_store.glsl"
#ifdef SPLIT_K
#include "matmul_partials.glsl"
#endif

// Output rows a tile: 64, or 32 (matmul_const_coop_m32.comp, matmul_const_coop_rows_m32.comp)
// where a MatMul has fewer 64-row tiles than the device has multiprocessors.
#ifndef TM
#define TM 64u
#endif
// Output columns a tile: 64, or 96 (matmul_const_coop_pa_n96.comp) where 64-column tiles
// would overfill the device's first wave by a little and 96-column ones fit it.
#ifndef TN
#define TN 64u
#endif
#define RB (TM / 32u)   // row blocks of 16 a subgroup owns
#define CB (TN / 16u)   // column blocks of 8 a subgroup owns (two subgroups across a tile)
#define GT 128u         // invocations a group
// DEEP_STEP (the `_k128` variants): 128 k a step, twice the loads in flight and half the
// barriers; the groups' tiles are then summed half a tile at a time so that shared memory still
// fits 48 KiB.
#ifdef DEEP_STEP
#define TKG (128u / KG)
#define CS_COLS 32u
#else
#define TKG (64u / KG)  // k a group takes a step
#ifndef CS_COLS
#define CS_COLS TN
#endif
#endif
#define TK (KG * TKG)   // k a step
// Values of A and texels of B each invocation loads a step. PACKED_A (the `_pa` variants): A
// was copied to [4, K/4, M] first (texel (m, k/4) holding k..k+3 of row m), so a step's A is a
// quarter of the texels.
#ifdef PACKED_A
#define A_PER (TM * TKG / 4u / GT)
#else
#define A_PER (TM * TKG / GT)
#endif
#define B_PER (TKG / 4u * TN / GT)

// Row strides padded by 16 bytes: a tensor-core load reads eight 16-byte rows at a time, and
// rows a multiple of 128 bytes apart all start in the same shared-memory banks (an eight-way
// conflict on every load); 80 or 144 bytes apart they take eight different bank groups.
#define AS_STRIDE (TKG + 8u)
#ifdef ROWS_B
#define BS_STRIDE (TKG + 8u)
#define BS_SIZE (TN * BS_STRIDE)
#else
#define BS_STRIDE (TN + 8u)
#define BS_SIZE (TKG * BS_STRIDE)
#endif
#define CS_STRIDE (CS_COLS + 4u)
shared float16_t As[KG][TM * AS_STRIDE]; // per group [m][k]
shared float16_t Bs[KG][BS_SIZE];        // per group [k][n]; ROWS_B: [n][k]
shared float Cs[TM * CS_STRIDE];         // [m][n - c0] of columns c0.. c0 + CS_COLS

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>

uint M, N, K, a_layer, m0, n0;
#ifdef PACKED_A
vec4 ra[A_PER];
#else
float ra[A_PER];
#endif
vec4 rb[B_PER];

// Issues the loads of this group's K range from k0 into ra / rb (all of them before any is
// used); tid is the invocation's index in its group.
void load_step(uint tid, uint k0) {
    [[unroll]] for (uint r = 0u; r < A_PER; r++) {
        uint e = tid + r * GT;
#ifdef PACKED_A
        // Consecutive invocations walk m, consecutive texels of one texel row.
        uint m = m0 + e % TM, k = k0 + 4u * (e / TM);
        ra[r] = LOAD_AT(img_a, pc.a_t, 0u, min(k, K - 1u) / 4u, min(m, M - 1u));
#else
        uint m = m0 + e / TKG, k = k0 + e % TKG;
        // Out of range: a valid texel, its value dropped below.
        ra[r] = LOAD_AT(img_a, pc.a_t, a_layer, min(m, M - 1u), min(k, K - 1u)).x;
#endif
    }
    WeightLoc loc[B_PER];
    [[unroll]] for (uint r = 0u; r < B_PER; r++) {
        uint e = tid + r * GT;
#ifdef ROWS_B
        // Texel (n/4, k): consecutive invocations walk k, consecutive texels.
        uint n = min(n0 + 4u * (e / TKG), N - 1u), k = min(k0 + e % TKG, K - 1u);
        loc[r] = weight_locate(pc.b_t.n + (n / 4u) * K + k);
#else
        uint n = min(n0 + e % TN, N - 1u), kb = min(k0 + 4u * (e / TN), K - 1u) & ~3u;
        loc[r] = weight_locate(pc.b_t.n + (kb / 4u) * N + n);
#endif
    }
    // B's texels are used as loaded, without weight_finish: the recorder runs a compensated B
    // on the portable kernels (kernels::matmul), and an unmapped page, a scheduling bug, reads
    // slot 0 (in bounds), as an evicted page's stale entry does. Finishing every texel here made
    // each step wait for its weight loads before its products, and finishing at the store cost
    // registers or branches: on an H200 (session 35, run 1) the Whisper-tiny encoder's MatMuls
    // took 1.28 ms finished here, 1.20 finished at the store, 1.11 unfinished; the 1.34 B
    // prefill's 12.17, 10.27 and 9.20.
    [[unroll]] for (uint r = 0u; r < B_PER; r++) {
        rb[r] = imageLoad(weight_atlas, loc[r].at);
    }
}

// Writes the loaded values to group g's shared memory as fp16, zero outside the matrices.
void store_step(uint g, uint tid, uint k0) {
    [[unroll]] for (uint r = 0u; r < A_PER; r++) {
        uint e = tid + r * GT;
#ifdef PACKED_A
        uint mm = e % TM, kk = 4u * (e / TM);
        bool row = m0 + mm < M;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            bool inside = row && k0 + kk + j < K;
            As[g][mm * AS_STRIDE + kk + j] = float16_t(inside ? ra[r][j] : 0.0);
        }
#else
        bool inside = m0 + e / TKG < M && k0 + e % TKG < K;
        As[g][(e / TKG) * AS_STRIDE + e % TKG] = float16_t(inside ? ra[r] : 0.0);
#endif
    }
    [[unroll]] for (uint r = 0u; r < B_PER; r++) {
        uint e = tid + r * GT;
#ifdef ROWS_B
        // Four columns of one k: stored [n][k], so consecutive invocations write consecutive
        // halves (the tensor-core loads read it column-major).
        uint n4 = e / TKG, kk = e % TKG;
        bool row = k0 + kk < K;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            bool inside = row && n0 + 4u * n4 + j < N;
            Bs[g][(4u * n4 + j) * BS_STRIDE + kk] = float16_t(inside ? rb[r][j] : 0.0);
        }
#else
        uint k4 = e / TN, nn = e % TN;
        bool col = n0 + nn < N;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            bool inside = col && k0 + 4u * k4 + j < K;
            Bs[g][(4u * k4 + j) * BS_STRIDE + nn] = float16_t(inside ? rb[r][j] : 0.0);
        }
#endif
    }
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint g = tid / GT, gtid = tid % GT;
    uint sg = gtid / 32u;
    // Each subgroup of a group owns a TM/2 x TN/2 quarter: RB row blocks of 16 x CB column
    // blocks of 8.
    uint sm = (sg / 2u) * (TM / 2u), sn = (sg % 2u) * (TN / 2u);
    m0 = gl_WorkGroupID.y * TM;
    n0 = gl_WorkGroupID.x * TN;
#ifdef SPLIT_K
    bool packed_out = false;
#else
    bool packed_out = (pc.flags & PACKED_OUT) != 0u;
#endif
    // A packed output's descriptor is [4, N/4, M]'s.
    M = packed_out ? pc.out_t.w : pc.out_t.h;
    N = packed_out ? 4u * pc.out_t.h : pc.out_t.w;
    K = pc.k;
#ifdef SPLIT_K
    // This workgroup's span of whole steps: [k_begin, k_end).
    uint splits = partial_splits(), span = gl_WorkGroupID.z % splits;
    uint layer = gl_WorkGroupID.z / splits;
    uint per = ((K + TK - 1u) / TK + splits - 1u) / splits * TK;
    uint k_begin = span * per, k_end = min(K, k_begin + per);
#else
    uint layer = gl_WorkGroupID.z;
    uint k_begin = 0u, k_end = K;
#endif
    a_layer = operand_layer(pc.a_t, pc.flags & 15u, layer / pc.out_t.c4, 0u);

    ACC acc[RB][CB];
    [[unroll]] for (uint i = 0u; i < RB; i++) {
        [[unroll]] for (uint j = 0u; j < CB; j++) {
            acc[i][j] = ACC(0.0);
        }
    }
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[RB];
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> b;
    // This group's part of each step: k0 + g * TKG on (past K: zeros, the products add none).
    uint kg = g * TKG;
    load_step(gtid, k_begin + kg);
    for (uint k0 = k_begin; k0 < k_end; k0 += TK) {
        barrier(); // the previous step's products have read As and Bs
        store_step(g, gtid, k0 + kg);
        barrier();
        if (k0 + TK < k_end) {
            load_step(gtid, k0 + TK + kg);
        }
        [[unroll]] for (uint kk = 0u; kk < TKG; kk += 16u) {
            [[unroll]] for (uint i = 0u; i < RB; i++) {
                coopMatLoadNV(a[i], As[g], (sm + 16u * i) * AS_STRIDE + kk, AS_STRIDE, false);
            }
            [[unroll]] for (uint j = 0u; j < CB; j++) {
#ifdef ROWS_B
                coopMatLoadNV(b, Bs[g], (sn + 8u * j) * BS_STRIDE + kk, BS_STRIDE, true);
#else
                coopMatLoadNV(b, Bs[g], kk * BS_STRIDE + sn + 8u * j, BS_STRIDE, false);
#endif
                [[unroll]] for (uint i = 0u; i < RB; i++) {
                    acc[i][j] = coopMatMulAddNV(a[i], b, acc[i][j]);
                }
            }
        }
    }
    // The groups' tiles summed, CS_COLS columns at a time: the last group stores its part, each
    // group before it in turn adds its own to it; the subgroups owning other columns wait.
    for (uint c0 = 0u; c0 < TN; c0 += CS_COLS) {
        bool mine = sn >= c0 && sn < c0 + CS_COLS;
        barrier(); // the previous columns' outputs have read Cs
        if (g == KG - 1 && mine) {
            [[unroll]] for (uint i = 0u; i < RB; i++) {
                [[unroll]] for (uint j = 0u; j < CB; j++) {
                    coopMatStoreNV(acc[i][j], Cs, (sm + 16u * i) * CS_STRIDE + sn - c0 + 8u * j, CS_STRIDE, false);
                }
            }
        }
        for (int h = KG - 2; h >= 0; h--) {
            barrier();
            if (g == uint(h) && mine) {
                ACC other;
                [[unroll]] for (uint i = 0u; i < RB; i++) {
                    [[unroll]] for (uint j = 0u; j < CB; j++) {
                        uint at = (sm + 16u * i) * CS_STRIDE + sn - c0 + 8u * j;
                        coopMatLoadNV(other, Cs, at, CS_STRIDE, false);
                        // Element by element (the same element of two matrices of one type is
                        // the same position; the `+` operator crashes this glslc's optimizer).
                        for (int e = 0; e < other.length(); e++) {
                            other[e] += acc[i][j][e];
                        }
                        coopMatStoreNV(other, Cs, at, CS_STRIDE, false);
                    }
                }
            }
        }
        barrier();
#ifdef SPLIT_K
        // Four columns an invocation, one partial texel, as they are (no alpha, bias or
        // activation: the combine applies them to the sum).
        for (uint e = tid; e < TM * CS_COLS / 4u; e += KG * GT) {
            uint mm = e / (CS_COLS / 4u), n4 = e % (CS_COLS / 4u);
            uint m = m0 + mm, n = n0 + c0 + 4u * n4;
            if (m >= M || n >= N) continue;
            uint at = mm * CS_STRIDE + 4u * n4;
            vec4 v = vec4(Cs[at], Cs[at + 1u], Cs[at + 2u], Cs[at + 3u]);
            store_partial(partial_index(span, gl_NumWorkGroups.z / splits, layer, m, n / 4u), v);
        }
        continue;
#endif
        if (packed_out) {
            // Four columns an invocation, one texel (m, n/4) of the next MatMul's packed A;
            // consecutive invocations walk m, along a texel row.
            for (uint e = tid; e < TM * CS_COLS / 4u; e += KG * GT) {
                uint mm = e % TM, n4 = e / TM;
                uint m = m0 + mm, n = n0 + c0 + 4u * n4;
                if (m >= M || n >= N) continue;
                uint at = mm * CS_STRIDE + 4u * n4;
                store_out_packed(m, n, N, vec4(Cs[at], Cs[at + 1u], Cs[at + 2u], Cs[at + 3u]));
            }
            continue;
        }
        for (uint r = 0u; r < TM * CS_COLS / (KG * GT); r++) {
            uint e = tid + r * (KG * GT);
            uint mm = e / CS_COLS, nn = e % CS_COLS;
            uint m = m0 + mm, n = n0 + c0 + nn;
            if (m >= M || n >= N) continue;
            store_out(layer, 0u, m, n, vec4(Cs[mm * CS_STRIDE + nn], 0.0, 0.0, 0.0));
        }
    }
}

#endif
