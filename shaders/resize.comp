#version 450
// Resize over H and W (N and C unchanged): nearest (4 rounding modes) or bilinear, with the ONNX
// coordinate transforms half_pixel, pytorch_half_pixel, align_corners, asymmetric. One invocation
// per output texel; channels stay in their lane.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);

layout(push_constant) uniform Push {
    TensorDesc in_t;
    TensorDesc out_t;
    uint mode;     // bits 0-3: 0 nearest, 1 linear; bits 4-7: coord mode; bits 8-11: nearest mode;
                   // bit 12: scales were given (resized length = scale * len_in, unfloored)
    float scale_h; // ONNX scales used by the coordinate transform
    float scale_w;
    uint _pad;
} pc;

// Correctly rounded a / b: some drivers (NVIDIA) divide approximately, and nearest rounding of
// exact ties (x.5) must match ONNX Runtime's IEEE float arithmetic. One residual correction step.
float div_rn(float a, float b) {
    precise float q = a / b;
    precise float r = fma(-q, b, a);
    precise float res = q + r / b;
    return res;
}

// vk_backend::kernels::CoordMode codes: 0 half_pixel, 1 pytorch_half_pixel, 2 align_corners,
// 3 asymmetric. Same float operation order as ONNX Runtime. `len_resized` is the output length,
// or scale * len_in when ONNX `scales` were given (the ONNX reference does not floor it there).
float source_coord(uint xo, float scale, uint len_in, float len_resized, uint coord) {
    float x = float(xo);
    switch (coord) {
        case 0u: return div_rn(x + 0.5, scale) - 0.5;
        case 1u: return len_resized > 1.0 ? div_rn(x + 0.5, scale) - 0.5 : 0.0;
        case 2u: return len_resized == 1.0 ? 0.0 : div_rn(x * float(len_in - 1u), len_resized - 1.0);
        default: return div_rn(x, scale);
    }
}

// NearestMode codes: 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil.
uint nearest_index(float x, uint len_in, uint nmode) {
    float f = x - floor(x);
    float r;
    switch (nmode) {
        case 0u: r = f == 0.5 ? floor(x) : floor(x + 0.5); break;
        case 1u: r = f == 0.5 ? ceil(x) : floor(x + 0.5); break;
        case 2u: r = floor(x); break;
        default: r = ceil(x); break;
    }
    return uint(clamp(int(r), 0, int(len_in) - 1));
}

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.out_t)) return;
    uvec4 p = texel_nc4yx(pc.out_t, i);
    uint layer = p.x * pc.out_t.c4 + p.y;
    uint coord = (pc.mode >> 4u) & 15u;
    bool given = (pc.mode & 4096u) != 0u;
    float lh = given ? pc.scale_h * float(pc.in_t.h) : float(pc.out_t.h);
    float lw = given ? pc.scale_w * float(pc.in_t.w) : float(pc.out_t.w);
    float sy = source_coord(p.z, pc.scale_h, pc.in_t.h, lh, coord);
    float sx = source_coord(p.w, pc.scale_w, pc.in_t.w, lw, coord);
    vec4 v;
    if ((pc.mode & 15u) == 0u) {
        uint nmode = (pc.mode >> 8u) & 15u;
        uint iy = nearest_index(sy, pc.in_t.h, nmode);
        uint ix = nearest_index(sx, pc.in_t.w, nmode);
        v = LOAD_TEXEL(img_in, pc.in_t, texel_index(pc.in_t, layer, iy, ix));
    } else {
        sy = clamp(sy, 0.0, float(pc.in_t.h - 1u));
        sx = clamp(sx, 0.0, float(pc.in_t.w - 1u));
        uint y0 = min(uint(sy), pc.in_t.h - 1u), x0 = min(uint(sx), pc.in_t.w - 1u);
        uint y1 = min(y0 + 1u, pc.in_t.h - 1u), x1 = min(x0 + 1u, pc.in_t.w - 1u);
        float fy = sy - float(y0), fx = sx - float(x0);
        vec4 a = LOAD_TEXEL(img_in, pc.in_t, texel_index(pc.in_t, layer, y0, x0));
        vec4 b = LOAD_TEXEL(img_in, pc.in_t, texel_index(pc.in_t, layer, y0, x1));
        vec4 c = LOAD_TEXEL(img_in, pc.in_t, texel_index(pc.in_t, layer, y1, x0));
        vec4 d = LOAD_TEXEL(img_in, pc.in_t, texel_index(pc.in_t, layer, y1, x1));
        v = (a * (1.0 - fx) + b * fx) * (1.0 - fy) + (c * (1.0 - fx) + d * fx) * fy;
    }
    STORE_TEXEL(img_out, pc.out_t, i, zero_padding(pc.out_t, p.y, v));
}
