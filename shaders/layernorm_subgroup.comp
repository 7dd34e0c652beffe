#version 450
// layernorm.comp with its workgroup reductions on subgroup operations (subgroupAdd, then one
// value a subgroup through shared memory): two barriers a reduction instead of a shared-memory
// tree's nine at 256 invocations. For devices whose compute stage has subgroup arithmetic.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define SUBGROUP_REDUCE
#define LAYERNORM
#define WG 256u
#include "rownorm_body.glsl"
