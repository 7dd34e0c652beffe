#version 450
// GlobalAveragePool on 64 invocations an output texel: include/global_avg_pool_body.glsl.
#define WG 64u
#include "global_avg_pool_body.glsl"
