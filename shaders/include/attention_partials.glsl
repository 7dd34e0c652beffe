// The partial results of attention split over key spans (attention_decode.comp writes them,
// attention_combine.comp merges them): per (texel layer, query row, split) a row of Dv + 2 fp32
// texels, the split's unnormalized sums of weights times V, then its running max and its running
// sum. An fp32 tensor [1, 4, rows, Dv + 2] (one value a lane), bound at 5 whatever the
// activations' precision, since a max rounded to fp16 would skew the weights. It may be folded
// (a GPU that pads image heights folds 94 rows into a 64-row layer and a second one), so texels
// go through its fold (part_pw, part_ph in the push constants).
#ifndef TEXSTREAM_ATTENTION_PARTIALS_GLSL
#define TEXSTREAM_ATTENTION_PARTIALS_GLSL

#ifdef TENSOR_STORAGE_BUFFER
layout(set = 0, binding = 5, std430) buffer Partials { vec4 partials[]; };
void store_partial(uint row, uint x, vec4 v) { partials[row * (pc.v.y + 2u) + x] = v; }
vec4 load_partial(uint row, uint x) { return partials[row * (pc.v.y + 2u) + x]; }
#else
layout(set = 0, binding = 5, rgba32f) uniform image2DArray img_partials;
ivec3 partial_coord(uint row, uint x) {
    uint i = row * (pc.v.y + 2u) + x;
    return ivec3(int(i % pc.part_pw), int((i / pc.part_pw) % pc.part_ph), int(i / (pc.part_pw * pc.part_ph)));
}
void store_partial(uint row, uint x, vec4 v) { imageStore(img_partials, partial_coord(row, x), v); }
vec4 load_partial(uint row, uint x) { return imageLoad(img_partials, partial_coord(row, x)); }
#endif

#endif
