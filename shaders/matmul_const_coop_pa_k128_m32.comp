#version 450
// matmul_const_coop.comp taking 128 k a step (DEEP_STEP); see include/matmul_coop_body.glsl.
#define DEEP_STEP
#define PACKED_A
#define TM 32u
#include "matmul_coop_body.glsl"
