#version 450
// softmax.comp with its workgroup reductions on subgroup operations (see
// layernorm_subgroup.comp).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define SUBGROUP_REDUCE
#include "rownorm_body.glsl"
