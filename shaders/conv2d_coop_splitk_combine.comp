#version 450
// Finishes a tensor-core convolution split over reduction spans (conv2d_coop*_splitk.comp): one
// invocation an output texel (four channels of a pixel) sums the spans' partial results
// (include/conv_partials.glsl), then adds the bias and the addend and applies the activation as
// the unsplit kernels' epilogue does. Same bindings and push constants as the split kernels:
// the input at 0 and the input scale at 3 go unread, the output at 1 is written, the addend at 2
// and the partials at 4 are read.
#include "tensor.glsl"
#include "weights.glsl"
#include "activation.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);
TENSOR_IN(2, img_add);

#include "conv_push.glsl"
#include "conv_partials.glsl"

void main() {
    uint i = global_id_1d();
    uint pixels = pc.out_t.h * pc.out_t.w, c4 = pc.out_t.c4;
    if (i >= pc.out_t.n * c4 * pixels) return;
    // Consecutive invocations walk pixels (neighbouring texels of an output row).
    uint m = i % pixels, oc4 = (i / pixels) % c4, n = i / (pixels * c4);
    uint splits = conv_splits();
    vec4 s = vec4(0.0);
    for (uint span = 0u; span < splits; span++) {
        s += load_partial(conv_partial_index(span, pc.out_t.n, n, m, oc4));
    }
    if (pc.b_off != 0xFFFFFFFFu) s += fetch_weight(pc.b_off + oc4);
    uint OW = pc.out_t.w;
    uint at = texel_index(pc.out_t, n * c4 + oc4, m / OW, m % OW);
    if ((pc.act & 0x200u) != 0u) s += LOAD_TEXEL(img_add, pc.out_t, at);
    vec4 v = apply_unary(pc.act & 0xFFu, pc.alpha, pc.beta, s);
    STORE_TEXEL(img_out, pc.out_t, at, zero_padding(pc.out_t, oc4, v));
}
