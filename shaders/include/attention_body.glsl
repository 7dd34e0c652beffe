// Fused scaled dot-product attention: out = softmax(scale * Q K^T + mask) V, with the softmax taken
// online over blocks of keys (FlashAttention's running max and sum), so the [Sq, Sk] scores are
// never stored. Tensors are C4-packed by the rank rule: Q [N, C, Sq, D], K [N, C, Sk, D] (or
// [N, C, D, Sk] when K_ROWS is clear), V [N, C, Sk, Dv], out [N, C, Sq, Dv]. C is the head axis,
// so a texel's four lanes are four heads and every score, max and sum below is a vec4 of them.
// The mask is additive, [Nm, Cm, Hm, Sk] with Nm, Cm, Hm each 1 (broadcast) or full.
// Grouped-query attention: K and V may have fewer heads (kvc) than Q (c), c a multiple of kvc;
// query head h reads key/value head h / (c / kvc), so a texel of four query heads gathers its
// lanes from up to two key texels.
//
// One workgroup: BQ = 64 / PARTS query rows of one (n, c4) layer, PARTS threads per row; thread
// part p holds Q and the accumulator for the head-dim texels p, p + PARTS, ... (D, Dv <= MAXD).
// Each key block (BK keys) is staged in shared memory, each thread scores its part of the dot
// product, and the parts are summed through shared memory. Variants: attention.comp (MAXD 64,
// 4 parts, 8 keys a block), attention_d128.comp (MAXD 128, 8 parts, 4 keys a block: the same
// registers a thread, and shared memory within lavapipe's 32 KiB).
#ifndef TEXSTREAM_ATTENTION_BODY_GLSL
#define TEXSTREAM_ATTENTION_BODY_GLSL
#include "attention_io.glsl"

layout(local_size_x = 64) in;

// The entry file defines MAXD (the largest head dim), PARTS (threads per query row) and BK (keys
// per staged block); each thread holds DPT = MAXD / PARTS head-dim texels.
#define BQ (64u / PARTS)
#define DPT int(MAXD / PARTS)

