#version 450
// A tensor's values in row-major (NCHW) order, packed densely into a buffer for readback:
// fp16 activations two a 32-bit word (packHalf2x16 of values that are already fp16, so exact
// under any rounding mode), fp32 one a word. A one-channel tensor (a transformer's [1, T, D])
// holds one value in each 8-byte fp16 texel, so a texel copy reads back four times the bytes
// it needs; this reads a quarter of them. One invocation per output word.
// vk_backend::kernels::readback_into records it.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_x);
layout(set = 0, binding = 1, std430) writeonly buffer Dense { uint dense[]; };

layout(push_constant) uniform Push {
    TensorDesc x;
    uint first_word;  // where the values start in `dense`
    uint elements;    // N * C * H * W
} pc;

float value_at(uint e) {
    uint w = pc.x.w, hw = pc.x.h * w, chw = pc.x.c * hw;
    uint n = e / chw, c = (e / hw) % pc.x.c, y = (e / w) % pc.x.h, x = e % w;
    return LOAD_TEXEL(img_x, pc.x, texel_index_nchw(pc.x, n, c, y, x))[c % 4u];
}

void main() {
    uint i = global_id_1d();
#if TENSOR_HALF
    uint e = 2u * i;
    if (e >= pc.elements) return;
    float second = e + 1u < pc.elements ? value_at(e + 1u) : 0.0;
    dense[pc.first_word + i] = packHalf2x16(vec2(value_at(e), second));
#else
    if (i >= pc.elements) return;
    dense[pc.first_word + i] = floatBitsToUint(value_at(i));
#endif
}
