// The MatMul epilogue shared by include/matmul_body.glsl, matmul_const_gemv.comp, the tensor-core
// kernels (include/matmul_coop_body.glsl) and matmul_splitk_combine.comp: alpha, the
// bias (a weight through fetch_weight, or the run-time tensor img_c), the fused activation and
// the store of output texel (m, n) of `layer`. Included after the bindings and the push constants.
#ifndef TEXSTREAM_MATMUL_STORE_GLSL
#define TEXSTREAM_MATMUL_STORE_GLSL

void store_out(uint layer, uint c4i, uint m, uint n, vec4 v) {
    uint M = pc.out_t.h, N = pc.out_t.w;
    uint act = (pc.flags >> 16u) & 255u;
    v *= pc.alpha;
#if defined(MATMUL_TENSOR_BIAS)
    if ((pc.flags & 4096u) != 0u) {
        bool per_row = (pc.flags & 1024u) != 0u, per_col = (pc.flags & 2048u) != 0u;
        TensorDesc c_t = TensorDesc(1u, 1u, per_row ? M : 1u, per_col ? N : 1u, 1u,
                                    pc.bias_offset & 0xFFFFu, pc.bias_offset >> 16u, 1u);
        uint ci = texel_index(c_t, 0u, per_row ? m : 0u, per_col ? n : 0u);
        v += pc.beta * LOAD_TEXEL(img_c, c_t, ci).x;
    }
#elif defined(MATMUL_WEIGHTS)
    if ((pc.flags & 4096u) != 0u) {
        bool per_row = (pc.flags & 1024u) != 0u, per_col = (pc.flags & 2048u) != 0u;
        uint bi = (per_row ? m : 0u) * (per_col ? N : 1u) + (per_col ? n : 0u);
        v += pc.beta * fetch_weight(pc.bias_offset + bi / 4u)[bi % 4u];
    }
#endif
    v = apply_unary(act, pc.act_a, pc.act_b, v);
    STORE_TEXEL(img_out, pc.out_t, texel_index(pc.out_t, layer, m, n), zero_padding(pc.out_t, c4i, v));
}


#ifdef MATMUL_WEIGHTS
// flags bit 26 (the tensor-core kernels, one matrix, unsplit): the output goes to the next
// MatMul's packed A, [4, N/4, M] (texel (m, n/4) holding columns n..n+3 of row m), described by
// pc.out_t, instead of one value a texel: a quarter of the stores, and no copy before the next
// MatMul.
#define PACKED_OUT (1u << 26u)

// The epilogue of columns n..n+3 (n a multiple of 4, N of them in all) of row m, stored as one
// texel of the packed output.
void store_out_packed(uint m, uint n, uint N, vec4 v) {
    uint act = (pc.flags >> 16u) & 255u;
    v *= pc.alpha;
    if ((pc.flags & 4096u) != 0u) {
        bool per_row = (pc.flags & 1024u) != 0u, per_col = (pc.flags & 2048u) != 0u;
        if (per_col) {
            uint bi = (per_row ? m * N : 0u) + n;
            v += pc.beta * fetch_weight(pc.bias_offset + bi / 4u);
        } else {
            uint bi = per_row ? m : 0u;
            v += pc.beta * fetch_weight(pc.bias_offset + bi / 4u)[bi % 4u];
        }
    }
    v = apply_unary(act, pc.act_a, pc.act_b, v);
    STORE_TEXEL(img_out, pc.out_t, texel_index(pc.out_t, 0u, n / 4u, m), v);
}
#endif

#endif
