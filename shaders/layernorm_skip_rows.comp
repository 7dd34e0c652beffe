#version 450
#extension GL_EXT_control_flow_attributes : require
// layernorm_rows.comp of a residual sum (SKIP): normalizes in + res and writes the sum too.
#define LAYERNORM
#define SKIP
#define ROW_GROUPS
#define WG 256u
#include "rownorm_body.glsl"
