// Shared by conv2d_splitk.comp and conv2d_dw_splitk.comp: a workgroup of WG invocations holds
// WG >> split_log2 output units (4 channels at PX consecutive pixels of a row, all in the output
// layer gl_WorkGroupID.z, or with CONV_FLAT_UNITS counted across rows and layers: see
// include/conv_units.glsl), SPLIT = 1 << split_log2 adjacent lanes each; each lane sums its share
// of the unit's reduction and the shares meet in shared memory. Needs the conv push constants.
#ifndef TEXSTREAM_CONV_SPLITK_GLSL
#define TEXSTREAM_CONV_SPLITK_GLSL

#define PX 4
#define WG 64
#include "conv_units.glsl"
layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

shared vec4 partial[WG * PX];

struct SplitUnit {
    uint lane;   // invocation in the workgroup
    uint klane;  // lane within the unit
    uint split;  // lanes per unit
    uint layer;  // output layer (n * c4 + c / 4)
    uint ox0;    // first output pixel of the unit
    uint oy;     // output row
    bool live;   // false for lanes past the output: they only add zeros
};

SplitUnit split_unit(TensorDesc out_t, uint split_log2) {
    SplitUnit u;
    u.lane = gl_LocalInvocationID.x;
    u.split = 1u << split_log2;
    u.klane = u.lane & (u.split - 1u);
    uint unit = gl_WorkGroupID.x * (uint(WG) >> split_log2) + (u.lane >> split_log2);
    if ((pc.act & CONV_FLAT_UNITS) != 0u) {
        conv_flat_unit(out_t, unit, u.layer, u.oy, u.ox0);
    } else {
        uint units_x = conv_units_x(out_t);
        u.layer = gl_WorkGroupID.z;
        u.ox0 = (unit % units_x) * uint(PX);
        u.oy = unit / units_x;
    }
    u.live = u.oy < out_t.h && u.layer < out_t.n * out_t.c4;
    return u;
}

// Sums the unit's lanes into `acc` of its first lane (klane 0). Every lane of the workgroup must
// call it, live or not: it holds barriers.
void reduce_partials(SplitUnit u, inout vec4 acc[PX]) {
    for (int p = 0; p < PX; ++p) partial[u.lane * uint(PX) + uint(p)] = acc[p];
    barrier();
    for (uint s = u.split >> 1u; s > 0u; s >>= 1u) {
        if (u.klane < s) {
            for (int p = 0; p < PX; ++p)
                partial[u.lane * uint(PX) + uint(p)] += partial[(u.lane + s) * uint(PX) + uint(p)];
        }
        barrier();
    }
    for (int p = 0; p < PX; ++p) acc[p] = partial[u.lane * uint(PX) + uint(p)];
}

#endif
