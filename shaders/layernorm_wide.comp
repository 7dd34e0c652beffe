#version 450
// layernorm.comp on 1024 invocations a row (kernels::norm_rows), only where the device's options
// ask for it: on an H100 (session 32) it took twice as long as 256 invocations a row on a
// decoder step's one 2048-wide row (29.8 against 13.8 us) and a prefill's 128 (66 against 14).
#define LAYERNORM
#define WG 1024u
#include "rownorm_body.glsl"
