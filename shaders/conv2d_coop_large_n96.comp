#version 450
// conv2d_coop_large.comp on 64-pixel x 96-channel tiles, the groups' tiles summed 48 channels at
// a time (within 48 KiB of shared memory): vk_backend::kernels::conv2d_kernel picks it where
// 64-channel tiles would overfill the device's first wave by a little and 96-channel ones fit it
// (the Whisper-tiny encoder's second convolution, 1500 pixels x 384 channels: 144 tiles of 64 on
// 132 multiprocessors, two waves; 96 of 96, one). See include/conv_coop_groups.glsl.
#define TN 96u
#define CS_COLS 48u
#include "conv_coop_groups.glsl"
