#version 450
// Cache write: copies every texel of `new` into `cache`, shifted along one [N, C4, H, W] axis
// (0: N, 2: H, 3: W; never the packed C axis, so whole texels move) by the offset that the first
// element of `pos` holds. The rest of the cache is left as it is: this is the in-place form of a
// decoder's `present = Concat(past, new)`. Texels that would land outside the cache are dropped
// (the host checks the position before it runs). With split_heads, `new` is a projection's rows
// [N, S, C * D] (one value a texel, the batch in the lanes) and its texels are gathered head by
// head into the cache's [N, C, S, D] layout: the exporters' head split as this kernel's load.
// CACHE_VARIANT: also built as kv_write_kv16, an fp16 cache written from fp32 rows.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_new);
TENSOR_IN(1, img_pos);
TENSOR_OUT_CACHE(2, img_cache);

layout(push_constant) uniform Push {
    TensorDesc new_t;
    TensorDesc pos_t;
    TensorDesc cache_t;
    uint axis;
    uint split_heads;
} pc;

void main() {
    uint i = global_id_1d();
    uvec4 p;
    vec4 v;
    if (pc.split_heads == 0u) {
        if (i >= tensor_texels(pc.new_t)) return;
        p = texel_nc4yx(pc.new_t, i);
        v = LOAD_TEXEL(img_new, pc.new_t, i);
    } else {
        // (n, head block, s, w) of the new rows as [N, C, S, D]; head h of batch n at row s is
        // new[n, s, h * D + w].
        uint d = pc.cache_t.w, s = pc.new_t.h, c4 = pc.cache_t.c4;
        if (i >= pc.cache_t.n * c4 * s * d) return;
        uint layer = i / (s * d);
        p = uvec4(layer / c4, layer % c4, (i / d) % s, i % d);
        for (uint l = 0u; l < 4u; l++) {
            uint h = 4u * p.y + l;
            v[l] = h < pc.cache_t.c ? LOAD_ELEMENT(img_new, pc.new_t, 0u, p.x, p.z, h * d + p.w) : 0.0;
        }
    }
    float at = LOAD_TEXEL(img_pos, pc.pos_t, 0u).x;
    if (!(at >= 0.0)) return;
    uint off = uint(at + 0.5);
    uvec4 limit = uvec4(pc.cache_t.n, pc.cache_t.c4, pc.cache_t.h, pc.cache_t.w);
    p[pc.axis] += off;
    if (p[pc.axis] >= limit[pc.axis]) return;
    uint j = texel_index(pc.cache_t, p.x * pc.cache_t.c4 + p.y, p.z, p.w);
    STORE_CACHE_TEXEL(img_cache, pc.cache_t, j, v);
}
