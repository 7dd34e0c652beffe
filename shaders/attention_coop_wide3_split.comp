#version 450
// attention_coop_wide_split.comp with three query blocks of 16 rows a head lane (384 invocations):
// vk_backend::kernels::attention takes it where four blocks would leave more of the device's
// multiprocessors idle in the workgroups' one wave (the Whisper-tiny encoder's 1500 rows).
#define SPLIT_KEYS
#define QB 3
#define MAXD 64u
#include "attention_coop_body.glsl"
