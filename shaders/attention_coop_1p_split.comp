#version 450
// attention_coop_split.comp in one pass over the keys (see attention_coop_1p.comp).
#define ONE_PASS
#define SPLIT_KEYS
#include "attention_coop_body.glsl"
