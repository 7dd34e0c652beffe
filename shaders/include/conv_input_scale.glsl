// The per-channel factor on a dense convolution's input: ONNX's Mul(x, s) with s of shape
// [N, C, 1, 1] (a squeeze-and-excitation block's scale) folded into the convolution that reads
// the product (the importer's `passes::channel_scale`), so the product is never written. Bound
// at 3, one texel per input layer (its width and height are 1, its fold pc.scale_pw and
// pc.scale_ph); read only in pipelines built with INPUT_SCALED, specialization constant 1
// (vk_backend's `Specialization::input_scaled`; elsewhere 3 holds the input itself): a test of
// a push constant inside the reduction loop cost llvmpipe a third more time on every
// convolution. Needs the conv push constants.
#ifndef TEXSTREAM_CONV_INPUT_SCALE_GLSL
#define TEXSTREAM_CONV_INPUT_SCALE_GLSL

layout(constant_id = 1) const bool INPUT_SCALED = false;

TENSOR_IN(3, img_scale);

bool conv_input_scaled() { return INPUT_SCALED; }

// The factors of input layer `layer` (image n's channels 4 * (layer - n * c4)..).
vec4 conv_input_scale(uint layer) {
    TensorDesc t = TensorDesc(1u, 4u, 1u, 1u, 1u, pc.scale_pw, pc.scale_ph, 1u);
    return LOAD_TEXEL(img_scale, t, layer);
}

// Input texel `v` times its factors `f`, rounded to the nearest fp16 value: for the tensor-core
// kernels, which stage their operands in fp16. The product is then the one the unfused Mul
// stored (round_to_half, as every fp16 store), where a plain conversion rounds as the driver
// likes. They load `f` beside `v` and multiply only when they stage the texel, so that the
// loads stay in flight while the previous step's products run (multiplied at the load, the
// scaled 1x1 projections of MobileNetV3-Large took 20-30 % longer on an H100, session 42).
vec4 conv_scaled_half(vec4 v, vec4 f) { return round_to_half(v * f); }

// `wm`'s columns (one output channel's weights over the layer's four input channels) times the
// factors of input layer `layer`: the same products as scaling the input texels.
mat4 conv_scaled_filter(mat4 wm, uint layer) {
    vec4 s = conv_input_scale(layer);
    return mat4(wm[0] * s, wm[1] * s, wm[2] * s, wm[3] * s);
}

#endif
