#version 450
// conv2d_splitk.comp where the recorder found every filter row in at most two uncompensated
// pages, read through the rows' pages found once: include/conv2d_splitk_body.glsl.
#define PLAIN_WEIGHT_ROWS
#include "conv2d_splitk_body.glsl"
