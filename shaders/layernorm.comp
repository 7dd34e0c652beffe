#version 450
// LayerNormalization over axes [axis, rank), scale/bias through fetch_weight (see include/rownorm_body.glsl).
// 256 invocations a row: a decoder's single 2048-wide row took 42 us on an H200 with 64, each
// invocation walking 32 texels one round trip at a time.
#define LAYERNORM
#define WG 256u
#include "rownorm_body.glsl"
