#version 450
// Fused attention for head dims up to 64; see include/attention_body.glsl.
#define MAXD 64u
#define PARTS 4u
#define BK 8u
#include "attention_body.glsl"
