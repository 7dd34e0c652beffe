#version 450
// Fused attention for many query rows on cooperative matrices (VK_NV_cooperative_matrix: fp16
// 16x16 A times 16x8 B into fp32 16x8, one subgroup of 32 each): both products, Q K^T and P V,
// on the tensor cores. The portable blocked kernel (attention_body.glsl) took 599 us a layer of
// a 1.34 B decoder's 128-token prefill on an H200 (16 heads of 128, session 19). Same bindings,
// push constants and semantics as the other attention kernels (include/attention_io.glsl); only
// fp16 storage, head dims up to MAXD. vk_backend::kernels::attention picks it.
//
// A workgroup takes BQ = 16 query rows of one texel layer (four heads): subgroup l is head lane
// l. The softmax takes two passes over the keys instead of rescaling a running sum: the tensor
// cores' accumulators cannot be scaled row by row, and the scores are cheap to take twice
// against the P V product. Pass 1 scores each block of BK keys and keeps every row's max and sum
// of exps; pass 2 scores it again, writes P = exp(s - max) / sum as fp16 and accumulates P V in
// fp32: the output itself, stored through shared memory with the four heads of a texel together.
// Scores, max and sums are fp32; Q, K, V and P enter the products as fp16, as they are stored.
// H200 (session 25, the prefill above): 599 -> 232-254 us a layer. Where the rest goes (an
// experiment build with parts switched off): the key and value loads about a third, the mask
// loads an eighth, the products a twentieth; with no key loop at all 24 us remain.
//
// A workgroup walks its keys one block at a time with a few barriers each, so its time grows
// with the keys while few workgroups leave the device idle: 16 rows of four heads make 32
// workgroups of that prefill for 132 multiprocessors. attention_coop_split.comp, the same body,
// takes one span of the keys a workgroup and stores the span's partial results for
// attention_combine.comp (flash-decoding over many rows). H200 (session 27, runs 1-2): that
// prefill's attention 201 -> 116 us a layer in 2 spans, 77 in 4; then with a key/value texel
// read as it is where no heads are grouped across texels, staging without divisions by the head
// dims and both softmax passes on all 32 invocations of a subgroup, 82 us in 4 spans (77
// before: its grouped heads take the general loads), the Whisper-tiny encoder's 2380 -> 2010 -> 1523 us a layer, BERT-base's 104 -> 64
// -> 37 us. Body: include/attention_coop_body.glsl.
#include "attention_coop_body.glsl"
