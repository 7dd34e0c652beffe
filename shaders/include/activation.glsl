// Shared activation functions: the unary elementwise kernel and every fused epilogue (Conv,
// ConvTranspose, MatMul, ...) call apply_unary(op, alpha, beta, v) with the op code of
// vk_backend::kernels::UnaryOp (20 = Identity = no activation).
#ifndef TEXSTREAM_ACTIVATION_GLSL
#define TEXSTREAM_ACTIVATION_GLSL

const uint ACT_IDENTITY = 20u;
const float ACT_SQRT1_2 = 0.70710678118654752;

// erf: odd Taylor series near 0 (relative accuracy), Abramowitz-Stegun 7.1.26 elsewhere
// (absolute error <= 1.5e-7).
float erf1(float x) {
    float ax = abs(x);
    if (ax < 0.5) {
        float x2 = x * x;
        return 1.1283791670955126 * x *
               (1.0 + x2 * (-1.0 / 3.0 + x2 * (0.1 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0 - x2 / 1320.0)))));
    }
    float t = 1.0 / (1.0 + 0.3275911 * ax);
    float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                     0.254829592) * t * exp(-ax * ax);
    return sign(x) * y;
}

vec4 erf4(vec4 v) { return vec4(erf1(v.x), erf1(v.y), erf1(v.z), erf1(v.w)); }

vec4 tanh_safe(vec4 v) { return tanh(clamp(v, -15.0, 15.0)); }

vec4 apply_unary(uint op, float a, float b, vec4 v) {
    switch (op) {
        case 0u: return max(v, 0.0);                                            // Relu
        case 1u: return mix(v, v * a, lessThan(v, vec4(0.0)));                  // LeakyRelu
        case 2u: return 1.0 / (1.0 + exp(-v));                                  // Sigmoid
        case 3u: return clamp(a * v + b, 0.0, 1.0);                             // HardSigmoid
        case 4u: return v * clamp(v / 6.0 + 0.5, 0.0, 1.0);                     // HardSwish
        case 5u: return tanh_safe(v);                                           // Tanh
        case 6u: return erf4(v);                                                // Erf
        case 7u: return 0.5 * v * (1.0 + erf4(v * ACT_SQRT1_2));                // Gelu (exact)
        case 8u: return 0.5 * v * (1.0 + tanh_safe(0.7978845608028654 * (v + 0.044715 * v * v * v)));  // Gelu tanh
        case 9u: return exp(v);                                                 // Exp
        case 10u: return sqrt(v);                                               // Sqrt
        case 11u: return 1.0 / v;                                               // Reciprocal
        case 12u: return clamp(v, a, b);                                        // Clip(min, max)
        case 13u: return -v;                                                    // Neg
        case 14u: return abs(v);                                                // Abs
        case 15u: return log(v);                                                // Log
        case 16u: return mix(v, a * (exp(v) - 1.0), lessThan(v, vec4(0.0)));    // Elu
        case 17u: return mix(v + log(1.0 + exp(-v)), log(1.0 + exp(v)), lessThan(v, vec4(0.0)));  // Softplus
        case 18u: return floor(v);                                              // Floor
        case 19u: return ceil(v);                                               // Ceil
        case 20u: return v;                                                     // Identity
        case 21u: return v * (1.0 / (1.0 + exp(-v)));                           // Silu
        case 22u: return sin(v);                                                // Sin
        case 23u: return cos(v);                                                // Cos
        case 24u: return vec4(isnan(v));                                        // IsNaN
        default: return vec4(uintBitsToFloat(0x7FC00000u));
    }
}

#endif
