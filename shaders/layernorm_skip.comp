#version 450
// layernorm.comp of a residual sum: normalizes in + res and writes the sum too (SKIP; see
// include/rownorm_body.glsl), for the Add before a transformer's norms.
#define LAYERNORM
#define SKIP
#define WG 256u
#include "rownorm_body.glsl"
