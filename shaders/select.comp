#version 450
// Where(cond, x, y) and comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or,
// Xor) with numpy broadcasting of all operands; booleans are 0.0 / 1.0. One invocation per output
// texel. Broadcast masks as in binary.comp: bit k = operand dim k is 1 while the output's is not.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_a);
TENSOR_IN(1, img_b);
TENSOR_IN(2, img_c);
TENSOR_OUT(3, img_out);

layout(set = 0, binding = 4, std430) readonly buffer Params {
    uint op;     // 0 Where(a ? b : c), 1 ==, 2 <, 3 >, 4 <=, 5 >=, 6 and, 7 or, 8 xor
    uint lead1;  // output dims d1, d2
    uint lead2;
    uint masks;  // bits 0-5: a, 8-13: b, 16-21: c
} prm;

layout(push_constant) uniform Push {
    TensorDesc out_t;
    TensorDesc a_t;
    TensorDesc b_t;
    TensorDesc c_t;
} pc;

uint operand_texel(TensorDesc t, uint m, uint n, uint c4i, uint y, uint x) {
    uint d1 = prm.lead1, d2 = prm.lead2;
    uint i2 = n % d2;
    uint i1 = (n / d2) % d1;
    uint i0 = n / (d1 * d2);
    uint na = (((m & 1u) != 0u ? 0u : i0) * ((m & 2u) != 0u ? 1u : d1) + ((m & 2u) != 0u ? 0u : i1)) *
                  ((m & 4u) != 0u ? 1u : d2) +
              ((m & 4u) != 0u ? 0u : i2);
    uint ca = (m & 8u) != 0u ? 0u : c4i;
    uint ya = (m & 16u) != 0u ? 0u : y;
    uint xa = (m & 32u) != 0u ? 0u : x;
    return texel_index(t, na * t.c4 + ca, ya, xa);
}

vec4 b2f(bvec4 b) { return vec4(b); }

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.out_t)) return;
    uvec4 p = texel_nc4yx(pc.out_t, i);
    uint ma = prm.masks & 63u, mb = (prm.masks >> 8u) & 63u, mc = (prm.masks >> 16u) & 63u;
    vec4 a = LOAD_TEXEL(img_a, pc.a_t, operand_texel(pc.a_t, ma, p.x, p.y, p.z, p.w));
    vec4 b = LOAD_TEXEL(img_b, pc.b_t, operand_texel(pc.b_t, mb, p.x, p.y, p.z, p.w));
    // A broadcast channel dim has its one value in lane 0.
    if ((ma & 8u) != 0u) a = a.xxxx;
    if ((mb & 8u) != 0u) b = b.xxxx;
    vec4 r;
    bvec4 an = notEqual(a, vec4(0.0)), bn = notEqual(b, vec4(0.0));
    switch (prm.op) {
        case 0u: {
            vec4 c = LOAD_TEXEL(img_c, pc.c_t, operand_texel(pc.c_t, mc, p.x, p.y, p.z, p.w));
            if ((mc & 8u) != 0u) c = c.xxxx;
            r = mix(c, b, an);
            break;
        }
        case 1u: r = b2f(equal(a, b)); break;
        case 2u: r = b2f(lessThan(a, b)); break;
        case 3u: r = b2f(greaterThan(a, b)); break;
        case 4u: r = b2f(lessThanEqual(a, b)); break;
        case 5u: r = b2f(greaterThanEqual(a, b)); break;
        case 6u: r = b2f(bvec4(uvec4(an) & uvec4(bn))); break;
        case 7u: r = b2f(bvec4(uvec4(an) | uvec4(bn))); break;
        default: r = b2f(notEqual(an, bn)); break;
    }
    STORE_TEXEL(img_out, pc.out_t, i, zero_padding(pc.out_t, p.y, r));
}
