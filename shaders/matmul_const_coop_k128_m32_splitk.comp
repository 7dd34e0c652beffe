#version 450
// matmul_const_coop_splitk.comp on 128 k a step and 32-row tiles.
#define SPLIT_K
#define DEEP_STEP
#define TM 32u
#include "matmul_coop_body.glsl"
