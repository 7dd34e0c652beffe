#version 450
// matmul_const_coop.comp for a B stored by rows (B^T: texel (n/4) * K + k holding 4 consecutive
// n; matmul_body.glsl const_b): its tile is staged [n][k] and read column-major. A tied head's
// row-range pieces (Gemm with b_rows) run here. Its own file rather than a branch on the layout
// flag, since the packed kernel with that branch ran the prefill's gate/up projection at 503 us
// against 326 without it on an H200 (session 19, run 4).
#define ROWS_B
#include "matmul_coop_body.glsl"
