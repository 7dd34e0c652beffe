#version 450
// Fused attention for head dims up to 128 (Llama-7B-, Qwen-style heads); see
// include/attention_body.glsl.
#define MAXD 128u
#define PARTS 8u
#define BK 4u
#include "attention_body.glsl"
