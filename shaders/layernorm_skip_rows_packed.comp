#version 450
#extension GL_EXT_control_flow_attributes : require
// layernorm_skip_rows.comp writing the normalized rows as the tensor-core MatMul's packed A
// (PACKED_OUT; see include/rownorm_body.glsl); the sum keeps the input's layout.
#define LAYERNORM
#define SKIP
#define ROW_GROUPS
#define PACKED_OUT
#define WG 256u
#include "rownorm_body.glsl"
