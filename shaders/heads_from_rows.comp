#version 450
// The exporters' head split of a projection's rows as one copy: rows [1, S, H * D] (one value a
// texel) into heads [1, H, S, D] (texel (d, s) of layer h / 4 holding heads h..h+3, as a
// Reshape to [1, S, H, D] and a Transpose(0, 2, 1, 3) leave them). One invocation a texel
// written: four loads of one row, one store. The generic strided copy (copy.comp) takes six
// divisions a lane for the same.
#extension GL_EXT_control_flow_attributes : require
#include "tensor.glsl"

layout(local_size_x = 64, local_size_y = 4) in;

TENSOR_IN(0, img_rows);
TENSOR_OUT(1, img_out);

layout(push_constant) uniform Push {
    TensorDesc out_t;
    TensorDesc rows_t;
} pc;

void main() {
    uint d = gl_GlobalInvocationID.x, s = gl_GlobalInvocationID.y, layer = gl_GlobalInvocationID.z;
    uint D = pc.out_t.w, S = pc.out_t.h, H = pc.out_t.c;
    if (d >= D || s >= S) {
        return;
    }
    vec4 v = vec4(0.0);
    [[unroll]] for (uint l = 0u; l < 4u; l++) {
        uint h = 4u * layer + l;
        if (h < H) {
            v[l] = LOAD_AT(img_rows, pc.rows_t, 0u, s, h * D + d).x;
        }
    }
    STORE_TEXEL(img_out, pc.out_t, texel_index(pc.out_t, layer, s, d), v);
}
