// Bindings and push constants shared by the attention kernels (attention_body.glsl, the blocked
// kernel for many query rows, and attention_decode.comp, the kernel for a few): Q, K, V, the
// additive mask and the output, each with its logical h, w and physical fold; the mask and
// grouped-query lookups and the output store they share.
#ifndef TEXSTREAM_ATTENTION_IO_GLSL
#define TEXSTREAM_ATTENTION_IO_GLSL
#include "tensor.glsl"

TENSOR_IN(0, img_q);
// K and V: a decoder's key/value cache where there is one (rgba16f in the `_kv16` builds).
TENSOR_IN_CACHE(1, img_k);
TENSOR_IN_CACHE(2, img_v);
TENSOR_IN(3, img_mask);
TENSOR_OUT(4, img_out);

// Per tensor: logical h, w and the physical fold (pw, ph); the layer count is shared.
layout(push_constant) uniform Push {
    uvec4 q;    // Sq, D, pw, ph
    uvec4 k;    // h, w, pw, ph (h = Sk, w = D when K_ROWS; h = D, w = Sk otherwise)
    uvec4 v;    // Sk, Dv, pw, ph
    uvec4 o;    // Sq, Dv, pw, ph
    uvec4 m;    // h, w, pw, ph of the mask
    uint n;     // batch (N of the rank rule)
    uint c;     // heads (C)
    uint mc;    // the mask's C (1: broadcast over heads)
    uint mn;    // the mask's N (1: broadcast over the batch)
    float scale;
    uint flags; // bit 0: a mask is bound; bit 1: K_ROWS (K is [.., Sk, D]); bit 2: a row with
                // every key at -inf gives 0, not NaN; bit 3: merged heads (out is [1, Sq, H * Dv]);
                // bits 4, 5, 6: Q, K, V read from split rows (see SPLIT_Q below); bit 7: merged
                // heads written packed (PACKED_OUT below); bits 9, 10: split K, V written packed
                // (is_packed below)
    uint groups_per_layer;
    uint kvc;   // key/value heads (= c without grouping)
    uint splits;     // attention_decode.comp: key spans a query row is split over (1: none)
    uint split_keys; // keys a span
    uint part_pw;    // the partial results' physical width and height (its fold)
    uint part_ph;
} pc;

TensorDesc desc(uvec4 t, uint c) {
    uint c4 = (c + 3u) / 4u;
    return TensorDesc(pc.n, c, t.x, t.y, c4, t.z, t.w, 0u);
}

// The additive mask's descriptor, and the texel layer of the mask row query heads of texel
// layer c4_i in batch n_i read (broadcast axes read index 0).
TensorDesc mask_desc() {
    return TensorDesc(pc.mn, pc.mc, pc.m.x, pc.m.y, (pc.mc + 3u) / 4u, pc.m.z, pc.m.w, 0u);
}
uint mask_layer(uint n_i, uint c4_i) {
    return (pc.mn == 1u ? 0u : n_i) * ((pc.mc + 3u) / 4u) + (pc.mc == 1u ? 0u : c4_i);
}

// Grouped-query attention: the key/value head each lane's query head (4 * c4_i + lane) reads,
// and that head's texel layer in batch n_i.
void kv_heads(uint n_i, uint c4_i, out uvec4 kv_head, out uvec4 kv_layer) {
    uint group_size = pc.c / pc.kvc, kv_c4 = (pc.kvc + 3u) / 4u;
    for (uint l = 0u; l < 4u; l++) {
        kv_head[l] = min((4u * c4_i + l) / group_size, pc.kvc - 1u);
        kv_layer[l] = n_i * kv_c4 + kv_head[l] / 4u;
    }
}

// Q, K and V read from a projection's rows (flags bits 4, 5 and 6): [1, S, H * D], one value a
// texel, head h's element (row, x) in texel (row, h * D + x): the exporters' head split (a
// Reshape to [1, S, H, D] and a Transpose) run as these loads. Their push-constant h and w stay
// the logical S and D; a K read so is by rows (K_ROWS is set with it).
#define SPLIT_Q 16u
#define SPLIT_K 32u
#define SPLIT_V 64u
bool is_split(uint bit) { return (pc.flags & bit) != 0u; }
// A split K or V written packed by its projection (flags bits 9 and 10, each set with its split
// bit): [4, H * D / 4, S], texel (row, (h * D + x) / 4) holding head h's x..x+3 (D a multiple
// of 4), the tensor-core MatMul's packed layout. A texel then carries four of a head's values
// where a split row's carries one: staging a key block takes a quarter of the texel fetches.
bool is_packed(uint split_bit) { return (pc.flags & (split_bit << 4u)) != 0u; }

