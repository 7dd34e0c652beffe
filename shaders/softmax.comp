#version 450
// Softmax / LogSoftmax over any set of axes (see include/rownorm_body.glsl).
#include "rownorm_body.glsl"
