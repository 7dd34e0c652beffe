#version 450
// attention_coop.comp over one of several key spans of its query rows, storing the span's
// partial results (include/attention_partials.glsl) for attention_combine.comp to merge.
#define SPLIT_KEYS
#include "attention_coop_body.glsl"
