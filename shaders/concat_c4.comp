#version 450
// Concat along channels of rank-4 tensors where every input starts on a texel boundary of the
// output (the channel counts of all but the last input are multiples of 4), up to 8 inputs a
// dispatch: one invocation per output texel of the inputs' C4 blocks copies one whole texel. The
// generic copy (copy.comp) would take a dispatch, a parameter buffer and a barrier per input and
// decompose every lane; DenseNet's concatenations have up to 25 inputs. The parameter buffer gives
// each input's first output C4 block, its C4 blocks and its fold (physical width and height),
// from which its TensorDesc is rebuilt.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, src0);
TENSOR_IN(1, src1);
TENSOR_IN(2, src2);
TENSOR_IN(3, src3);
TENSOR_IN(4, src4);
TENSOR_IN(5, src5);
TENSOR_IN(6, src6);
TENSOR_IN(7, src7);
TENSOR_OUT(8, img_dst);

layout(set = 0, binding = 9, std430) readonly buffer Params {
    uvec4 input_at[8];  // per input: first output C4 block, C4 blocks, physical width, height
} prm;

layout(push_constant) uniform Push {
    TensorDesc dst_t;
    uint inputs;  // inputs in this dispatch (1..8)
    uint box_c4;  // output C4 blocks this dispatch covers, from input 0's first
} pc;

vec4 load_input(uint j, TensorDesc t, uint i) {
    switch (j) {
        case 0u: return LOAD_TEXEL(src0, t, i);
        case 1u: return LOAD_TEXEL(src1, t, i);
        case 2u: return LOAD_TEXEL(src2, t, i);
        case 3u: return LOAD_TEXEL(src3, t, i);
        case 4u: return LOAD_TEXEL(src4, t, i);
        case 5u: return LOAD_TEXEL(src5, t, i);
        case 6u: return LOAD_TEXEL(src6, t, i);
        default: return LOAD_TEXEL(src7, t, i);
    }
}

void main() {
    uint i = global_id_1d();
    uint H = pc.dst_t.h, W = pc.dst_t.w;
    if (i >= pc.dst_t.n * pc.box_c4 * H * W) return;
    uint x = i % W;
    uint t = i / W;
    uint y = t % H;
    t /= H;
    uint c4 = prm.input_at[0].x + t % pc.box_c4;
    uint n = t / pc.box_c4;
    uint j = 0u;
    for (uint k = 1u; k < pc.inputs; k++) {
        if (c4 >= prm.input_at[k].x) j = k;
    }
    uvec4 at = prm.input_at[j];
    TensorDesc s = TensorDesc(pc.dst_t.n, 4u * at.y, H, W, at.y, at.z, at.w, 0u);
    uint layer = n * at.y + (c4 - at.x);
    vec4 v = load_input(j, s, texel_index(s, layer, y, x));
    STORE_TEXEL(img_dst, pc.dst_t, texel_index(pc.dst_t, n * pc.dst_t.c4 + c4, y, x), v);
}
