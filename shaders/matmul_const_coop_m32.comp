#version 450
// matmul_const_coop.comp on 32-row tiles, for MatMuls with fewer 64-row tiles than the device has
// multiprocessors (vk_backend::kernels::coop_rows): twice the workgroups, each walking the whole
// reduction for half the rows.
#define TM 32u
#include "matmul_coop_body.glsl"
