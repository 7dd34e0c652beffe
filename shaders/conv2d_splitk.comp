#version 450
// 2D convolution with its reduction split over invocations, each filter texel read through
// fetch_weight: include/conv2d_splitk_body.glsl.
#include "conv2d_splitk_body.glsl"
