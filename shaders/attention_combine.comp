#version 450
// CACHE_VARIANT: also built as attention_combine_kv16 (its K and V bindings fp16, as the
// attention_decode_split_kv16 that wrote its partials).
// Merges the key spans of a split attention (attention_decode.comp with splits > 1): for query
// row sq of texel layer `layer` and head-dim texel x,
//   out = sum_s exp(m_s - M) acc_s[x] / sum_s exp(m_s - M) l_s,   M = max_s m_s,
// from each split's unnormalized sums acc_s, running max m_s and running sum l_s
// (include/attention_partials.glsl). One invocation a (layer, row, texel); the push constants and
// the store are attention_decode.comp's (include/attention_io.glsl). Merged heads written as the
// next MatMul's packed A (PACKED_OUT): one invocation a (layer, row, four texels), a packed
// texel for each of the layer's heads (an invocation a packed texel, each reading its lane of
// four texels, cost BERT-base's attention 37.6 -> 41.2 us a layer on an H100: session 38).
#include "attention_io.glsl"
#include "attention_partials.glsl"

layout(local_size_x = 64) in;

// The largest of the spans' running maxes from partial-results row `first` on (four head lanes).
vec4 spans_max(uint first) {
    vec4 m = vec4(-3.402823466e38);
    for (uint s = 0u; s < pc.splits; s++) m = max(m, load_partial(first + s, pc.v.y));
    return m;
}

// 1 / sum, 0 where nothing was summed (every key at -inf: the softmax alone would be NaN) and
// the flags ask for it.
vec4 inverse_sum(vec4 sum) {
    vec4 inv = vec4(1.0) / sum;
    if ((pc.flags & 4u) != 0u) {
        inv = mix(inv, vec4(0.0), equal(sum, vec4(0.0)));
    }
    return inv;
}

void main() {
    uint i = global_id_1d();
    uint dv = pc.v.y, sq_n = pc.q.x, splits = pc.splits;
    uint c4 = (pc.c + 3u) / 4u;
    vec4 sum = vec4(0.0);
    if ((pc.flags & PACKED_OUT) != 0u) {
        // Packed: an invocation a (layer, row, four head-dim values): the four head lanes'
        // values x4..x4+3, one packed texel a head, each summed as below.
        uint dq = dv / 4u;
        if (i >= pc.n * c4 * sq_n * dq) {
            return;
        }
        uint x4 = 4u * (i % dq), row = i / dq;
        uint layer = row / sq_n, sq = row % sq_n, first = row * splits;
        vec4 m = spans_max(first);
        vec4 total[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
        for (uint s = 0u; s < splits; s++) {
            vec4 w = exp(load_partial(first + s, dv) - m);
            for (uint j = 0u; j < 4u; j++) {
                total[j] += w * load_partial(first + s, x4 + j);
            }
            sum += w * load_partial(first + s, dv + 1u);
        }
        vec4 inv = inverse_sum(sum);
        for (uint l = 0u; l < 4u; l++) {
            uint head = 4u * (layer % c4) + l;
            if (head < pc.c) {
                vec4 v = vec4(total[0][l], total[1][l], total[2][l], total[3][l]);
                store_out_packed(head, sq, x4, v * inv[l]);
            }
        }
        return;
    }
    if (i >= pc.n * c4 * sq_n * dv) {
        return;
    }
    uint x = i % dv, row = i / dv;
    uint layer = row / sq_n, sq = row % sq_n, first = row * splits;
    vec4 m = spans_max(first);
    vec4 total = vec4(0.0);
    for (uint s = 0u; s < splits; s++) {
        vec4 w = exp(load_partial(first + s, dv) - m);
        total += w * load_partial(first + s, x);
        sum += w * load_partial(first + s, dv + 1u);
    }
    store_out(layer, sq, x, total * inverse_sum(sum));
}
