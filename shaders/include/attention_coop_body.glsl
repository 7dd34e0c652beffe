// Body of attention_coop.comp (every key of a query row in one workgroup) and
// attention_coop_split.comp (SPLIT_KEYS: the keys split into spans over workgroups, each span's
// partial results stored for attention_combine.comp, as attention_decode_split.comp does).
// See attention_coop.comp.
#ifndef TEXSTREAM_ATTENTION_COOP_BODY_GLSL
#define TEXSTREAM_ATTENTION_COOP_BODY_GLSL
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_shuffle : require
#ifdef ONE_PASS
#extension GL_KHR_shader_subgroup_vote : require
// How far a block's max may pass the max in use before the accumulators are rescaled (natural
// log units: P stays below e^8, about 2981).
#define RESCALE_MARGIN 8.0
#endif
#include "attention_io.glsl"
#ifdef SPLIT_KEYS
#include "attention_partials.glsl"
#endif

// QB blocks of BQ query rows a head lane (attention_coop_wide.comp: 4, attention_coop_wide3.comp:
// 3, head dims up to 64): the staged keys and values serve QB times the rows, and a workgroup's
// barriers as many subgroups.
#ifndef QB
#define QB 1
#endif
#define QBU uint(QB)
#ifndef MAXD
#define MAXD 128u
#endif
layout(local_size_x = 128 * QB) in;

#define BQ 16u
#define BK 16u
// Lanes (heads) a workgroup takes; subgroup s is head lane s % LANES of query block s / LANES.
#define LANES 4u
#define SUBGROUPS (LANES * QBU)
// A subgroup's own score and P rows (ss[sg], ps[sg]) are written and read by that subgroup
// alone: a subgroup barrier orders them, and a key block takes two workgroup barriers (its keys
// and values staged, then read by every subgroup) where it took four. With the rotated keys
// below, that took an H100's Whisper-tiny encoder attention from 221 to 205 us a layer
// (session 37, run 2).
#define OWN_ROWS_SYNC()                                                                \
    {                                                                                  \
        subgroupMemoryBarrierShared();                                                 \
        subgroupBarrier();                                                             \
    }
// Key j of the eight an invocation takes in row r, rotated by the row: the row's two
// invocations and their neighbours then read the score rows (and write P's) in different
// shared-memory banks at each step (2-way conflicts where the plain order made 8-way ones).
#define ROT(j) (((j) + r) & 7u)
// Row strides in shared memory, padded by 16 bytes: a tensor-core load reads eight 16-byte rows
// at a time, and rows a multiple of 128 bytes apart start in the same banks (an eight-way
// conflict on every load). P's rows are left unpadded with four blocks (a two-way conflict),
// to stay within 48 KiB.
#define KS (MAXD + 8u)
#if QB >= 4
#define PS BK
#else
#define PS (BK + 8u)
#endif

// Per head lane: K block [key][d] and V block [key][dv] (row stride KS; Q's 16 rows of each
// query block in turn are staged in the K region before the loop and the output's after it);
// per subgroup: scores [row][key] and P [row][key] (stride PS). 41.5 KiB in all at QB 1 and
// MAXD 128, 41.3 KiB at QB 3 and 45 KiB at QB 4 with MAXD 64, within a 48 KiB workgroup.
shared float16_t ks[LANES][BK * KS];
shared float16_t vs[LANES][BK * KS];
shared float ss[SUBGROUPS][BQ * BK];
shared float16_t ps[SUBGROUPS][BQ * PS];
shared float row_max[SUBGROUPS][BQ];
shared float row_sum[SUBGROUPS][BQ];
// 1 / row_sum, or 0 where nothing was summed.
shared float row_inv[SUBGROUPS][BQ];

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>
#define MAT_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define MAT_B fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>
// An fp32 accumulator converted to fp16 (the output's precision).
#define MAT_H fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>

