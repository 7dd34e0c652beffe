#version 450
// Concat that moves whole texels, up to 8 inputs a dispatch: along channels of rank-4 tensors
// where every input starts on a texel boundary of the output (the channel counts of all but the
// last input are multiples of 4), or along the height or width axis of the layout (a texel's four
// lanes are then the same channels in input and output). One invocation per output texel of the
// inputs' span copies one texel. The generic copy (copy.comp) takes a dispatch, a parameter buffer
// and a barrier per input and decomposes every lane into six coordinates: DenseNet's channel
// concatenations have up to 25 inputs, and PP-OCR's split recognizer head (9 pieces of 2079
// columns) took 28 ms on lavapipe that way. The parameter buffer gives each input's first output
// position along the axis (C4 block, row or column), its extent along it, and its fold (physical
// width and height), from which its TensorDesc is rebuilt.
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
    uvec4 input_at[8];  // per input: first output position, extent, physical width, height
} prm;

layout(push_constant) uniform Push {
    TensorDesc dst_t;
    uint inputs;  // inputs in this dispatch (1..8)
    uint span;    // output positions along the axis this dispatch covers, from input 0's first
    uint axis;    // 0: C4 blocks, 1: rows (h), 2: columns (w)
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
    uint C4 = pc.axis == 0u ? pc.span : pc.dst_t.c4;
    uint H = pc.axis == 1u ? pc.span : pc.dst_t.h;
    uint W = pc.axis == 2u ? pc.span : pc.dst_t.w;
    if (i >= pc.dst_t.n * C4 * H * W) return;
    // Coordinates in the dispatch's box; the axis one is then shifted to the output's.
    uint x = i % W;
    uint t = i / W;
    uint y = t % H;
    t /= H;
    uint c4 = t % C4;
    uint n = t / C4;
    uint first = prm.input_at[0].x;
    uint pos = first + (pc.axis == 0u ? c4 : (pc.axis == 1u ? y : x));
    uint j = 0u;
    for (uint k = 1u; k < pc.inputs; k++) {
        if (pos >= prm.input_at[k].x) j = k;
    }
    uvec4 at = prm.input_at[j];
    uint local = pos - at.x;
    uint oc4 = c4, oy = y, ox = x;
    uint ic4 = c4, iy = y, ix = x;
    TensorDesc s = pc.dst_t;
    s.pw = at.z;
    s.ph = at.w;
    if (pc.axis == 0u) {
        s.c = 4u * at.y;
        s.c4 = at.y;
        oc4 = pos;
        ic4 = local;
    } else if (pc.axis == 1u) {
        s.h = at.y;
        oy = pos;
        iy = local;
    } else {
        s.w = at.y;
        ox = pos;
        ix = local;
    }
    vec4 v = load_input(j, s, texel_index(s, n * s.c4 + ic4, iy, ix));
    STORE_TEXEL(img_dst, pc.dst_t, texel_index(pc.dst_t, n * pc.dst_t.c4 + oc4, oy, ox), v);
}
