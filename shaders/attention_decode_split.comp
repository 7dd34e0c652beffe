#version 450
// CACHE_VARIANT: also built as attention_decode_split_kv16, reading an fp16 key/value cache under fp32 activations.
// attention_decode.comp over one of several key spans of a query row, storing the span's partial
// results (include/attention_partials.glsl) for attention_combine.comp to merge.
#define SPLIT_KEYS
#include "attention_decode_body.glsl"
