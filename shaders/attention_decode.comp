#version 450
// CACHE_VARIANT: also built as attention_decode_kv16, reading an fp16 key/value cache under fp32 activations.
// Fused attention for a few query rows (a decoder's step): out = softmax(scale * Q K^T + mask) V
// with one workgroup a query row of one texel layer (four heads) and a span of the keys, its
// threads spread over the keys rather than over the head dims.
//
// A workgroup takes its span KT keys at a time: KP threads score each key against the Q row
// (held in shared memory), a part of the head dim each, with their loads issued at once; one
// thread a key then takes its exp against the running max, once, and VP threads per head-dim
// texel accumulate those weights times V over a part of the chunk's keys each. The softmax is
// online over chunks, so any span fits. On an H200 (the 1.34 B decoder's step, 16 heads in four
// workgroups over 64 keys, session 19) the earlier form of this kernel took 57 us a layer: 18 of
// them went to every thread taking every key's exp, 23 to the key and value loads of only four
// workgroups. So here the exps are taken once, and the keys are split over workgroups
// (flash-decoding): attention_decode_split.comp, the same body, writes each span's unnormalized
// sums, running max and running sum to `partials`, and attention_combine.comp merges the spans
// of a row. Body: include/attention_decode_body.glsl.
//
// Layouts, masks and grouped-query attention are those of include/attention_body.glsl: the same
// bindings and push constants (include/attention_io.glsl), with groups_per_layer = Sq * splits.
#include "attention_decode_body.glsl"
