#version 450
// attention_coop.comp with four blocks of 16 query rows a head lane (512 invocations, head dims
// up to 64): each staged key and value block serves 64 rows instead of 16, and the workgroup's
// barriers are shared by 16 subgroups instead of 4. vk_backend::kernels::attention picks it for
// head dims up to 64 (the Whisper and BERT encoders); the 128 of a 1.34 B decoder's heads do
// not fit its 48 KiB.
#define QB 4
#define MAXD 64u
#include "attention_coop_body.glsl"