// This workgroup's keys are [k_begin, k_end): all of them, or one span under SPLIT_KEYS. Its
// query rows start at sq0; this subgroup's (sg: head lane `lane` of query block `qb`) at rq0.
uint tid, sg, lane, qb, sub_lane, layer, sq0, rq0, split, k_begin, k_end, d, dv, dp, dvp;
TensorDesc tq, tk, tv, tm;
uvec4 kv_head, kv_layer;
bool k_rows, has_mask;
// Every lane reads its own lane of one key/value texel layer (no grouped heads across texels):
// a key's texel is the four lanes' values as they are.
bool plain_kv;
// K and V written packed by their projections (is_packed): staged a head's four values a fetch.
bool packed_kv;
// Lanes of this texel layer whose query heads exist (4 but in the last layer of H % 4 heads).
uint live_lanes;
uint m_layer;

// Element (key, x) of K for each head lane: x < d, key in the span. One texel load serves every lane
// whose key/value head sits in the same texel layer (all four without grouping; with groups of
// four heads sharing one key head, one texel lane for all).
vec4 load_key(uint key, uint x) {
    if (is_split(SPLIT_K)) {
        vec4 r;
        for (uint l = 0u; l < LANES; l++) {
            r[l] = key_element(tk, kv_head[l], kv_layer[l], key, x);
        }
        return r;
    }
    vec4 t0 = k_rows ? LOAD_AT(img_k, tk, kv_layer[0], key, x) : LOAD_AT(img_k, tk, kv_layer[0], x, key);
    if (plain_kv) {
        return t0;
    }
    vec4 r;
    for (uint l = 0u; l < LANES; l++) {
        vec4 t = t0;
        if (kv_layer[l] != kv_layer[0]) {
            t = k_rows ? LOAD_AT(img_k, tk, kv_layer[l], key, x) : LOAD_AT(img_k, tk, kv_layer[l], x, key);
        }
        r[l] = t[kv_head[l] % 4u];
    }
    return r;
}

vec4 load_value(uint key, uint x) {
    if (is_split(SPLIT_V)) {
        vec4 r;
        for (uint l = 0u; l < LANES; l++) {
            r[l] = value_element(tv, kv_head[l], kv_layer[l], key, x);
        }
        return r;
    }
    vec4 t0 = LOAD_AT(img_v, tv, kv_layer[0], key, x);
    if (plain_kv) {
        return t0;
    }
    vec4 r;
    for (uint l = 0u; l < LANES; l++) {
        vec4 t = t0;
        if (kv_layer[l] != kv_layer[0]) {
            t = LOAD_AT(img_v, tv, kv_layer[l], key, x);
        }
        r[l] = t[kv_head[l] % 4u];
    }
    return r;
}

// Stages keys k0.. (and their values) for every lane, zero past the span and past the head dims.
// STAGE_PER_KEY invocations a key (8 at QB 1, 24 at QB 3, 32 at QB 4: every invocation of the
// workgroup), invocation t taking key t / STAGE_PER_KEY and every STAGE_PER_KEY-th head-dim
// texel from t % STAGE_PER_KEY: no divisions by the head dims, neighbouring texels of one key
// row a load. At QB 3 and 4 (head dims up to 64: three or two texels an invocation) every load
// is issued before any store, so their latencies overlap (a split operand takes four loads a texel, one a head
// lane). On an H200 (session 31, run 1) that took the Whisper-tiny encoder's attention from 461
// to 291 us a layer, where the first 128 invocations had staged alone, one texel at a time. At
// QB 1 the same unrolled loads were slower (BERT-base 40 -> 48 us, the 1.34 B prefill's 84 ->
// 102), so it keeps the loop.
#define STAGE_PER_KEY (128u * QBU / BK)
// The one-pass kernels at QB 3 and 4 load each key block while the block before it is
// multiplied (NO_ATTENTION_PREFETCH, for experiments, stages each block after the last).
#if defined(ONE_PASS) && QB >= 3 && !defined(NO_ATTENTION_PREFETCH)
#define ATTENTION_PREFETCH
#endif
#define STAGE_ITERS ((MAXD + STAGE_PER_KEY - 1u) / STAGE_PER_KEY)
// Packed K and V (packed_kv): unit x of a key's dp (K) or dvp (V) is texel x % (dims / 4) of
// lane x / (dims / 4)'s head row, zero past the span, the head dims and the heads. The same
// count of units as a split key's dims, so the staging loops keep their bounds.
vec4 packed_kv_texel(bool value, uint key, uint x) {
    uint dims = value ? dvp : dp, per = dims / 4u, l = x / per, x4 = x % per;
    uint real = value ? dv : d;
    if (key >= k_end || x >= dims || 4u * x4 >= real || l >= live_lanes) {
        return vec4(0.0);
    }
    return value ? LOAD_AT(img_v, tv, 0u, kv_head[l] * dv / 4u + x4, key)
                 : LOAD_AT(img_k, tk, 0u, kv_head[l] * d / 4u + x4, key);
}

