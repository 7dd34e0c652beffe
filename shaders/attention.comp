#version 450
// CACHE_VARIANT: also built as attention_kv16, reading an fp16 key/value cache under fp32 activations.
// Fused attention for head dims up to 64; see include/attention_body.glsl.
#define MAXD 64u
#define PARTS 4u
#define BK 8u
#include "attention_body.glsl"
