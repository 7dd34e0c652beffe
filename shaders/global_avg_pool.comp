#version 450
// GlobalAveragePool on 256 invocations an output texel: include/global_avg_pool_body.glsl.
#define WG 256u
#include "global_avg_pool_body.glsl"
