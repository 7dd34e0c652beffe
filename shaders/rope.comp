#version 450
// Rotary position embedding (RoPE) in the "rotate half" form Llama-family exporters write as
// two Slices, a Neg, a Concat, two Muls and an Add:
//   out[.., s, w] = x[.., s, w] * cos[s, w] + rot[.., s, w] * sin[s, w],
//   rot[w] = -x[w + D/2] for w < D/2, x[w - D/2] otherwise.
// out is [N, C, S, D] by the rank rule (four heads a texel); x has out's layout, or with
// split_heads it is a projection's rows [N, S, C * D] (one value a texel, the batch in the
// lanes), read head by head: the exporters' head split as this kernel's load. cos and sin are
// [1, 1, S, D] (one value a texel, lane 0), read at the same (s, w) by every head, and share one
// descriptor. One invocation per output texel.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_x);
TENSOR_IN(1, img_cos);
TENSOR_IN(2, img_sin);
TENSOR_OUT(3, img_out);

layout(push_constant) uniform Push {
    TensorDesc x_t;
    TensorDesc out_t;
    TensorDesc table_t;
    uint half_d;
    uint split_heads;
} pc;

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.out_t)) return;
    uvec4 p = texel_nc4yx(pc.out_t, i);
    uint layer = p.x * pc.out_t.c4 + p.y, s = p.z, w = p.w;
    uint partner = w < pc.half_d ? w + pc.half_d : w - pc.half_d;
    vec4 v, r;
    if (pc.split_heads == 0u) {
        v = LOAD_TEXEL(img_x, pc.x_t, i);
        r = LOAD_TEXEL(img_x, pc.x_t, texel_index(pc.x_t, layer, s, partner));
    } else {
        // Head h = 4 * block + lane of batch n is x[n, s, h * D + w].
        uint d = pc.out_t.w;
        for (uint l = 0u; l < 4u; l++) {
            uint h = min(4u * p.y + l, pc.out_t.c - 1u);
            v[l] = LOAD_ELEMENT(img_x, pc.x_t, 0u, p.x, s, h * d + w);
            r[l] = LOAD_ELEMENT(img_x, pc.x_t, 0u, p.x, s, h * d + partner);
        }
    }
    if (w < pc.half_d) r = -r;
    float c = LOAD_TEXEL(img_cos, pc.table_t, texel_index(pc.table_t, 0u, s, w)).x;
    float sn = LOAD_TEXEL(img_sin, pc.table_t, texel_index(pc.table_t, 0u, s, w)).x;
    STORE_TEXEL(img_out, pc.out_t, i, zero_padding(pc.out_t, p.y, v * c + r * sn));
}
