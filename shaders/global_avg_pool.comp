#version 450
// GlobalAveragePool: one workgroup per output texel [N, C, 1, 1]; 64 invocations sum strided
// pixels of the input layer, then a shared-memory tree reduction. fp32 accumulation.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);

layout(push_constant) uniform Push {
    TensorDesc in_t;
    TensorDesc out_t;
} pc;

shared vec4 part[64];

void main() {
    uint o = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint lid = gl_LocalInvocationID.x;
    bool live = o < tensor_texels(pc.out_t);
    uint hw = pc.in_t.h * pc.in_t.w;
    vec4 s = vec4(0.0);
    // Output layer o (H = W = 1) reads input layer o; every invocation reaches the barriers.
    if (live) {
        uint base = texel_index(pc.in_t, o, 0u, 0u);
        for (uint k = lid; k < hw; k += 64u) s += LOAD_TEXEL(img_in, pc.in_t, base + k);
    }
    part[lid] = s;
    barrier();
    for (uint st = 32u; st > 0u; st >>= 1u) {
        if (lid < st) part[lid] += part[lid + st];
        barrier();
    }
    if (live && lid == 0u) {
        STORE_TEXEL(img_out, pc.out_t, o, zero_padding(pc.out_t, o % pc.out_t.c4, part[0] / float(hw)));
    }
}
