#version 450
// Dense convolution as an implicit GEMM on cooperative matrices (include/conv_coop.glsl), wide
// tiles for outputs with workgroups to spare: 32 pixels x 32 output channels a workgroup, so
// every texel staged serves 32 products; 16 k (4 input texels) a step.
#define TM 32u
#define TN 32u
#define KC 1u
#define SLOTS 4u
#include "conv_coop.glsl"
