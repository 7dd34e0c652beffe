#version 450
// Merges the key spans of a split attention (attention_decode.comp with splits > 1): for query
// row sq of texel layer `layer` and head-dim texel x,
//   out = sum_s exp(m_s - M) acc_s[x] / sum_s exp(m_s - M) l_s,   M = max_s m_s,
// from each split's unnormalized sums acc_s, running max m_s and running sum l_s
// (include/attention_partials.glsl). One invocation a (layer, row, texel); the push constants and
// the store are attention_decode.comp's (include/attention_io.glsl).
#include "attention_io.glsl"
#include "attention_partials.glsl"

layout(local_size_x = 64) in;

void main() {
    uint i = global_id_1d();
    uint dv = pc.v.y, sq_n = pc.q.x, splits = pc.splits;
    uint c4 = (pc.c + 3u) / 4u;
    if (i >= pc.n * c4 * sq_n * dv) {
        return;
    }
    uint x = i % dv, row = i / dv;
    uint layer = row / sq_n, sq = row % sq_n;
    uint first = row * splits;
    vec4 m = vec4(-3.402823466e38);
    for (uint s = 0u; s < splits; s++) m = max(m, load_partial(first + s, dv));
    vec4 total = vec4(0.0), sum = vec4(0.0);
    for (uint s = 0u; s < splits; s++) {
        vec4 w = exp(load_partial(first + s, dv) - m);
        total += w * load_partial(first + s, x);
        sum += w * load_partial(first + s, dv + 1u);
    }
    // Every key at -inf: nothing was summed (the softmax alone would be NaN).
    vec4 inv = vec4(1.0) / sum;
    if ((pc.flags & 4u) != 0u) {
        inv = mix(inv, vec4(0.0), equal(sum, vec4(0.0)));
    }
    store_out(layer, sq, x, total * inv);
}
