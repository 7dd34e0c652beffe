#version 450
// attention_coop.comp with four blocks of 16 query rows a head lane (512 invocations, head dims
// up to 64): each staged key and value block serves 64 rows instead of 16, and the workgroup's
// barriers are shared by 16 subgroups instead of 4. vk_backend::kernels::attention picks it for
// head dims up to 64 and at least 256 query rows: on an H200 (session 29, runs 2, 2b and 3) the
// Whisper-tiny encoder's attention (1500 rows, 6 heads of 64) took 462 us a layer in 8 key spans
// against attention_coop.comp's 1426 in 6. BERT-base's 128 rows make too few workgroups for it
// (47 us against 40). The 128 of a 1.34 B decoder's heads do not fit its 48 KiB.
#define QB 4
#define MAXD 64u
#include "attention_coop_body.glsl"