// This invocation's key row j of a block and its first unit x0 (then every STAGE_PER_KEY-th).
// Split rows: consecutive invocations walk one key's units, along the key's texel row. Packed:
// consecutive invocations walk the block's keys, along a packed texel row (keys are its x):
// walking units down a packed column made the Whisper-tiny encoder's attention slower than
// split rows (209 -> 263 us a layer on an H100, session 39, run 3).
uvec2 stage_unit() {
    return packed_kv ? uvec2(tid % BK, tid / BK) : uvec2(tid / STAGE_PER_KEY, tid % STAGE_PER_KEY);
}

// Writes packed unit x of key row j (packed_kv_texel's) to its lane's row.
void store_packed_unit(bool value, uint j, uint x, vec4 t) {
    uint dims = value ? dvp : dp, per = dims / 4u;
    if (x >= dims) {
        return;
    }
    uint l = x / per, at = j * KS + 4u * (x % per);
    [[unroll]] for (uint c = 0u; c < 4u; c++) {
        if (value) {
            vs[l][at + c] = float16_t(t[c]);
        } else {
            ks[l][at + c] = float16_t(t[c]);
        }
    }
}

#if QB >= 3
// A key block's texels as loaded (zero past the span and the head dims), held in registers
// between load_block and store_block.
vec4 block_k[STAGE_ITERS], block_v[STAGE_ITERS];

// Issues every key (and value) load of the block at k0 before any is used, so that all their
// latencies overlap; the one-pass loop issues the next block's while it multiplies this one's
// (ATTENTION_PREFETCH).
void load_block(uint k0, bool values) {
    uvec2 unit = stage_unit();
    uint key = k0 + unit.x, x0 = unit.y;
    bool in_span = key < k_end;
    if (packed_kv) {
        [[unroll]] for (uint i = 0u; i < STAGE_ITERS; i++) {
            block_k[i] = packed_kv_texel(false, key, x0 + i * STAGE_PER_KEY);
        }
        if (values) {
            [[unroll]] for (uint i = 0u; i < STAGE_ITERS; i++) {
                block_v[i] = packed_kv_texel(true, key, x0 + i * STAGE_PER_KEY);
            }
        }
        return;
    }
    [[unroll]] for (uint i = 0u; i < STAGE_ITERS; i++) {
        uint x = x0 + i * STAGE_PER_KEY;
        block_k[i] = (in_span && x < d) ? load_key(key, x) : vec4(0.0);
    }
    if (values) {
        [[unroll]] for (uint i = 0u; i < STAGE_ITERS; i++) {
            uint x = x0 + i * STAGE_PER_KEY;
            block_v[i] = (in_span && x < dv) ? load_value(key, x) : vec4(0.0);
        }
    }
}

// Writes the loaded block to every lane's rows in shared memory.
void store_block(bool values) {
    uvec2 unit = stage_unit();
    uint j = unit.x, x0 = unit.y;
    if (packed_kv) {
        [[unroll]] for (uint i = 0u; i < STAGE_ITERS; i++) {
            store_packed_unit(false, j, x0 + i * STAGE_PER_KEY, block_k[i]);
        }
        if (values) {
            [[unroll]] for (uint i = 0u; i < STAGE_ITERS; i++) {
                store_packed_unit(true, j, x0 + i * STAGE_PER_KEY, block_v[i]);
            }
        }
        return;
    }
    [[unroll]] for (uint i = 0u; i < STAGE_ITERS; i++) {
        uint x = x0 + i * STAGE_PER_KEY;
        if (x < dp) {
            for (uint l = 0u; l < LANES; l++) {
                ks[l][j * KS + x] = float16_t(block_k[i][l]);
            }
        }
    }
    if (!values) {
        return;
    }
    [[unroll]] for (uint i = 0u; i < STAGE_ITERS; i++) {
        uint x = x0 + i * STAGE_PER_KEY;
        if (x < dvp) {
            for (uint l = 0u; l < LANES; l++) {
                vs[l][j * KS + x] = float16_t(block_v[i][l]);
            }
        }
    }
}
#endif

