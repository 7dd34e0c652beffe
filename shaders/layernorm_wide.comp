#version 450
// layernorm.comp on 1024 invocations a row (kernels::norm_row_invocations): for a few long rows
// (a decoder step's one 2048-wide row), two texels an invocation instead of eight.
#define LAYERNORM
#define WG 1024u
#include "rownorm_body.glsl"
