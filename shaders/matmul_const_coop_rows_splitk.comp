#version 450
// matmul_const_coop_splitk.comp for a B stored by rows (matmul_const_coop_rows.comp).
#define SPLIT_K
#define ROWS_B
#include "matmul_coop_body.glsl"
