#version 450
#extension GL_EXT_control_flow_attributes : require
// layernorm_rows.comp with each row's sums on subgroup operations where every subgroup lies
// within one row (a subgroup of 32 needs no shared memory at all).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define SUBGROUP_REDUCE
#define LAYERNORM
#define ROW_GROUPS
#define WG 256u
#include "rownorm_body.glsl"
