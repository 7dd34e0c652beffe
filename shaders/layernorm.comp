#version 450
// LayerNormalization over axes [axis, rank), scale/bias through fetch_weight (see include/rownorm_body.glsl).
#define LAYERNORM
#include "rownorm_body.glsl"
