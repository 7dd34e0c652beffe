#version 450
// conv2d_coop_wide.comp (32 pixels x 32 channels) over one span of its reduction a workgroup
// (SPLIT_K, include/conv_coop.glsl), its sum written to the partial results for
// conv2d_coop_splitk_combine.comp (vk_backend::kernels::conv2d_split_shape).
#define TM 32u
#define TN 32u
#define KC 1u
#define SLOTS 4u
#define SPLIT_K
#include "conv_coop.glsl"
