#version 450
// attention_decode.comp over one of several key spans of a query row, storing the span's partial
// results (include/attention_partials.glsl) for attention_combine.comp to merge.
#define SPLIT_KEYS
#include "attention_decode_body.glsl"
