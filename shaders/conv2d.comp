#version 450
// 2D convolution, each filter texel read through fetch_weight: include/conv2d_body.glsl.
#include "conv2d_body.glsl"
