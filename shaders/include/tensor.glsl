// Shared tensor addressing for texstream compute shaders (2.5D texture storage).
// Activations: C4 packing. Texel (x = w, y = h, layer = n*C4 + c/4), RGBA = c%4, padding zero.
// Linear texel index i = (layer*H + y)*W + x, folded to (i % PW, (i / PW) % PH, i / (PW*PH)).
// FMT is defined by the build (rgba16f or rgba32f); images must declare their format.
// With TENSOR_STORAGE_BUFFER defined (the build's `.buf` variants), the same macros bind
// activation tensors as storage buffers instead: texel i at array index i (the linear index, no
// fold), uvec2 (two packHalf2x16) per texel when TENSOR_HALF is 1, vec4 otherwise. Kernels that
// only use the macros below compile to both variants unchanged.
#ifndef TEXSTREAM_TENSOR_GLSL
#define TEXSTREAM_TENSOR_GLSL

#ifndef FMT
#define FMT rgba16f
#endif
#ifndef TENSOR_HALF
#define TENSOR_HALF 1
#endif

// Matches vk_backend::TensorDesc (8 x u32, 32 bytes).
struct TensorDesc {
    uint n;
    uint c;
    uint h;
    uint w;
    uint c4;  // ceil(c / 4)
    uint pw;  // physical width, height, layers
    uint ph;
    uint pl;
};

// Rounds v to the nearest fp16 value (ties to even), kept in fp32. fp16 stores round every
// activation once; Vulkan leaves the fp32 -> fp16 rounding of image stores (and packHalf2x16) to the
// implementation, and lavapipe rounds toward zero: that bias compounds through a deep network (the
// PP-OCR detector's probability map drifted 4x further from ONNX Runtime than round-to-nearest
// storage). A value that is already an fp16 value converts exactly under any rounding mode.
vec4 round_to_half(vec4 v) {
    uvec4 u = floatBitsToUint(v);
    // Normal fp16 range: round the fp32 mantissa to 10 bits (Inf stays Inf).
    uvec4 n = (u + 0x0FFFu + ((u >> 13u) & 1u)) & ~0x1FFFu;
    // fp16 subnormals are multiples of 2^-24; scaling by powers of two is exact.
    vec4 s = roundEven(v * 16777216.0) * (1.0 / 16777216.0);
    vec4 r = mix(uintBitsToFloat(n), s, lessThan(abs(v), vec4(6.103515625e-05)));
    // A NaN's mantissa could carry into the sign bit above.
    return mix(r, v, isnan(v));
}

// Declares a tensor binding in set 0 (an image, or a storage buffer in the `.buf` variants).
#ifdef TENSOR_STORAGE_BUFFER
#if TENSOR_HALF
#define TS_TEXEL uvec2
vec4 ts_unpack(uvec2 v) { return vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y)); }
uvec2 ts_pack(vec4 v) {
    v = round_to_half(v);
    return uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw));
}
#else
#define TS_TEXEL vec4
vec4 ts_unpack(vec4 v) { return v; }
vec4 ts_pack(vec4 v) { return v; }
#endif
#define TENSOR_IN(b, name) \
    layout(set = 0, binding = b, std430) readonly buffer TsBuf_##name { TS_TEXEL name[]; }
#define TENSOR_OUT(b, name) \
    layout(set = 0, binding = b, std430) writeonly buffer TsBuf_##name { TS_TEXEL name[]; }
#define TENSOR_INOUT(b, name) \
    layout(set = 0, binding = b, std430) buffer TsBuf_##name { TS_TEXEL name[]; }
#else
#define TENSOR_IN(b, name) layout(set = 0, binding = b, FMT) uniform readonly image2DArray name
#define TENSOR_OUT(b, name) layout(set = 0, binding = b, FMT) uniform writeonly image2DArray name
#define TENSOR_INOUT(b, name) layout(set = 0, binding = b, FMT) uniform image2DArray name
#endif

// Number of logical texels L*H*W.
uint tensor_texels(TensorDesc t) { return t.n * t.c4 * t.h * t.w; }

// Physical coordinate of a linear texel index.
ivec3 fold_coord(TensorDesc t, uint i) {
    return ivec3(int(i % t.pw), int((i / t.pw) % t.ph), int(i / (t.pw * t.ph)));
}

// Linear texel index of logical (layer, y, x).
uint texel_index(TensorDesc t, uint layer, uint y, uint x) { return (layer * t.h + y) * t.w + x; }

// Linear texel index of the texel holding element (n, c, y, x).
uint texel_index_nchw(TensorDesc t, uint n, uint c, uint y, uint x) {
    return texel_index(t, n * t.c4 + c / 4u, y, x);
}

