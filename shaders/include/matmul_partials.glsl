// The partial results of a tensor-core MatMul split over reduction spans (the
// matmul_const_coop*_splitk kernels write them, matmul_splitk_combine.comp sums them): per
// (span, layer, row) the row's N values, four a texel, fp32 and unscaled. An fp32 tensor
// [1, 4, splits * layers * M, ceil(N / 4)] bound at 2 whatever the activations' precision (a sum
// of fp16 partials would round each span). Its texels go through its fold, whose physical width
// and height ride in b_t.pw and b_t.ph (a constant B's b_t holds only its texel offset, in n).
// Included after matmul_common.glsl.
#ifndef TEXSTREAM_MATMUL_PARTIALS_GLSL
#define TEXSTREAM_MATMUL_PARTIALS_GLSL

#ifdef TENSOR_STORAGE_BUFFER
layout(set = 0, binding = 2, std430) buffer Partials { vec4 partials[]; };
void store_partial(uint i, vec4 v) { partials[i] = v; }
vec4 load_partial(uint i) { return partials[i]; }
#else
layout(set = 0, binding = 2, rgba32f) uniform image2DArray img_partials;
ivec3 partial_coord(uint i) {
    uint pw = pc.b_t.pw, ph = pc.b_t.ph;
    return ivec3(int(i % pw), int((i / pw) % ph), int(i / (pw * ph)));
}
void store_partial(uint i, vec4 v) { imageStore(img_partials, partial_coord(i), v); }
vec4 load_partial(uint i) { return imageLoad(img_partials, partial_coord(i)); }
#endif

// The reduction spans (flags bits 24-29 hold splits - 1).
uint partial_splits() { return ((pc.flags >> 24u) & 63u) + 1u; }

// Texel of columns 4 * n4 .. 4 * n4 + 3 of row m of `layer` (of `layers`) in span `span`.
uint partial_index(uint span, uint layers, uint layer, uint m, uint n4) {
    return ((span * layers + layer) * pc.out_t.h + m) * ((pc.out_t.w + 3u) / 4u) + n4;
}

#endif
