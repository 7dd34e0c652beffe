#version 450
// ConvTranspose2d reading each filter texel through fetch_weight: include/conv_transpose2d_body.glsl.
#include "conv_transpose2d_body.glsl"
