#version 450
// layernorm_wide.comp with layernorm_subgroup.comp's subgroup reductions.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define SUBGROUP_REDUCE
#define LAYERNORM
#define WG 1024u
#include "rownorm_body.glsl"
