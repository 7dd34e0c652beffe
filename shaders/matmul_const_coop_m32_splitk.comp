#version 450
// matmul_const_coop_splitk.comp on 32-row tiles (matmul_const_coop_m32.comp).
#define SPLIT_K
#define TM 32u
#include "matmul_coop_body.glsl"
