#version 450
// conv_transpose2d.comp where the recorder found every filter row in at most two pages with no
// compensated texel, read through the rows' pages found once (as conv2d_plain.comp):
// include/conv_transpose2d_body.glsl.
#define PLAIN_WEIGHT_ROWS
#include "conv_transpose2d_body.glsl"
