#version 450
// conv2d_coop.comp (16 pixels x 16 channels) over one span of its reduction a workgroup
// (SPLIT_K, include/conv_coop.glsl), its sum written to the partial results for
// conv2d_coop_splitk_combine.comp: where the tiles alone leave most of the device idle and the
// reduction is long (vk_backend::kernels::conv2d_split_shape).
#define TM 16u
#define TN 16u
#define KC 4u
#define SLOTS 8u
#define SPLIT_K
#include "conv_coop.glsl"
