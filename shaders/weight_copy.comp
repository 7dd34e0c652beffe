#version 450
// Copies a range of the weight space into an activation tensor's texel stream:
// out texel i = fetch_weight(offset + i). Exercises the page table; also useful to materialize
// constants.
#include "tensor.glsl"
#include "weights.glsl"

layout(local_size_x = 64) in;

TENSOR_OUT(0, img_out);

layout(push_constant) uniform Push {
    TensorDesc t;
    uint texel_offset;
    uint _pad0, _pad1, _pad2;
} pc;

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.t)) return;
    STORE_TEXEL(img_out, pc.t, i, fetch_weight(pc.texel_offset + i));
}
