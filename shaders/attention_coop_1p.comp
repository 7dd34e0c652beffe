#version 450
// attention_coop.comp in one pass over the keys (ONE_PASS; include/attention_coop_body.glsl):
// the softmax's max and sum run along, P enters the product unnormalized, and the accumulators
// are rescaled through shared memory only where a block's max passes the one in use by more than
// e^8. Each key block is staged and scored once instead of twice.
#define ONE_PASS
#include "attention_coop_body.glsl"
