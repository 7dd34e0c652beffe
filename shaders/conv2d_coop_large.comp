#version 450
// Dense convolution as an implicit GEMM on cooperative matrices on the tensor-core MatMul's
// tile: 64 pixels x 64 output channels a workgroup, four K groups of four subgroups
// (include/conv_coop_groups.glsl). vk_backend::kernels::conv2d_kernel picks it where its
// workgroups still fill the device.
#include "conv_coop_groups.glsl"
