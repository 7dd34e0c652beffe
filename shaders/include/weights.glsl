// Weight access through the paged weight atlas (set 0, bindings 16 and 17; kernel bindings use 0..15). Every kernel reads weights and biases
// ONLY through fetch_weight(global texel index in the model's weight space).
// page = idx >> page_shift, within = idx & (texels_per_page - 1), slot = page_table[page],
// coord = (within % 512, (slot % k) * page_rows + within / 512, slot / k) with k = 1 << stack_shift
// pages stacked per layer (1 unless the atlas has more slots than the device has layers).
// Page width is always 512 texels.
#ifndef TEXSTREAM_WEIGHTS_GLSL
#define TEXSTREAM_WEIGHTS_GLSL

#ifndef FMT
#define FMT rgba16f
#endif
// The atlas format: the activations' unless the build asks for the mixed variant (fp16 weights
// under fp32 activations).
#ifndef WFMT
#define WFMT FMT
#endif

layout(set = 0, binding = 16, WFMT) uniform readonly image2DArray weight_atlas;
layout(set = 0, binding = 17, std430) readonly buffer WeightPageTable {
    uint page_shift;  // log2(texels per page)
    uint num_pages;
    uint stack_shift;  // log2(pages per atlas layer)
    uint _pad1;
    uint page_table[];
};

const uint WEIGHT_UNMAPPED = 0xFFFFFFFFu;
// Page-table flag of a compensated page (vk_backend::COMPENSATED): its first
// texels_per_page/16 texels hold fp16 hi values and the next as many the lo remainders times
// WEIGHT_LO_SCALE (texstream's packed::placement).
const uint WEIGHT_COMPENSATED = 0x80000000u;
const float WEIGHT_LO_SCALE = 2048.0;

// Whether the page holding `texel_index` is resident (mapped in the page table).
bool weight_mapped(uint texel_index) {
    uint page = texel_index >> page_shift;
    return page < num_pages && page_table[page] != WEIGHT_UNMAPPED;
}

// fetch_weight in two halves, so that a kernel can issue several atlas loads before it uses any
// (a GEMV is bound by the loads in flight): weight_locate gives the texel's atlas coordinate (a
// valid one where the page is unmapped), weight_finish zeroes an unmapped page's value and adds a
// compensated page's lo part.
struct WeightLoc {
    ivec3 at;
    uint entry;
    uint within;
};

WeightLoc weight_locate(uint texel_index) {
    uint page = texel_index >> page_shift;
    uint within = texel_index & ((1u << page_shift) - 1u);
    uint entry = page < num_pages ? page_table[page] : WEIGHT_UNMAPPED;
    uint slot = entry == WEIGHT_UNMAPPED ? 0u : (entry & ~WEIGHT_COMPENSATED);
    uint row0 = (slot & ((1u << stack_shift) - 1u)) << (page_shift - 9u);
    ivec3 at = ivec3(int(within & 511u), int(row0 + (within >> 9u)), int(slot >> stack_shift));
    return WeightLoc(at, entry, within);
}

vec4 weight_finish(WeightLoc l, vec4 v) {
    if (l.entry == WEIGHT_UNMAPPED) {
        return vec4(0.0);
    }
    uint region = 1u << (page_shift - 4u);
    if ((l.entry & WEIGHT_COMPENSATED) != 0u && l.within < region) {
        uint lo = l.within + region;
        ivec3 at = ivec3(int(lo & 511u), l.at.y - int(l.within >> 9u) + int(lo >> 9u), l.at.z);
        v += imageLoad(weight_atlas, at) * (1.0 / WEIGHT_LO_SCALE);
    }
    return v;
}

vec4 fetch_weight(uint texel_index) {
    uint page = texel_index >> page_shift;
    uint within = texel_index & ((1u << page_shift) - 1u);
    uint entry = page < num_pages ? page_table[page] : WEIGHT_UNMAPPED;
    // A non-resident page is a scheduling bug; read zeros instead of out-of-bounds memory.
    if (entry == WEIGHT_UNMAPPED) {
        return vec4(0.0);
    }
    uint slot = entry & ~WEIGHT_COMPENSATED;
    int layer = int(slot >> stack_shift);
    uint row0 = (slot & ((1u << stack_shift) - 1u)) << (page_shift - 9u);
    vec4 v = imageLoad(weight_atlas, ivec3(int(within & 511u), int(row0 + (within >> 9u)), layer));
    uint region = 1u << (page_shift - 4u);
    if ((entry & WEIGHT_COMPENSATED) != 0u && within < region) {
        uint lo = within + region;
        v += imageLoad(weight_atlas, ivec3(int(lo & 511u), int(row0 + (lo >> 9u)), layer)) *
             (1.0 / WEIGHT_LO_SCALE);
    }
    return v;
}

// A run of consecutive weight texels (a convolution's filter row) that the recorder found in at
// most two pages, neither compensated where the run lies: texel first + i sits at the slot of
// its page or the next, both found once, chosen by a select: no page-table read or
// fetch_weight's branches a texel (on llvmpipe those cost the PP-OCR detector's direct
// convolutions as much as the weight loads themselves). An unmapped page reads slot 0, as the
// tensor-core kernels do: a scheduling bug either way.
struct WeightRun {
    uvec2 row0;   // the first atlas row of the run's page and of the next
    ivec2 layer;  // their atlas layers
    uint within;  // the run's first texel within its page
};

WeightRun weight_run(uint first) {
    uint page = first >> page_shift;
    WeightRun r;
    for (uint k = 0u; k < 2u; k++) {
        uint p = page + k;
        uint entry = p < num_pages ? page_table[p] : WEIGHT_UNMAPPED;
        uint slot = entry == WEIGHT_UNMAPPED ? 0u : (entry & ~WEIGHT_COMPENSATED);
        r.row0[k] = (slot & ((1u << stack_shift) - 1u)) << (page_shift - 9u);
        r.layer[k] = int(slot >> stack_shift);
    }
    r.within = first & ((1u << page_shift) - 1u);
    return r;
}

// Texel first + i of run r.
vec4 fetch_run(WeightRun r, uint i) {
    uint w = r.within + i;
    bool next = (w >> page_shift) != 0u;
    w &= (1u << page_shift) - 1u;
    uint row0 = next ? r.row0.y : r.row0.x;
    int layer = next ? r.layer.y : r.layer.x;
    return imageLoad(weight_atlas, ivec3(int(w & 511u), int(row0 + (w >> 9u)), layer));
}

#endif
