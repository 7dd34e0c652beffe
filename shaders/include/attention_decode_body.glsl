// Body of attention_decode.comp (one span of keys a query row: the result stored) and
// attention_decode_split.comp (SPLIT_KEYS: several spans a row, each span's partial results
// stored for attention_combine.comp). See attention_decode.comp.
#ifndef TEXSTREAM_ATTENTION_DECODE_BODY_GLSL
#define TEXSTREAM_ATTENTION_DECODE_BODY_GLSL
#define MAXD 128u
#define THREADS 256u
// Keys a chunk; threads scoring one key (each a part of the head dim); head-dim texels a part.
#define KT 16u
#define KP (THREADS / KT)
#define KDT (MAXD / KP)
// Threads accumulating one head-dim texel (each a part of the chunk's keys); keys a part.
#define VP (THREADS / MAXD)
#define VKT (KT / VP)
#include "attention_io.glsl"
#ifdef SPLIT_KEYS
#include "attention_partials.glsl"
#endif

layout(local_size_x = 256) in;

shared vec4 qs[MAXD];
shared vec4 part_scores[KT][KP];
shared vec4 weights[KT];
shared vec4 part_acc[VP][MAXD];

TensorDesc tk, tv;
uint group_size;
uvec4 kv_head, kv_layer;
uint q_layer;

// Where the group size is a multiple of four the texel's four query heads share one key/value
// head: one load, its lane broadcast. Otherwise each lane loads its own head's texel.
vec4 load_key(bool k_rows, uint key, uint x) {
    uint y = k_rows ? key : x, xx = k_rows ? x : key;
    if (group_size == 1u && !is_split(SPLIT_K)) {
        return LOAD_AT(img_k, tk, q_layer, y, xx);
    }
    if (group_size % 4u == 0u) {
        return vec4(key_element(tk, kv_head[0], kv_layer[0], y, xx));
    }
    vec4 r;
    for (uint l = 0u; l < 4u; l++) {
        r[l] = key_element(tk, kv_head[l], kv_layer[l], y, xx);
    }
    return r;
}