void stage_keys(uint k0, bool values) {
#if QB >= 3
    load_block(k0, values);
    store_block(values);
#else
    uvec2 unit = stage_unit();
    uint j = unit.x, key = k0 + j, x0 = unit.y;
    bool in_span = key < k_end;
    if (packed_kv) {
        for (uint x = x0; x < dp; x += STAGE_PER_KEY) {
            store_packed_unit(false, j, x, packed_kv_texel(false, key, x));
        }
        if (values) {
            for (uint x = x0; x < dvp; x += STAGE_PER_KEY) {
                store_packed_unit(true, j, x, packed_kv_texel(true, key, x));
            }
        }
        return;
    }
    for (uint x = x0; x < dp; x += STAGE_PER_KEY) {
        vec4 kv = (in_span && x < d) ? load_key(key, x) : vec4(0.0);
        for (uint l = 0u; l < LANES; l++) {
            ks[l][j * KS + x] = float16_t(kv[l]);
        }
    }
    if (!values) {
        return;
    }
    for (uint x = x0; x < dvp; x += STAGE_PER_KEY) {
        vec4 vv = (in_span && x < dv) ? load_value(key, x) : vec4(0.0);
        for (uint l = 0u; l < LANES; l++) {
            vs[l][j * KS + x] = float16_t(vv[l]);
        }
    }
#endif
}

// Scores of this lane's 16 rows against the staged keys into ss (unscaled, unmasked). A macro
// over main's qa, not a function taking the array, and loops over constant bounds (the head
// dims guard inside): every index into qa and the accumulators is then a constant after
// unrolling, so they can stay in registers.
#define SCORE_BLOCK()                                                                  \
    {                                                                                  \
        ACC s[2];                                                                      \
        s[0] = ACC(0.0);                                                               \
        s[1] = ACC(0.0);                                                               \
        MAT_B kb;                                                                      \
        [[unroll]] for (uint c = 0u; c < MAXD / 16u; c++) {                            \
            if (16u * c < dp) {                                                        \
                [[unroll]] for (uint j = 0u; j < 2u; j++) {                            \
                    /* K^T as B: element (d, key) at ks[key * KS + d], column-major. */   \
                    coopMatLoadNV(kb, ks[lane], (8u * j) * KS + 16u * c, KS, true);     \
                    s[j] = coopMatMulAddNV(qa[c], kb, s[j]);                           \
                }                                                                      \
            }                                                                          \
        }                                                                              \
        for (uint j = 0u; j < 2u; j++) {                                               \
            coopMatStoreNV(s[j], ss[sg], 8u * j, BK, false);                           \
        }                                                                              \
    }

// The scaled, masked score of row r against key k0 + j (-inf past the span).
float score(uint r, uint k0, uint j) {
    uint key = k0 + j;
    if (key >= k_end) {
        return uintBitsToFloat(0xFF800000u);
    }
    float s = ss[sg][r * BK + j] * pc.scale;
    if (has_mask) {
        uint m_row = pc.m.x == 1u ? 0u : rq0 + r;
        vec4 mv = LOAD_AT(img_mask, tm, m_layer, min(m_row, pc.m.x - 1u), key);
        s += pc.mc == 1u ? mv.x : mv[lane];
    }
    return s;
}

