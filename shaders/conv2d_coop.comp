#version 450
// Dense convolution as an implicit GEMM on cooperative matrices (include/conv_coop.glsl), small
// tiles for outputs that give few workgroups: 16 pixels x 16 output channels a workgroup, 64 k
// (16 input texels) a step, so each lane keeps 16 texel loads in flight.
#define TM 16u
#define TN 16u
#define KC 4u
#define SLOTS 8u
#include "conv_coop.glsl"
