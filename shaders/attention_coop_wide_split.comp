#version 450
// attention_coop_wide.comp over one of several key spans of its query rows, storing the span's
// partial results (include/attention_partials.glsl) for attention_combine.comp to merge.
#define SPLIT_KEYS
#define QB 4
#define MAXD 64u
#include "attention_coop_body.glsl"