void main() {
    tid = gl_LocalInvocationID.x;
    sg = tid / 32u;
    lane = sg % LANES;
    qb = sg / LANES;
    sub_lane = tid % 32u;
    uint c4 = (pc.c + 3u) / 4u;
    uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    layer = group / pc.groups_per_layer;
    if (layer >= pc.n * c4) {
        return; // whole workgroup
    }
    uint g = group % pc.groups_per_layer;
#ifdef SPLIT_KEYS
    split = g % pc.splits;
    sq0 = (g / pc.splits) * (BQ * QBU);
    k_begin = split * pc.split_keys;
    k_end = min(pc.v.x, k_begin + pc.split_keys);
#else
    split = 0u;
    sq0 = g * (BQ * QBU);
    k_begin = 0u;
    k_end = pc.v.x;
#endif
    d = pc.q.y;
    dv = pc.v.y;
    dp = (d + 15u) & ~15u;
    dvp = (dv + 7u) & ~7u;
    tq = operand_desc(pc.q, pc.c, SPLIT_Q);
    tk = operand_desc(pc.k, pc.kvc, SPLIT_K);
    tv = operand_desc(pc.v, pc.kvc, SPLIT_V);
    tm = mask_desc();
    has_mask = (pc.flags & 1u) != 0u;
    k_rows = (pc.flags & 2u) != 0u;
    uint n_i = layer / c4, c4_i = layer % c4;
    kv_heads(n_i, c4_i, kv_head, kv_layer);
    plain_kv = all(equal(kv_layer, uvec4(kv_layer[0]))) && all(equal(kv_head % 4u, uvec4(0u, 1u, 2u, 3u)));
#ifdef PACKED_KV_ONLY
    packed_kv = true; // experiments: the split-rows staging compiled out
#else
    packed_kv = is_packed(SPLIT_K) && is_packed(SPLIT_V);
#endif
    live_lanes = min(4u, pc.c - 4u * c4_i);
    m_layer = mask_layer(n_i, c4_i);
    rq0 = sq0 + qb * BQ;

    // Each query block's rows in turn, each lane's head, into the K region; then into that
    // block's subgroups' registers for both passes.
    MAT_A qa[MAXD / 16u];
    for (uint blk = 0u; blk < QBU; blk++) {
        for (uint e = tid; e < BQ * dp; e += 128u * QBU) {
            uint r = e / dp, x = e % dp, sq = sq0 + blk * BQ + r;
            vec4 qv = (sq < pc.q.x && x < d) ? query_texel(tq, layer, sq, x) : vec4(0.0);
            for (uint l = 0u; l < LANES; l++) {
                ks[l][r * KS + x] = float16_t(qv[l]);
            }
        }
        barrier();
        if (qb == blk) {
            [[unroll]] for (uint c = 0u; c < MAXD / 16u; c++) {
                if (16u * c < dp) {
                    coopMatLoadNV(qa[c], ks[lane], 16u * c, KS, false);
                }
            }
        }
        barrier();
    }
#ifdef ONE_PASS
// Accumulators c and c + 1 (16 x 16 in fp32) into this subgroup's score rows in ss, row stride
// BK, once every invocation of the subgroup is done with what ss held; a macro over main's o
// (as SCORE_BLOCK) so that the accumulator indices stay constants after unrolling.
#define SPILL_PAIR(c)                                                 \
    {                                                                 \
        subgroupMemoryBarrierShared();                                \
        subgroupBarrier();                                            \
        coopMatStoreNV(o[c], ss[sg], 0u, BK, false);                  \
        coopMatStoreNV(o[(c) + 1u], ss[sg], 8u, BK, false);           \
        subgroupMemoryBarrierShared();                                \
        subgroupBarrier();                                            \
    }
    ACC o[MAXD / 8u];
    [[unroll]] for (uint c = 0u; c < MAXD / 8u; c++) {
        o[c] = ACC(0.0);
    }
    // One pass: the row's max and sum ride along in registers (both invocations of a row hold
    // them), P = exp(s - max) goes into the product unnormalized, and the accumulators are
    // rescaled only where a block's max passes the one in use by more than RESCALE_MARGIN:
    // P stays below e^8 (fp16 holds it), and after the first block a rescale is rare.
    uint r = sub_lane / 2u, j0 = (sub_lane % 2u) * 8u;
    float m = -3.402823466e38, l = 0.0;
    MAT_A pa;
    MAT_B b;
#ifdef ATTENTION_PREFETCH
    load_block(k_begin, true);
#endif
    for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
#ifdef ATTENTION_PREFETCH
        // This block from registers; the next block's loads then fly behind its products.
        store_block(true);
        barrier();
        if (k0 + BK < k_end) {
            load_block(k0 + BK, true);
        }
#else
        stage_keys(k0, true);
        barrier();
#endif
        SCORE_BLOCK();
        OWN_ROWS_SYNC();
        float sc[8];
        float bm = -3.402823466e38;
        [[unroll]] for (uint j = 0u; j < 8u; j++) {
            sc[j] = score(r, k0, j0 + ROT(j));
            bm = max(bm, sc[j]);
        }
        bm = max(bm, subgroupShuffleXor(bm, 1u));
        bool grow = bm > m + RESCALE_MARGIN;
        float m_new = grow ? bm : m;
        if (subgroupAny(grow)) {
            // This subgroup's scores are in registers: its score rows in ss are free for the
            // accumulators, two 16x8 blocks at a time.
            float f = exp(m - m_new);
            [[unroll]] for (uint c = 0u; c < MAXD / 8u; c += 2u) {
                if (8u * c < dvp) {
                    SPILL_PAIR(c);
                    [[unroll]] for (uint j = 0u; j < 8u; j++) {
                        ss[sg][r * BK + j0 + ROT(j)] *= f;
                    }
                    subgroupMemoryBarrierShared();
                    subgroupBarrier();
                    coopMatLoadNV(o[c], ss[sg], 0u, BK, false);
                    coopMatLoadNV(o[c + 1u], ss[sg], 8u, BK, false);
                }
            }
            l *= f;
            m = m_new;
        }
        float sum = 0.0;
        [[unroll]] for (uint j = 0u; j < 8u; j++) {
            float p = exp(sc[j] - m);
            sum += p;
            ps[sg][r * PS + j0 + ROT(j)] = float16_t(p);
        }
        l += sum + subgroupShuffleXor(sum, 1u);
        OWN_ROWS_SYNC();
        coopMatLoadNV(pa, ps[sg], 0u, PS, false);
        [[unroll]] for (uint c = 0u; c < MAXD / 8u; c++) {
            if (8u * c < dvp) {
                coopMatLoadNV(b, vs[lane], 8u * c, KS, false);
                o[c] = coopMatMulAddNV(pa, b, o[c]);
            }
        }
        barrier();
    }
    // The rows' max and sum for the partial results, and 1 / sum (0 where nothing was summed,
    // as below).
