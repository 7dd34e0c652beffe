// The partial results of a tensor-core convolution split over reduction spans
// (conv2d_coop*_splitk.comp write them, conv2d_coop_splitk_combine.comp sums them): per (span,
// image of the batch, output pixel) its output channels, four a texel, fp32 and without the
// bias, addend or activation. An fp32 tensor [1, 4, spans * N * pixels, ceil(O / 4)] bound at 4
// (after the input scale) whatever the activations' precision; its texels go through its fold
// (part_pw, part_ph in the push constants, include/conv_push.glsl).
#ifndef TEXSTREAM_CONV_PARTIALS_GLSL
#define TEXSTREAM_CONV_PARTIALS_GLSL

#ifdef TENSOR_STORAGE_BUFFER
layout(set = 0, binding = 4, std430) buffer Partials { vec4 partials[]; };
void store_partial(uint i, vec4 v) { partials[i] = v; }
vec4 load_partial(uint i) { return partials[i]; }
#else
layout(set = 0, binding = 4, rgba32f) uniform image2DArray img_partials;
ivec3 partial_coord(uint i) {
    return ivec3(int(i % pc.part_pw), int((i / pc.part_pw) % pc.part_ph), int(i / (pc.part_pw * pc.part_ph)));
}
void store_partial(uint i, vec4 v) { imageStore(img_partials, partial_coord(i), v); }
vec4 load_partial(uint i) { return imageLoad(img_partials, partial_coord(i)); }
#endif

// The reduction spans.
uint conv_splits() { return max(pc.split_log2, 1u); }

// Texel of output channels 4 * oc4.. of pixel m of image n (of `images`) in span `span`.
uint conv_partial_index(uint span, uint images, uint n, uint m, uint oc4) {
    return ((span * images + n) * (pc.out_t.h * pc.out_t.w) + m) * pc.out_t.c4 + oc4;
}

#endif
