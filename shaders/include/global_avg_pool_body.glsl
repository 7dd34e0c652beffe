// Body of global_avg_pool.comp and global_avg_pool_narrow.comp.
// GlobalAveragePool: one workgroup per output texel [N, C, 1, 1]; its WG invocations sum the
// input layer's pixels four at a time by coordinates (LOAD_AT: no fold's divisions a load), then
// a shared-memory tree reduction. fp32 accumulation. 64 invocations walking one pixel at a time
// by linear index left the PP-OCR detector's pools over 96 x 192 pixels (24 output texels, 288
// dependent loads an invocation) at 48 us each on an H100.
// Entries: global_avg_pool.comp (WG 256) and global_avg_pool_narrow.comp (WG 64, for devices
// that run few invocations at once: llvmpipe runs a workgroup's invocations a few lanes at a
// time, so more of them only add rounds of the tree and its barriers).
#ifndef TEXSTREAM_GLOBAL_AVG_POOL_BODY_GLSL
#define TEXSTREAM_GLOBAL_AVG_POOL_BODY_GLSL
#extension GL_EXT_control_flow_attributes : require
#include "tensor.glsl"

layout(local_size_x = WG) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);

layout(push_constant) uniform Push {
    TensorDesc in_t;
    TensorDesc out_t;
} pc;

shared vec4 part[WG];

void main() {
    uint o = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint lid = gl_LocalInvocationID.x;
    bool live = o < tensor_texels(pc.out_t);
    uint w = pc.in_t.w, hw = pc.in_t.h * w;
    vec4 s[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
    // Output layer o (H = W = 1) reads input layer o; every invocation reaches the barriers.
    // Pixel k = lid + WG * i of the layer is (k / w, k % w); stepping k by WG steps (y, x) by
    // (WG / w, WG % w) with a carry, so the loop divides nothing.
    if (live) {
        uint dy = WG / w, dx = WG % w;
        uint y = lid / w, x = lid % w;
        for (uint k = lid; k < hw; k += 4u * WG) {
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                if (k + j * WG < hw) s[j] += LOAD_AT(img_in, pc.in_t, o, y, x);
                x += dx;
                y += dy;
                if (x >= w) {
                    x -= w;
                    y += 1u;
                }
            }
        }
    }
    part[lid] = (s[0] + s[1]) + (s[2] + s[3]);
    barrier();
    for (uint st = WG / 2u; st > 0u; st >>= 1u) {
        if (lid < st) part[lid] += part[lid + st];
        barrier();
    }
    if (live && lid == 0u) {
        STORE_TEXEL(img_out, pc.out_t, o, zero_padding(pc.out_t, o % pc.out_t.c4, part[0] / float(hw)));
    }
}

#endif