#ifdef SPLIT_KEYS
    bool zero = l == 0.0;
#else
    bool zero = (pc.flags & 4u) != 0u && l == 0.0;
#endif
    float inv = zero ? 0.0 : 1.0 / l;
    if (j0 == 0u) {
        row_max[sg][r] = m;
        row_sum[sg][r] = l;
        row_inv[sg][r] = inv;
    }
#else
    if (sub_lane < BQ) {
        row_max[sg][sub_lane] = -3.402823466e38;
        row_sum[sg][sub_lane] = 0.0;
    }
    barrier();

    // Pass 1: every row's max and sum of exps (online over the blocks).
    for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
        stage_keys(k0, false);
        barrier();
        SCORE_BLOCK();
        OWN_ROWS_SYNC();
        {
            // Two invocations a row, eight keys each, their max and sum joined by a shuffle.
            uint r = sub_lane / 2u, j0 = (sub_lane % 2u) * 8u;
            float s[8];
            float old_max = row_max[sg][r], mx = old_max;
            [[unroll]] for (uint j = 0u; j < 8u; j++) {
                s[j] = score(r, k0, j0 + ROT(j));
                mx = max(mx, s[j]);
            }
            mx = max(mx, subgroupShuffleXor(mx, 1u));
            float sum = 0.0;
            [[unroll]] for (uint j = 0u; j < 8u; j++) {
                sum += exp(s[j] - mx);
            }
            sum += subgroupShuffleXor(sum, 1u);
            float before = row_sum[sg][r];
            subgroupBarrier();
            if (j0 == 0u) {
                row_max[sg][r] = mx;
                row_sum[sg][r] = before * exp(old_max - mx) + sum;
            }
        }
        barrier();
    }

    // Each row's 1 / sum, so that pass 2 writes P normalized and the products are the output
    // itself (at most V's largest value, so it converts to fp16 on the way out). A row with
    // every key at -inf summed nothing: 0 under the NaN guard, else NaN as the softmax gives;
    // a span that summed nothing gives 0 (attention_combine.comp decides for the whole row).
    if (sub_lane < BQ) {
        float sum = row_sum[sg][sub_lane];
#ifdef SPLIT_KEYS
        bool zero = sum == 0.0;
#else
        bool zero = (pc.flags & 4u) != 0u && sum == 0.0;
#endif
        row_inv[sg][sub_lane] = zero ? 0.0 : 1.0 / sum;
    }
    barrier();

    // Pass 2: P = exp(s - max) / sum and P V.
    ACC o[MAXD / 8u];
    [[unroll]] for (uint c = 0u; c < MAXD / 8u; c++) {
        o[c] = ACC(0.0);
    }
    MAT_A pa;
    MAT_B b;
    for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
        stage_keys(k0, true);
        barrier();
        SCORE_BLOCK();
        OWN_ROWS_SYNC();
        // Two invocations a row, eight keys each.
        uint r = sub_lane / 2u, j0 = (sub_lane % 2u) * 8u;
        float mx = row_max[sg][r], inv = row_inv[sg][r];
        [[unroll]] for (uint j = 0u; j < 8u; j++) {
            ps[sg][r * PS + j0 + ROT(j)] = float16_t(exp(score(r, k0, j0 + ROT(j)) - mx) * inv);
        }
        OWN_ROWS_SYNC();
        coopMatLoadNV(pa, ps[sg], 0u, PS, false);
        [[unroll]] for (uint c = 0u; c < MAXD / 8u; c++) {
            if (8u * c < dvp) {
                coopMatLoadNV(b, vs[lane], 8u * c, KS, false);
                o[c] = coopMatMulAddNV(pa, b, o[c]);
            }
        }
        barrier();
    }

