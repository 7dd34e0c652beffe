#version 450
// Elementwise binary ops with full numpy broadcasting: out = op(a, b).
// Broadcasting works on the 6-D padded shapes (see vk_backend::layout rank rule): bit k of a
// mask says the operand's dim k is 1 while the output's is not. One invocation per output texel.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_a);
TENSOR_IN(1, img_b);
TENSOR_OUT(2, img_out);

layout(push_constant) uniform Push {
    TensorDesc out_t;
    TensorDesc a_t;
    TensorDesc b_t;
    uint op;     // vk_backend::kernels::BinaryOp as u32
    uint lead1;  // output dims d1, d2 (N = d0*d1*d2)
    uint lead2;
    uint masks;  // bits 0-5: a, bits 8-13: b, bit 16: all shapes equal (texel-wise fast path)
} pc;

#define INF uintBitsToFloat(0x7F800000u)
#define NAN uintBitsToFloat(0x7FC00000u)

float pow_onnx(float x, float y) {
    if (y == 0.0) return 1.0;
    if (x == 0.0) return y > 0.0 ? 0.0 : INF;
    if (x < 0.0) {
        float r = floor(y);
        if (r != y) return NAN;
        float m = pow(-x, y);
        return mod(r, 2.0) == 1.0 ? -m : m;
    }
    return pow(x, y);
}

// Integer quotient truncated toward zero. a / b may be off by a few ulps (GLSL division is not
// correctly rounded), so the float quotient is corrected against the exact remainder.
vec4 int_div(vec4 a, vec4 b) {
    vec4 x = abs(a), y = abs(b);
    vec4 q = trunc(x / y);
    vec4 r = x - q * y;  // exact: integers below 2^24
    q += vec4(greaterThanEqual(r, y)) - vec4(lessThan(r, vec4(0.0)));
    return mix(q, -q, notEqual(lessThan(a, vec4(0.0)), lessThan(b, vec4(0.0))));
}

// Remainder with the dividend's sign, from the corrected truncated quotient.
vec4 fmod_trunc(vec4 a, vec4 b) {
    return a - int_div(a, b) * b;
}

// Remainder with the divisor's sign.
vec4 mod_floor(vec4 a, vec4 b) {
    vec4 r = fmod_trunc(a, b);
    bvec4 flip = bvec4(vec4(notEqual(r, vec4(0.0))) * vec4(notEqual(lessThan(r, vec4(0.0)), lessThan(b, vec4(0.0)))));
    return mix(r, r + b, flip);
}

vec4 apply(vec4 a, vec4 b) {
    switch (pc.op) {
        case 0u: return a + b;
        case 1u: return a - b;
        case 2u: return a * b;
        case 3u: return a / b;
        case 4u: return vec4(pow_onnx(a.x, b.x), pow_onnx(a.y, b.y), pow_onnx(a.z, b.z), pow_onnx(a.w, b.w));
        case 5u: return mix(a, a * b, lessThan(a, vec4(0.0)));  // PRelu(x = a, slope = b)
        case 6u: return max(a, b);
        case 7u: return min(a, b);
        case 8u: return int_div(a, b);
        case 9u: return roundEven(vec4(pow_onnx(a.x, b.x), pow_onnx(a.y, b.y), pow_onnx(a.z, b.z), pow_onnx(a.w, b.w)));
        case 10u: return fmod_trunc(a, b);
        case 11u: return mod_floor(a, b);
        default: return vec4(NAN);
    }
}

// Texel of an operand that feeds output texel (n, c4i, y, x), broadcast per `m`.
uint operand_texel(TensorDesc t, uint m, uint n, uint c4i, uint y, uint x) {
    uint d1 = pc.lead1, d2 = pc.lead2;
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

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.out_t)) return;
    uvec4 p = texel_nc4yx(pc.out_t, i);
    vec4 a, b;
    if ((pc.masks & 0x10000u) != 0u) {
        a = LOAD_TEXEL(img_a, pc.a_t, i);
        b = LOAD_TEXEL(img_b, pc.b_t, i);
    } else {
        uint ma = pc.masks & 63u;
        uint mb = (pc.masks >> 8u) & 63u;
        a = LOAD_TEXEL(img_a, pc.a_t, operand_texel(pc.a_t, ma, p.x, p.y, p.z, p.w));
        b = LOAD_TEXEL(img_b, pc.b_t, operand_texel(pc.b_t, mb, p.x, p.y, p.z, p.w));
        // A broadcast channel dim has its one value in lane 0.
        if ((ma & 8u) != 0u) a = a.xxxx;
        if ((mb & 8u) != 0u) b = b.xxxx;
    }
    STORE_TEXEL(img_out, pc.out_t, i, zero_padding(pc.out_t, p.y, apply(a, b)));
}
