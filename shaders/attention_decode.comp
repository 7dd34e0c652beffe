#version 450
// Fused attention for a few query rows (a decoder's step): out = softmax(scale * Q K^T + mask) V
// with one workgroup a query row of one texel layer (four heads), and its threads spread over the
// keys rather than over the head dims.
//
// The blocked kernel (include/attention_body.glsl) gives a workgroup BQ query rows and walks the
// keys a few at a time, three barriers a block; with one live query row, a 64-key cache took 75 us
// on an H200. Here the keys are taken KT at a time:
// KP threads score each key against the Q row (held in shared memory), a part of the head dim
// each, then VP threads per head-dim texel accumulate softmax(scores) V over a part of the keys
// each. Every thread issues its loads BATCH at a time before it uses any (a GPU compiler does not
// keep a loop's loads in flight by itself: one at a time, a 2048-wide RMSNorm row took 42 us on
// an H200), so a chunk should cost a few round trips to memory. On the H200 it took 50 us a layer
// all the same (the 1.34 B decoder's step, 16 heads in 4 workgroups; BENCHMARKS.md, session 18):
// what else bounds it is not known yet. The softmax is online over chunks, so any cache length
// fits.
//
// Layouts, masks and grouped-query attention are those of include/attention_body.glsl: the same
// bindings and push constants (include/attention_io.glsl), with groups_per_layer = Sq.
#define MAXD 128u
#define THREADS 256u
// Keys a chunk; threads scoring one key (each a part of the head dim); head-dim texels a part.
#define KT 64u
#define KP (THREADS / KT)
#define KDT (MAXD / KP)
// Threads accumulating one head-dim texel (each a part of the chunk's keys); keys a part.
#define VP (THREADS / MAXD)
#define VKT (KT / VP)
// Loads an invocation issues before it uses any.
#define BATCH 16u
#include "attention_io.glsl"

layout(local_size_x = 256) in;

shared vec4 qs[MAXD];
shared vec4 part_scores[KT][KP];
shared vec4 scores[KT];
shared vec4 part_acc[VP][MAXD];

TensorDesc tk, tv;
uint group_size;
uvec4 kv_head, kv_layer;
uint q_layer;

// BATCH, as a value the compiler cannot see (flag bit 31 is never set), so a loop up to it is
// not unrolled.
uint rolled_batch() { return BATCH + (pc.flags >> 31u); }

// The key/value texels a batch uses, BATCH at a time. The grouping's case is taken once a batch,
// outside the loads, so that each case's loads are straight-line code (on the H200 this measured
// the same as taking it a load at a time: 54-56 against 57 us a layer). Where the group size is
// a multiple of four the texel's four query heads share one key/value head: one load, its lane
// broadcast.

void load_keys(bool k_rows, uint key, uint x0, uint dx, uint d, out vec4 kt[BATCH]) {
    if (group_size == 1u) {
        for (uint u = 0u; u < BATCH; u++) {
            uint x = min(x0 + dx * u, d - 1u);
            kt[u] = LOAD_AT(img_k, tk, q_layer, k_rows ? key : x, k_rows ? x : key);
        }
    } else if (group_size % 4u == 0u) {
        uint kl = kv_layer[0], lane = kv_head[0] % 4u;
        for (uint u = 0u; u < BATCH; u++) {
            uint x = min(x0 + dx * u, d - 1u);
            kt[u] = LOAD_AT(img_k, tk, kl, k_rows ? key : x, k_rows ? x : key);
        }
        for (uint u = 0u; u < BATCH; u++) kt[u] = vec4(kt[u][lane]);
    } else {
        // The uncommon grouping (not a multiple of four) stays a loop: unrolled, its 64 loads
        // made a CPU device's shader compile several times longer.
        for (uint u = 0u; u < rolled_batch(); u++) {
            uint x = min(x0 + dx * u, d - 1u);
            for (uint l = 0u; l < 4u; l++) {
                uint kl = kv_layer[l];
                uint ti = k_rows ? texel_index(tk, kl, key, x) : texel_index(tk, kl, x, key);
                kt[u][l] = LOAD_TEXEL(img_k, tk, ti)[kv_head[l] % 4u];
            }
        }
    }
}