// Decomposes a linear texel index into (n, c4 block, y, x).
uvec4 texel_nc4yx(TensorDesc t, uint i) {
    uint x = i % t.w;
    uint r = i / t.w;
    uint y = r % t.h;
    uint layer = r / t.h;
    return uvec4(layer / t.c4, layer % t.c4, y, x);
}

// Which lanes of C4 block `c4i` hold real channels (padding lanes must be written as 0).
bvec4 channel_valid(TensorDesc t, uint c4i) {
    uint base = c4i * 4u;
    return lessThan(uvec4(base, base + 1u, base + 2u, base + 3u), uvec4(t.c));
}

// Zeroes padding lanes without arithmetic (NaN/Inf in padding lanes never leak).
vec4 zero_padding(TensorDesc t, uint c4i, vec4 v) { return mix(vec4(0.0), v, channel_valid(t, c4i)); }

// Tensor access by linear texel index / by element (any TENSOR_* variable, image or buffer).
#ifdef TENSOR_STORAGE_BUFFER
#define LOAD_TEXEL(img, t, i) ts_unpack(img[i])
#define STORE_TEXEL(img, t, i, v) img[i] = ts_pack(v)
#else
#define LOAD_TEXEL(img, t, i) imageLoad(img, fold_coord(t, i))
#if TENSOR_HALF
#define STORE_TEXEL(img, t, i, v) imageStore(img, fold_coord(t, i), round_to_half(v))
#else
#define STORE_TEXEL(img, t, i, v) imageStore(img, fold_coord(t, i), v)
#endif
#endif
// A decoder's key/value cache binding: rgba16f images in the `_kv16` builds (CACHE_HALF=1, made by
// vk-backend/build.rs for shaders whose source names CACHE_VARIANT: the cache at half the bytes
// under fp32 activations), the activations' own format elsewhere. Stores round to nearest as fp16
// activation stores do.
#ifndef CACHE_HALF
#define CACHE_HALF 0
#endif
#if CACHE_HALF && !defined(TENSOR_STORAGE_BUFFER)
#define TENSOR_IN_CACHE(b, name) \
    layout(set = 0, binding = b, rgba16f) uniform readonly image2DArray name
#define TENSOR_OUT_CACHE(b, name) \
    layout(set = 0, binding = b, rgba16f) uniform writeonly image2DArray name
#define STORE_CACHE_TEXEL(img, t, i, v) imageStore(img, fold_coord(t, i), round_to_half(v))
#else
#define TENSOR_IN_CACHE(b, name) TENSOR_IN(b, name)
#define TENSOR_OUT_CACHE(b, name) TENSOR_OUT(b, name)
#define STORE_CACHE_TEXEL(img, t, i, v) STORE_TEXEL(img, t, i, v)
#endif
// Texel (layer, y, x) by its coordinates: where the image is not folded (pw == w, ph == h, the
// usual case) its image coordinate is (x, y, layer), without fold_coord's three divisions by
// run-time values (dozens of instructions a load on a GPU); a kernel whose loads are many and
// cheap otherwise (a decode step's attention) takes this.
#ifdef TENSOR_STORAGE_BUFFER
#define LOAD_AT(img, t, layer, y, x) LOAD_TEXEL(img, t, texel_index(t, layer, y, x))
#else
// Set (specialization constant 0) where the recorder knows every tensor the kernel addresses
// with LOAD_AT is unfolded (vk_backend's `launch_unfolded`): the fold's branch is then compiled
// out. Left to the run-time test, the H200's compiler evaluated both sides on every load: the
// 1.34 B prefill's tensor-core MatMuls took 10% longer and its attention 12% (session 26, run 8).
layout(constant_id = 0) const bool UNFOLDED_OPERANDS = false;
ivec3 coord_at(TensorDesc t, uint layer, uint y, uint x) {
    if (UNFOLDED_OPERANDS) {
        return ivec3(int(x), int(y), int(layer));
    }
    return (t.pw == t.w && t.ph == t.h) ? ivec3(int(x), int(y), int(layer))
                                        : fold_coord(t, texel_index(t, layer, y, x));
}
#define LOAD_AT(img, t, layer, y, x) imageLoad(img, coord_at(t, layer, y, x))
#endif
#define LOAD_ELEMENT(img, t, n, c, y, x) \
    (LOAD_TEXEL(img, t, texel_index_nchw(t, n, c, y, x))[(c) % 4u])

// 1D global invocation id for 2D-tiled dispatches (see vk_backend::kernels::dispatch_1d).
// A macro, not a function: gl_WorkGroupSize is fixed by the shader's `layout(local_size_x = ...)
// in;`, which comes after this include, and a function compiled here reads the default size 1
// (every invocation past the first row of workgroups then re-did the first row's texels).
#define global_id_1d() \
    (gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x)

#endif
