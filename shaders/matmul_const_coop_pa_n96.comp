#version 450
// matmul_const_coop_pa.comp on 64x96 output tiles, 64 k a step (the groups' tiles summed 48
// columns at a time, within 48 KiB of shared memory): vk_backend::kernels::coop_cols picks it
// where 64-column tiles would overfill the device's first wave by a little and 96-column ones
// fit it (the Whisper-tiny encoder's 1500 x 384 outputs: 144 tiles of 64 on 132
// multiprocessors, two waves; 96 of 96, one). See include/matmul_coop_body.glsl.
#define PACKED_A
#define TN 96u
#define CS_COLS 48u
#include "matmul_coop_body.glsl"
