#version 450
// Trilu: keep x where the (row, col) of the last two axes (H, W under the rank rule) lies on the
// kept side of diagonal k, zero elsewhere. The four lanes of a texel share one (row, col).
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_x);
TENSOR_OUT(1, img_y);

layout(push_constant) uniform Push {
    TensorDesc y_t;
    TensorDesc x_t;
    int k;
    uint upper;  // 1: Triu (col - row >= k), 0: Tril (col - row <= k)
} pc;

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.y_t)) return;
    uvec4 p = texel_nc4yx(pc.y_t, i);
    int d = int(p.w) - int(p.z);
    bool keep = pc.upper != 0u ? d >= pc.k : d <= pc.k;
    vec4 v = keep ? LOAD_TEXEL(img_x, pc.x_t, texel_index(pc.x_t, p.x * pc.x_t.c4 + p.y, p.z, p.w)) : vec4(0.0);
    STORE_TEXEL(img_y, pc.y_t, i, zero_padding(pc.y_t, p.y, v));
}
