#version 450
// matmul_const_coop_splitk.comp on 128 k a step (matmul_const_coop_k128.comp).
#define SPLIT_K
#define DEEP_STEP
#include "matmul_coop_body.glsl"
