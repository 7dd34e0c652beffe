#version 450
// conv2d.comp where the recorder found every filter row in at most two pages with no compensated
// texel, read through the rows' pages found once: include/conv2d_body.glsl.
#define PLAIN_WEIGHT_ROWS
#include "conv2d_body.glsl"