vec4 load_value(uint key, uint x) {
    if (group_size == 1u && !is_split(SPLIT_V)) {
        return LOAD_AT(img_v, tv, q_layer, key, x);
    }
    if (group_size % 4u == 0u) {
        return vec4(value_element(tv, kv_head[0], kv_layer[0], key, x));
    }
    vec4 r;
    for (uint l = 0u; l < 4u; l++) {
        r[l] = value_element(tv, kv_head[l], kv_layer[l], key, x);
    }
    return r;
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint layer = group / pc.groups_per_layer;
    uint c4 = (pc.c + 3u) / 4u;
    if (layer >= pc.n * c4) {
        return; // whole workgroup: no barrier is skipped by part of it
    }
    q_layer = layer;
    uint splits = pc.splits;
    uint row_group = group % pc.groups_per_layer;
    uint sq = row_group / splits, split = row_group % splits;
    uint d = pc.q.y, dv = pc.v.y, sk = pc.v.x;
    uint k_begin = min(split * pc.split_keys, sk), k_end = min(k_begin + pc.split_keys, sk);
    TensorDesc tq = operand_desc(pc.q, pc.c, SPLIT_Q);
    tk = operand_desc(pc.k, pc.kvc, SPLIT_K);
    tv = operand_desc(pc.v, pc.kvc, SPLIT_V);
    TensorDesc tm = mask_desc();
    bool has_mask = (pc.flags & 1u) != 0u, k_rows = (pc.flags & 2u) != 0u;

    uint n_i = layer / c4, c4_i = layer % c4;
    group_size = pc.c / pc.kvc;
    kv_heads(n_i, c4_i, kv_head, kv_layer);

    // Q, scaled; zero past D, so that the clamped loads past D add nothing.
    if (tid < MAXD) {
        qs[tid] = tid < d ? query_texel(tq, layer, sq, tid) * pc.scale : vec4(0.0);
    }
    uint m_layer = mask_layer(n_i, c4_i);
    uint m_row = pc.m.x == 1u ? 0u : sq;
    barrier();

    uint kj = tid / KP, kpart = tid % KP;     // scoring: key kj, texels kpart + KP * i
    uint vx = tid % MAXD, vpart = tid / MAXD; // accumulating: texel vx, keys vpart * VKT + i
    uint vxc = min(vx, dv - 1u);
    // Texels of the head dim a scorer loads (the rest are past D; a uniform bound).
    uint kdt = min(KDT, (d + KP - 1u - kpart) / KP);
    vec4 run_max = vec4(-3.402823466e38);
    vec4 run_sum = vec4(0.0);
    vec4 acc = vec4(0.0);
    for (uint k0 = k_begin; k0 < k_end; k0 += KT) {
        uint keys = min(KT, k_end - k0);
        // Score part kpart of key k0 + kj (a key past the span reads the last one; it is never
        // used), its loads issued before any is used.
        uint kc = k0 + min(kj, keys - 1u);
        vec4 kt[KDT];
        for (uint i = 0u; i < KDT; i++) {
            kt[i] = i < kdt ? load_key(k_rows, kc, kpart + KP * i) : vec4(0.0);
        }
        vec4 s = vec4(0.0);
        for (uint i = 0u; i < KDT; i++) {
            s += qs[min(kpart + KP * i, MAXD - 1u)] * kt[i];
        }
        part_scores[kj][kpart] = s;
        barrier();
        if (tid < KT) {
            vec4 t = vec4(0.0);
            for (uint p = 0u; p < KP; p++) t += part_scores[tid][p];
            if (has_mask) {
                vec4 mv = LOAD_TEXEL(img_mask, tm, texel_index(tm, m_layer, m_row, k0 + min(tid, keys - 1u)));
                t += pc.mc == 1u ? vec4(mv.x) : mv;
            }
            // A key past the chunk cannot raise the max; its weight is set to 0 below.
            weights[tid] = tid < keys ? t : vec4(-3.402823466e38);
        }
        barrier();
        vec4 block_max = run_max;
        for (uint j = 0u; j < KT; j++) block_max = max(block_max, weights[j]);
        barrier(); // every thread has the chunk's max before the scores become weights
        if (tid < KT) weights[tid] = tid < keys ? exp(weights[tid] - block_max) : vec4(0.0);
        barrier();
        vec4 alpha = exp(run_max - block_max);
        vec4 chunk_sum = vec4(0.0);
        for (uint j = 0u; j < KT; j++) chunk_sum += weights[j];
        run_sum = run_sum * alpha + chunk_sum;
        vec4 vt[VKT];
        for (uint i = 0u; i < VKT; i++) {
            vt[i] = load_value(k0 + min(vpart * VKT + i, keys - 1u), vxc);
        }
        acc *= alpha;
        for (uint i = 0u; i < VKT; i++) {
            // Weights past the chunk's keys are 0.
            acc += weights[vpart * VKT + i] * vt[i];
        }
        run_max = block_max;
        barrier(); // every thread has read the weights before the next chunk writes them
    }
    part_acc[vpart][vx] = acc;
    barrier();
    if (tid >= dv) {
        return;
    }
    vec4 total = vec4(0.0);
    for (uint p = 0u; p < VP; p++) total += part_acc[p][tid];
#ifdef SPLIT_KEYS
    // Unnormalized: attention_combine.comp weighs each split by its max against the row's.
    uint prow = (layer * pc.q.x + sq) * splits + split;
    store_partial(prow, tid, total);
    if (tid == 0u) {
        store_partial(prow, dv, run_max);
        store_partial(prow, dv + 1u, run_sum);
    }
#else
    // Every key at -inf: nothing was summed (the softmax alone would be NaN).
    vec4 inv = vec4(1.0) / run_sum;
    if ((pc.flags & 4u) != 0u) {
        inv = mix(inv, vec4(0.0), equal(run_sum, vec4(0.0)));
    }
    store_out(layer, sq, tid, total * inv);
#endif
}

#endif
