#version 450
// layernorm_skip.comp with layernorm_subgroup.comp's subgroup reductions.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define SUBGROUP_REDUCE
#define LAYERNORM
#define SKIP
#define WG 256u
#include "rownorm_body.glsl"