// The descriptor of an operand of `heads` heads whose push constants are t.
TensorDesc operand_desc(uvec4 t, uint heads, uint split_bit) {
    if (!is_split(split_bit)) {
        return desc(t, heads);
    }
    if (is_packed(split_bit)) {
        return TensorDesc(1u, 4u, heads * t.y / 4u, t.x, 1u, t.z, t.w, 0u);
    }
    return TensorDesc(1u, 1u, t.x, heads * t.y, 1u, t.z, t.w, 0u);
}

// Q's four heads of texel layer `layer` at (row, x); lanes past the heads are 0.
vec4 query_texel(TensorDesc tq, uint layer, uint row, uint x) {
    if (!is_split(SPLIT_Q)) {
        return LOAD_AT(img_q, tq, layer, row, x);
    }
    uint c4_i = layer % ((pc.c + 3u) / 4u);
    vec4 r = vec4(0.0);
    for (uint l = 0u; l < 4u; l++) {
        uint h = 4u * c4_i + l;
        if (h < pc.c) {
            r[l] = LOAD_AT(img_q, tq, 0u, row, h * pc.q.y + x).x;
        }
    }
    return r;
}

// Element (y, x) of key head `head` as K is stored ((key, x) by rows, (x, key) otherwise), its
// texel layer `layer` where K is not split.
float key_element(TensorDesc tk, uint head, uint layer, uint y, uint x) {
    if (is_split(SPLIT_K)) {
        if (is_packed(SPLIT_K)) {
            uint e = head * pc.k.y + x;
            return LOAD_AT(img_k, tk, 0u, e / 4u, y)[e % 4u];
        }
        return LOAD_AT(img_k, tk, 0u, y, head * pc.k.y + x).x;
    }
    return LOAD_AT(img_k, tk, layer, y, x)[head % 4u];
}

// Element (key, x) of value head `head`, its texel layer `layer` where V is not split.
float value_element(TensorDesc tv, uint head, uint layer, uint key, uint x) {
    if (is_split(SPLIT_V)) {
        if (is_packed(SPLIT_V)) {
            uint e = head * pc.v.y + x;
            return LOAD_AT(img_v, tv, 0u, e / 4u, key)[e % 4u];
        }
        return LOAD_AT(img_v, tv, 0u, key, head * pc.v.y + x).x;
    }
    return LOAD_AT(img_v, tv, layer, key, x)[head % 4u];
}

// Stores head-dim texel x of query row sq for the four heads of texel layer `layer` (lanes past
// the heads are padding). Merged heads: out is [1, Sq, H * Dv], one value a texel, so each
// head's value goes to its own texel (sq, h * Dv + x), and no two invocations share a texel.
void store_out(uint layer, uint sq, uint x, vec4 v) {
    uint c4 = (pc.c + 3u) / 4u, c4_i = layer % c4;
    if ((pc.flags & 8u) == 0u) {
        TensorDesc to = desc(pc.o, pc.c);
        STORE_TEXEL(img_out, to, texel_index(to, layer, sq, x), zero_padding(to, c4_i, v));
        return;
    }
    TensorDesc tm = TensorDesc(1u, 1u, pc.o.x, pc.o.y, 1u, pc.o.z, pc.o.w, 0u);
    uint dv = pc.v.y;
    for (uint l = 0u; l < 4u; l++) {
        uint h = 4u * c4_i + l;
        if (h < pc.c) {
            STORE_TEXEL(img_out, tm, texel_index(tm, 0u, sq, h * dv + x), vec4(v[l], 0.0, 0.0, 0.0));
        }
    }
}

// Merged heads written as the next MatMul's packed A (flags bit 7; attention_combine.comp only,
// after the tensor-core kernels' key spans): out is [4, H * Dv / 4, Sq] (pc.o its h, w and fold), texel
// (sq, (h * Dv + x) / 4) holding head h's x..x+3 (Dv a multiple of 4, x of 4), so the MatMul
// reading it needs no packing copy.
#define PACKED_OUT 128u
void store_out_packed(uint head, uint sq, uint x, vec4 v) {
    TensorDesc tp = TensorDesc(1u, 4u, pc.o.x, pc.o.y, 1u, pc.o.z, pc.o.w, 0u);
    STORE_TEXEL(img_out, tp, texel_index(tp, 0u, (head * pc.v.y + x) / 4u, sq), v);
}

#endif
