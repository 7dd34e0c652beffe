#version 450
// matmul_const_coop_rows.comp (B stored by rows) on 32x128 tiles; see matmul_const_coop_n128.comp.
#define ROWS_B
#define TM 32u
#define TN 128u
#include "matmul_coop_body.glsl"
