#version 450
#extension GL_EXT_control_flow_attributes : require
// layernorm_rows.comp writing the tensor-core MatMul's packed A (PACKED_OUT; see
// include/rownorm_body.glsl): the norm of one [M, K] matrix straight into [4, K/4, M].
#define LAYERNORM
#define ROW_GROUPS
#define PACKED_OUT
#define WG 256u
#include "rownorm_body.glsl"
