#version 450
// CumSum along one of the 6 padded dims (rank rule): inclusive or exclusive, forward or reverse.
// One invocation per output texel; each lane sums its line serially in fp32, which is cheap for
// the short lines exporters scan (attention masks, position ids).
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_x);
TENSOR_OUT(1, img_y);

layout(push_constant) uniform Push {
    TensorDesc y_t;
    TensorDesc x_t;
    uint dims[6];
    uint axis;   // padded dim 0..5
    uint flags;  // bit 0: exclusive, bit 1: reverse
} pc;

float load_x(uint c[6]) {
    uint layer = ((c[0] * pc.dims[1] + c[1]) * pc.dims[2] + c[2]) * pc.x_t.c4 + c[3] / 4u;
    return LOAD_TEXEL(img_x, pc.x_t, texel_index(pc.x_t, layer, c[4], c[5]))[c[3] % 4u];
}

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.y_t)) return;
    uvec4 p = texel_nc4yx(pc.y_t, i);
    uint c[6];
    c[2] = p.x % pc.dims[2];
    c[1] = (p.x / pc.dims[2]) % pc.dims[1];
    c[0] = p.x / (pc.dims[1] * pc.dims[2]);
    c[4] = p.z;
    c[5] = p.w;
    bool excl = (pc.flags & 1u) != 0u;
    bool rev = (pc.flags & 2u) != 0u;
    vec4 v = vec4(0.0);
    for (uint l = 0u; l < 4u; l++) {
        uint ch = p.y * 4u + l;
        if (ch >= pc.dims[3]) break;
        c[3] = ch;
        uint at = c[pc.axis];
        uint lo = rev ? at + (excl ? 1u : 0u) : 0u;
        uint hi = rev ? pc.dims[pc.axis] : at + (excl ? 0u : 1u);
        float s = 0.0;
        for (uint j = lo; j < hi; j++) {
            uint q[6] = c;
            q[pc.axis] = j;
            s += load_x(q);
        }
        v[l] = s;
    }
    STORE_TEXEL(img_y, pc.y_t, i, zero_padding(pc.y_t, p.y, v));
}
