// The partial results of attention split over key spans (attention_decode.comp writes them,
// attention_combine.comp merges them): per (texel layer, query row, split) a row of Dv + 2 fp32
// texels, the split's unnormalized sums of weights times V, then its running max and its running
// sum. An fp32 tensor [1, 4, rows, Dv + 2] (one texel layer, never folded: the host checks), bound
// at 5 whatever the activations' precision, since a max rounded to fp16 would skew the weights.
#ifndef TEXSTREAM_ATTENTION_PARTIALS_GLSL
#define TEXSTREAM_ATTENTION_PARTIALS_GLSL

#ifdef TENSOR_STORAGE_BUFFER
layout(set = 0, binding = 5, std430) buffer Partials { vec4 partials[]; };
void store_partial(uint row, uint x, vec4 v) { partials[row * (pc.v.y + 2u) + x] = v; }
vec4 load_partial(uint row, uint x) { return partials[row * (pc.v.y + 2u) + x]; }
#else
layout(set = 0, binding = 5, rgba32f) uniform image2DArray img_partials;
void store_partial(uint row, uint x, vec4 v) { imageStore(img_partials, ivec3(int(x), int(row), 0), v); }
vec4 load_partial(uint row, uint x) { return imageLoad(img_partials, ivec3(int(x), int(row), 0)); }
#endif

#endif
