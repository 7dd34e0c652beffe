#version 450
// Elementwise unary ops: out = f(in), same shape. One invocation per texel.
#include "tensor.glsl"
#include "activation.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);

layout(push_constant) uniform Push {
    TensorDesc t;  // input and output share the layout
    uint op;       // vk_backend::kernels::UnaryOp code
    float alpha;
    float beta;
    uint _pad;
} pc;

vec4 apply(vec4 v) { return apply_unary(pc.op, pc.alpha, pc.beta, v); }

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.t)) return;
    uint c4i = texel_nc4yx(pc.t, i).y;
    vec4 v = LOAD_TEXEL(img_in, pc.t, i);
    STORE_TEXEL(img_out, pc.t, i, zero_padding(pc.t, c4i, apply(v)));
}