shared vec4 ks[BK][MAXD];
shared vec4 vs[BK][MAXD];
shared vec4 part_scores[BQ][PARTS][BK];

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint layer = group / pc.groups_per_layer;
    uint c4 = (pc.c + 3u) / 4u;
    if (layer >= pc.n * c4) {
        return; // whole workgroup: no barrier is skipped by part of it
    }
    uint row = lid / PARTS, part = lid % PARTS;
    uint sq = (group % pc.groups_per_layer) * BQ + row;
    uint d = pc.q.y, dv = pc.v.y, sk = pc.v.x;
    bool live = sq < pc.q.x;
    TensorDesc tq = operand_desc(pc.q, pc.c, SPLIT_Q), tk = operand_desc(pc.k, pc.kvc, SPLIT_K),
               tv = operand_desc(pc.v, pc.kvc, SPLIT_V);
    // A key or value texel holds this layer's four heads as they are (no grouping, no split).
    bool k_texels = pc.c == pc.kvc && !is_split(SPLIT_K);
    bool v_texels = pc.c == pc.kvc && !is_split(SPLIT_V);
    TensorDesc tm = mask_desc();
    bool has_mask = (pc.flags & 1u) != 0u, k_rows = (pc.flags & 2u) != 0u;

    uint n_i = layer / c4, c4_i = layer % c4;
    uvec4 kv_head, kv_layer;
    kv_heads(n_i, c4_i, kv_head, kv_layer);

    vec4 q[DPT];
    vec4 acc[DPT];
    for (int i = 0; i < DPT; i++) {
        uint x = part + PARTS * uint(i);
        q[i] = (live && x < d) ? query_texel(tq, layer, sq, x) * pc.scale : vec4(0.0);
        acc[i] = vec4(0.0);
    }
    // The mask row this query reads (broadcast axes read index 0).
    uint m_layer = mask_layer(n_i, c4_i);
    uint m_row = pc.m.x == 1u ? 0u : sq;

    vec4 run_max = vec4(-3.402823466e38);
    vec4 run_sum = vec4(0.0);
    // A mask row shared by every query row and head (a decoder's cache mask, a padding mask)
    // lets the workgroup skip a block of keys that is masked out entirely (every value at or
    // below MASKED) once some earlier key was not: such keys add exp(-huge) = 0 exactly, so
    // skipping them changes no bit. The test reads only the mask, so it is uniform.
    const float MASKED = -1e30;
    bool shared_mask = has_mask && pc.m.x == 1u && pc.mc == 1u;
    bool seen_real = false;
    for (uint k0 = 0u; k0 < sk; k0 += BK) {
        if (shared_mask) {
            bool block_masked = true;
            for (uint j = 0u; j < BK && k0 + j < sk; j++) {
                float mv = LOAD_TEXEL(img_mask, tm, texel_index(tm, m_layer, 0u, k0 + j)).x;
                block_masked = block_masked && mv <= MASKED;
            }
            if (block_masked && seen_real) {
                continue;
            }
            seen_real = seen_real || !block_masked;
        }
        // Stage BK keys and values.
        for (uint e = lid; e < BK * MAXD; e += 64u) {
            uint j = e / MAXD, x = e % MAXD, key = k0 + j;
            vec4 kv = vec4(0.0), vv = vec4(0.0);
            if (key < sk && x < d) {
                uint ky = k_rows ? key : x, kx = k_rows ? x : key;
                if (k_texels) {
                    kv = LOAD_AT(img_k, tk, layer, ky, kx);
                } else {
                    for (uint l = 0u; l < 4u; l++) {
                        kv[l] = key_element(tk, kv_head[l], kv_layer[l], ky, kx);
                    }
                }
            }
            if (key < sk && x < dv) {
                if (v_texels) {
                    vv = LOAD_AT(img_v, tv, layer, key, x);
                } else {
                    for (uint l = 0u; l < 4u; l++) {
                        vv[l] = value_element(tv, kv_head[l], kv_layer[l], key, x);
                    }
                }
            }
            ks[j][x] = kv;
            vs[j][x] = vv;
        }
        barrier();
        for (uint j = 0u; j < BK; j++) {
            vec4 s = vec4(0.0);
            for (int i = 0; i < DPT; i++) {
                s += q[i] * ks[j][part + PARTS * uint(i)];
            }
            part_scores[row][part][j] = s;
        }
        barrier();
        vec4 s[BK];
        vec4 block_max = run_max;
        for (uint j = 0u; j < BK; j++) {
            uint key = k0 + j;
            s[j] = vec4(0.0);
            for (uint p = 0u; p < PARTS; p++) s[j] += part_scores[row][p][j];
            if (has_mask && key < sk && live) {
                vec4 mv = LOAD_TEXEL(img_mask, tm, texel_index(tm, m_layer, m_row, key));
                s[j] += pc.mc == 1u ? vec4(mv.x) : mv;
            }
            if (key < sk) {
                block_max = max(block_max, s[j]);
            }
        }
        vec4 alpha = exp(run_max - block_max);
        run_sum *= alpha;
        for (int i = 0; i < DPT; i++) {
            acc[i] *= alpha;
        }
        for (uint j = 0u; j < BK; j++) {
            if (k0 + j >= sk) {
                break;
            }
            vec4 p = exp(s[j] - block_max);
            run_sum += p;
            for (int i = 0; i < DPT; i++) {
                acc[i] += p * vs[j][part + PARTS * uint(i)];
            }
        }
        run_max = block_max;
        barrier();
    }
    if (!live) {
        return;
    }
    // Every key at -inf: nothing was summed (the softmax alone would be NaN).
    vec4 inv = vec4(1.0) / run_sum;
    if ((pc.flags & 4u) != 0u) {
        inv = mix(inv, vec4(0.0), equal(run_sum, vec4(0.0)));
    }
    for (int i = 0; i < DPT; i++) {
        uint x = part + PARTS * uint(i);
        if (x < dv) {
            store_out(layer, sq, x, acc[i] * inv);
        }
    }
}

#endif
