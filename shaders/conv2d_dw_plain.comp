#version 450
// conv2d_dw.comp where the recorder found the whole filter in at most two pages with no
// compensated texel, read through its pages found once: include/conv2d_dw_body.glsl.
#define PLAIN_WEIGHT_ROWS
#include "conv2d_dw_body.glsl"
