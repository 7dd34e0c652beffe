#version 450
// A few rows against a constant B with twice the A chunk and 16 weight texels an invocation in
// flight (half the chunks, and so half the round trips, on a decoder's projections): see
// include/gemv_body.glsl.
#define STAGE 1024u
#define UNROLL 16u
#include "gemv_body.glsl"
