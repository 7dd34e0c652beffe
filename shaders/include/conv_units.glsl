// Where an invocation's output unit (4 channels at PX consecutive pixels of a row) of the direct
// convolutions (include/conv2d_body.glsl, include/conv2d_dw_body.glsl) lies. The dispatch is
// either a grid of (units along a row, rows, layers) in 8x8 workgroups, or, with CONV_FLAT_UNITS
// in the push constants' act word, the units counted across rows and layers, 64 a workgroup
// (vk_backend::kernels::conv's `counts_units_flat`): on a device that runs a workgroup's
// invocations one batch after another (lavapipe), a layer of a few units (a squeeze-and-excitation
// convolution's one pixel, a two-row map) leaves most of each 8x8 workgroup idle, and it runs
// the idle ones all the same. Needs PX and the conv push constants.
#ifndef TEXSTREAM_CONV_UNITS_GLSL
#define TEXSTREAM_CONV_UNITS_GLSL

#define CONV_FLAT_UNITS 0x400u

// Units of an output row.
uint conv_units_x(TensorDesc out_t) { return (out_t.w + uint(PX) - 1u) / uint(PX); }

// Unit `unit` counted across rows and layers: its layer, row and first pixel.
void conv_flat_unit(TensorDesc out_t, uint unit, out uint layer, out uint oy, out uint ox0) {
    uint units_x = conv_units_x(out_t);
    uint per_layer = units_x * out_t.h;
    layer = unit / per_layer;
    uint r = unit - layer * per_layer;
    oy = r / units_x;
    ox0 = (r - oy * units_x) * uint(PX);
}

// This invocation's unit; false past the output.
bool conv_unit(out uint layer, out uint oy, out uint ox0) {
    if ((pc.act & CONV_FLAT_UNITS) != 0u) {
        conv_flat_unit(pc.out_t, gl_WorkGroupID.x * 64u + gl_LocalInvocationIndex, layer, oy, ox0);
    } else {
        ox0 = gl_GlobalInvocationID.x * uint(PX);
        oy = gl_GlobalInvocationID.y;
        layer = gl_GlobalInvocationID.z;
    }
    return ox0 < pc.out_t.w && oy < pc.out_t.h && layer < pc.out_t.n * pc.out_t.c4;
}

#endif
