#version 450
// layernorm_wide.comp of a residual sum (SKIP): normalizes in + res and writes the sum too.
#define LAYERNORM
#define SKIP
#define WG 1024u
#include "rownorm_body.glsl"
