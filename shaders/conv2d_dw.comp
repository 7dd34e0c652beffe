#version 450
// Depthwise 2D convolution, each filter texel through fetch_weight: include/conv2d_dw_body.glsl.
#include "conv2d_dw_body.glsl"
