// The push constants of the convolution kernels (conv2d*.comp, conv_transpose2d.comp and the
// cooperative-matrix bodies): vk_backend::kernels::conv's `conv_push_constants`, 128 bytes.
#ifndef TEXSTREAM_CONV_PUSH_GLSL
#define TEXSTREAM_CONV_PUSH_GLSL

layout(push_constant) uniform Push {
    TensorDesc in_t;
    TensorDesc out_t;
    uint kernel;    // kh | kw << 16
    uint stride;    // sh | sw << 16
    uint dilation;  // dh | dw << 16
    uint pad;       // top | left << 16
    uint icg;       // input channels per group
    uint ocg;       // output channels per group
    uint w_off;     // filter texel offset in the weight space
    uint b_off;     // bias texel offset, 0xFFFFFFFF = no bias
    uint act;       // activation code (bits 0-7), bit 8: general grouped path, bit 9: addend,
                    // bit 10: units counted flat (include/conv_units.glsl)
    float alpha;
    float beta;
    uint split_log2;  // the split kernels (conv2d*_splitk.comp): log2 of the lanes a unit; the
                      // tensor-core ones split over reduction spans (conv2d_coop*_splitk.comp and
                      // their combine): the spans; 0 else
    uint part_pw;     // the spans' partial results' physical width and height (their fold;
    uint part_ph;     // the tensor-core split kernels and their combine)
    uint scale_pw;    // the input scale's physical width and height (its fold)
    uint scale_ph;
} pc;

// The window's locals from the push constants: kernel kh x kw, strides sh, sw, dilations dh,
// dw, and the top and left pads pt, pl (as ints: they are subtracted from coordinates).
#define CONV_WINDOW_LOCALS()                                          \
    uint kh = pc.kernel & 0xFFFFu, kw = pc.kernel >> 16u;            \
    uint sh = pc.stride & 0xFFFFu, sw = pc.stride >> 16u;            \
    uint dh = pc.dilation & 0xFFFFu, dw = pc.dilation >> 16u;        \
    int pt = int(pc.pad & 0xFFFFu), pl = int(pc.pad >> 16u)

#endif
