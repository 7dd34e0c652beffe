#version 450
// Pad on N, C, H, W: constant, reflect (mirror without repeating the edge) or edge. One invocation
// per output texel; each output lane maps to its own source channel (channel pads need not be
// multiples of 4).
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);

layout(push_constant) uniform Push {
    TensorDesc in_t;
    TensorDesc out_t;
    uint n0;     // leading pads per dim
    uint c0;
    uint h0;
    uint w0;
    uint mode;   // 0 constant, 1 reflect, 2 edge
    float value;
    uint _pad0, _pad1;
} pc;

// Maps an output coordinate minus its leading pad to a source index; -1 means "constant".
int source(int i, uint len) {
    int l = int(len);
    if (i >= 0 && i < l) return i;
    if (pc.mode == 0u) return -1;
    if (pc.mode == 2u || l == 1) return clamp(i, 0, l - 1);
    // Reflect; the wrapper guarantees pads < len, so one bounce suffices.
    return i < 0 ? -i : 2 * l - 2 - i;
}

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.out_t)) return;
    uvec4 p = texel_nc4yx(pc.out_t, i);
    int n = source(int(p.x) - int(pc.n0), pc.in_t.n);
    int y = source(int(p.z) - int(pc.h0), pc.in_t.h);
    int x = source(int(p.w) - int(pc.w0), pc.in_t.w);
    vec4 v = vec4(pc.value);
    if (n >= 0 && y >= 0 && x >= 0) {
        for (uint j = 0u; j < 4u; ++j) {
            int c = source(int(p.y * 4u + j) - int(pc.c0), pc.in_t.c);
            if (c < 0) continue;
            uint t = texel_index(pc.in_t, uint(n) * pc.in_t.c4 + uint(c) / 4u, uint(y), uint(x));
            v[j] = LOAD_TEXEL(img_in, pc.in_t, t)[uint(c) % 4u];
        }
    }
    STORE_TEXEL(img_out, pc.out_t, i, zero_padding(pc.out_t, p.y, v));
}
