#version 450
// attention_coop.comp in one pass over the keys (ONE_PASS; include/attention_coop_body.glsl):
// the softmax's max and sum run along, P enters the product unnormalized, and the accumulators
// are rescaled through shared memory only where a block's max passes the one in use by more than
// e^8. Each key block is staged and scored once instead of twice. The default
// (kernels::attention; DeviceOptions::attention_one_pass = Some(false) keeps two passes): on an
// H100 (session 32) the Whisper-tiny encoder's attention took 235 us a layer against 290, a
// 1.34 B decoder's 128-token prefill 75.8 against 82.7, BERT-base 38.2 against 40.0.
#define ONE_PASS
#include "attention_coop_body.glsl"