#endif
    // Out: each query block in turn, its lanes' rows as fp16 into their K regions (free after
    // the last block's barrier), then the workgroup stores the four heads of each texel together.
    for (uint blk = 0u; blk < QBU; blk++) {
        if (qb == blk) {
#ifdef ONE_PASS
            // P V over the rows' sums, through this subgroup's score rows two blocks at a time.
            [[unroll]] for (uint c = 0u; c < MAXD / 8u; c += 2u) {
                if (8u * c < dvp) {
                    SPILL_PAIR(c);
                    [[unroll]] for (uint j = 0u; j < 8u; j++) {
                        ks[lane][r * KS + 8u * c + j0 + ROT(j)] = float16_t(ss[sg][r * BK + j0 + ROT(j)] * inv);
                    }
                }
            }
#else
            [[unroll]] for (uint c = 0u; c < MAXD / 8u; c++) {
                if (8u * c < dvp) {
                    coopMatStoreNV(MAT_H(o[c]), ks[lane], 8u * c, KS, false);
                }
            }
#endif
        }
        barrier();
        uint s0 = blk * LANES, bq0 = sq0 + blk * BQ;
#ifdef SPLIT_KEYS
        // The span's partial results, unnormalized (the rows' sums times P V) beside its max
        // and sum: attention_combine.comp weighs each span by its max against the row's.
        for (uint e = tid; e < BQ * (dv + 2u); e += 128u * QBU) {
            uint r = e / (dv + 2u), x = e % (dv + 2u), sq = bq0 + r;
            if (sq < pc.q.x) {
                vec4 v;
                for (uint l = 0u; l < LANES; l++) {
                    v[l] = x < dv ? float(ks[l][r * KS + x]) * row_sum[s0 + l][r]
                                  : (x == dv ? row_max[s0 + l][r] : row_sum[s0 + l][r]);
                }
                store_partial((layer * pc.q.x + sq) * pc.splits + split, x, v);
            }
        }
#else
        for (uint e = tid; e < BQ * dv; e += 128u * QBU) {
            uint r = e / dv, x = e % dv, sq = bq0 + r;
            if (sq < pc.q.x) {
                vec4 v;
                for (uint l = 0u; l < LANES; l++) {
                    v[l] = float(ks[l][r * KS + x]);
                }
                store_out(layer, sq, x, v);
            }
        }
#endif
        barrier();
    }
}

#endif