// Values of keys k0 + min(j0 + u, keys - 1) at head-dim texel x.
void load_values(uint k0, uint j0, uint keys, uint x, out vec4 vt[BATCH]) {
    if (group_size == 1u) {
        for (uint u = 0u; u < BATCH; u++) {
            vt[u] = LOAD_AT(img_v, tv, q_layer, k0 + min(j0 + u, keys - 1u), x);
        }
    } else if (group_size % 4u == 0u) {
        uint vl = kv_layer[0], lane = kv_head[0] % 4u;
        for (uint u = 0u; u < BATCH; u++) {
            vt[u] = LOAD_AT(img_v, tv, vl, k0 + min(j0 + u, keys - 1u), x);
        }
        for (uint u = 0u; u < BATCH; u++) vt[u] = vec4(vt[u][lane]);
    } else {
        for (uint u = 0u; u < rolled_batch(); u++) {
            uint kk = k0 + min(j0 + u, keys - 1u);
            for (uint l = 0u; l < 4u; l++) {
                vt[u][l] = LOAD_TEXEL(img_v, tv, texel_index(tv, kv_layer[l], kk, x))[kv_head[l] % 4u];
            }
        }
    }
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
    uint sq = group % pc.groups_per_layer;
    uint d = pc.q.y, dv = pc.v.y, sk = pc.v.x;
    TensorDesc tq = desc(pc.q, pc.c);
    tk = desc(pc.k, pc.kvc);
    tv = desc(pc.v, pc.kvc);
    TensorDesc tm = mask_desc();
    bool has_mask = (pc.flags & 1u) != 0u, k_rows = (pc.flags & 2u) != 0u;

    uint n_i = layer / c4, c4_i = layer % c4;
    group_size = pc.c / pc.kvc;
    kv_heads(n_i, c4_i, kv_head, kv_layer);

    // Q, scaled; zero past D, so that the clamped loads past D add nothing.
    if (tid < MAXD) {
        qs[tid] = tid < d ? LOAD_TEXEL(img_q, tq, texel_index(tq, layer, sq, tid)) * pc.scale : vec4(0.0);
    }
    uint m_layer = mask_layer(n_i, c4_i);
    uint m_row = pc.m.x == 1u ? 0u : sq;
    barrier();

    uint kj = tid / KP, kpart = tid % KP;     // scoring: key kj, texels kpart + KP * i
    uint vx = tid % MAXD, vpart = tid / MAXD; // accumulating: texel vx, keys vpart * VKT + i
    uint vxc = min(vx, dv - 1u);
    vec4 run_max = vec4(-3.402823466e38);
    vec4 run_sum = vec4(0.0);
    vec4 acc = vec4(0.0);
    for (uint k0 = 0u; k0 < sk; k0 += KT) {
        uint keys = min(KT, sk - k0);
        // Score part kpart of key k0 + kj (a key past Sk reads the last one; it is never used).
        uint kc = k0 + min(kj, keys - 1u);
        vec4 mv = vec4(0.0);
        if (has_mask && kpart == 0u) {
            mv = LOAD_TEXEL(img_mask, tm, texel_index(tm, m_layer, m_row, kc));
            mv = pc.mc == 1u ? vec4(mv.x) : mv;
        }
        vec4 s = mv;
        // Batches wholly past D (or past the chunk's keys, below) load nothing: the test is
        // uniform, and it spares a CPU device 8x the work at D 16.
        for (uint b = 0u; b < KDT && KP * b < d; b += BATCH) {
            vec4 kt[BATCH];
            load_keys(k_rows, kc, kpart + KP * b, KP, d, kt);
            for (uint u = 0u; u < BATCH; u++) {
                s += qs[kpart + KP * (b + u)] * kt[u];
            }
        }
        part_scores[kj][kpart] = s;
        barrier();
        if (tid < KT) {
            vec4 t = vec4(0.0);
            for (uint p = 0u; p < KP; p++) t += part_scores[tid][p];
            scores[tid] = t;
        }
        barrier();
        vec4 block_max = run_max;
        for (uint j = 0u; j < KT; j++) {
            if (j < keys) block_max = max(block_max, scores[j]);
        }
        vec4 alpha = exp(run_max - block_max);
        run_sum *= alpha;
        acc *= alpha;
        for (uint j = 0u; j < KT; j++) {
            if (j < keys) run_sum += exp(scores[j] - block_max);
        }
        for (uint b = 0u; b < VKT && vpart * VKT + b < keys; b += BATCH) {
            vec4 vt[BATCH];
            load_values(k0, vpart * VKT + b, keys, vxc, vt);
            for (uint u = 0u; u < BATCH; u++) {
                uint j = vpart * VKT + b + u;
                if (j < keys) acc += exp(scores[j] - block_max) * vt[u];
            }
        }
        run_max = block_max;
        barrier(); // every thread has read the scores before the next chunk writes them
    }
    part_acc[vpart][vx] = acc;
    barrier();
    if (tid >= dv) {
        return;
    }
    vec4 total = vec4(0.0);
    for (uint p = 0u; p < VP; p++) total += part_acc[p][tid];
    // Every key at -inf: nothing was summed (the softmax alone would be NaN).
    vec4 inv = vec4(1.0) / run_sum;
    if ((pc.flags & 4u) != 0u) {
        inv = mix(inv, vec4(0.0), equal(run_sum, vec4(0.0)));
    }
    store_out(layer, sq, tid, total * inv);
}
