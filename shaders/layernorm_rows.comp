#version 450
#extension GL_EXT_control_flow_attributes : require
// layernorm.comp over short rows in row groups (ROW_GROUPS; see include/rownorm_body.glsl): 32
// invocations a row, eight rows a workgroup sharing one copy of the scale and bias, for a norm
// over the last axis alone of at most 512 texels over many rows (kernels::norm_rows).
#define LAYERNORM
#define ROW_GROUPS
#define WG 256u
#include "rownorm_body.glsl"
