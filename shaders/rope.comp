#version 450
// Rotary position embedding (RoPE) in the "rotate half" form Llama-family exporters write as
// two Slices, a Neg, a Concat, two Muls and an Add:
//   out[.., s, w] = x[.., s, w] * cos[s, w] + rot[.., s, w] * sin[s, w],
//   rot[w] = -x[w + D/2] for w < D/2, x[w - D/2] otherwise.
// x and out share a layout ([N, C, S, D] by the rank rule: four heads a texel); cos and sin are
// [1, 1, S, D] (one value a texel, lane 0), read at the same (s, w) by every head.
// One invocation per output texel.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_x);
TENSOR_IN(1, img_cos);
TENSOR_IN(2, img_sin);
TENSOR_OUT(3, img_out);

layout(push_constant) uniform Push {
    TensorDesc x_t;
    TensorDesc cos_t;
    TensorDesc sin_t;
    uint half_d;
} pc;

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.x_t)) return;
    uvec4 p = texel_nc4yx(pc.x_t, i);
    uint layer = p.x * pc.x_t.c4 + p.y, s = p.z, w = p.w;
    vec4 v = LOAD_TEXEL(img_x, pc.x_t, i);
    bool low = w < pc.half_d;
    vec4 r = LOAD_TEXEL(img_x, pc.x_t, texel_index(pc.x_t, layer, s, low ? w + pc.half_d : w - pc.half_d));
    if (low) r = -r;
    float c = LOAD_TEXEL(img_cos, pc.cos_t, texel_index(pc.cos_t, 0u, s, w)).x;
    float sn = LOAD_TEXEL(img_sin, pc.sin_t, texel_index(pc.sin_t, 0u, s, w)).x;
    STORE_TEXEL(img_out, pc.x_t, i, zero_padding(pc.x_t, p.y, v * c + r * sn));
}
