#version 450
// attention_coop_wide.comp in one pass over the keys (see attention_coop_1p.comp).
#define ONE_PASS
#define QB 4
#define MAXD 64u
#include "attention_coop_body.glsl"
