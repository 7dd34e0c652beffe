#version 450
#extension GL_EXT_control_flow_attributes : require
// layernorm_rows_packed.comp with layernorm_rows_subgroup.comp's subgroup sums.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define SUBGROUP_REDUCE
#define LAYERNORM
#define ROW_GROUPS
#define PACKED_OUT
#define WG 256u
#include "rownorm_body.glsl"
