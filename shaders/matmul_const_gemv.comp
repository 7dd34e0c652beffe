#version 450
// A few rows against a constant B, 8 weight texels an invocation in flight: see
// include/gemv_body.glsl.
#include "gemv_body.glsl"
