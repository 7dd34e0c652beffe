#version 450
// matmul_const_coop_rows.comp (B stored by rows) on 32-row tiles; see matmul_const_coop_m32.comp.
#define ROWS_B
#define TM 32u
#include "matmul_coop_body.glsl"
