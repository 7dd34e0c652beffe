#version 450
// MaxPool / AveragePool over H, W (strides, pads, dilation, ceil-mode output sizes computed on the
// CPU). One invocation per output texel; channels stay in their lane.
// Average divisor: taps inside the input (count_include_pad = 0), or taps inside the padded
// extent [-top, H + bottom) x [-left, W + right) (count_include_pad = 1; windows that ceil_mode
// pushes past the padded extent are clipped, as in ONNX Runtime and PyTorch).
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);

layout(push_constant) uniform Push {
    TensorDesc in_t;
    TensorDesc out_t;
    uint kernel;    // kh | kw << 16
    uint stride;    // sh | sw << 16
    uint dilation;  // dh | dw << 16
    uint pad;       // top | left << 16
    uint pad_end;   // bottom | right << 16
    uint mode;      // 0 max, 1 average excluding pads, 2 average including pads
    uint _pad0, _pad1;
} pc;

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.out_t)) return;
    uvec4 p = texel_nc4yx(pc.out_t, i);
    uint layer = p.x * pc.out_t.c4 + p.y;
    uint kh = pc.kernel & 0xFFFFu, kw = pc.kernel >> 16u;
    uint sh = pc.stride & 0xFFFFu, sw = pc.stride >> 16u;
    uint dh = pc.dilation & 0xFFFFu, dw = pc.dilation >> 16u;
    int pt = int(pc.pad & 0xFFFFu), pl = int(pc.pad >> 16u);
    int pb = int(pc.pad_end & 0xFFFFu), pr = int(pc.pad_end >> 16u);
    int H = int(pc.in_t.h), W = int(pc.in_t.w);
    int iy0 = int(p.z * sh) - pt, ix0 = int(p.w * sw) - pl;

    vec4 acc = pc.mode == 0u ? vec4(uintBitsToFloat(0xFF800000u)) : vec4(0.0);
    uint inside = 0u, padded = 0u;
    for (uint ky = 0u; ky < kh; ++ky) {
        int iy = iy0 + int(ky * dh);
        bool row_in = iy >= 0 && iy < H;
        bool row_pad = iy >= -pt && iy < H + pb;
        for (uint kx = 0u; kx < kw; ++kx) {
            int ix = ix0 + int(kx * dw);
            if (row_pad && ix >= -pl && ix < W + pr) padded++;
            if (!row_in || ix < 0 || ix >= W) continue;
            inside++;
            vec4 v = LOAD_TEXEL(img_in, pc.in_t, texel_index(pc.in_t, layer, uint(iy), uint(ix)));
            acc = pc.mode == 0u ? max(acc, v) : acc + v;
        }
    }
    if (pc.mode == 1u) acc /= float(max(inside, 1u));
    if (pc.mode == 2u) acc /= float(max(padded, 1u));
    STORE_TEXEL(img_out, pc.out_t, i, zero_padding(pc.out_t, p.y, acc));
}
