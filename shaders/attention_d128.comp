#version 450
// CACHE_VARIANT: also built as attention_d128_kv16, reading an fp16 key/value cache under fp32 activations.
// Fused attention for head dims up to 128 (Llama-7B-, Qwen-style heads); see
// include/attention_body.glsl.
#define MAXD 128u
#define PARTS 8u
#define BK 4u
#include "attention_body.glsl"
