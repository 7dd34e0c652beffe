// Push constants and batch addressing shared by the MatMul kernels (include/matmul_body.glsl and
// matmul_const_coop.comp); see vk_backend::kernels::matmul for the field meanings.
#ifndef TEXSTREAM_MATMUL_COMMON_GLSL
#define TEXSTREAM_MATMUL_COMMON_GLSL

layout(push_constant) uniform Push {
    TensorDesc out_t;
    TensorDesc a_t;
    TensorDesc b_t;  // MATMUL_CONST_B: b_t.n = texel offset of the packed B, rest unused
    uint dims12;     // output dims d1 | d2 << 16 (batch decomposition of the layer index)
    uint flags;      // 0-3 A batch-broadcast mask (d0..d3), 4-7 B mask, 8 transA, 9 transB,
                     // 10 bias per row, 11 bias per column, 12 has bias, 13 scalar mode,
                     // 14 constant B stored by rows (B^T, see const_b),
                     // 16-23 activation code, 24-25 log2 of matmul_const_gemv.comp's MP
                     // (MATMUL_TENSOR_BIAS: bit 12 is set, C is the tensor img_c)
    float alpha;
    float beta;
    float act_a;
    float act_b;
    uint bias_offset; // MATMUL_TENSOR_BIAS: C's physical width | height << 16
    uint k;
} pc;


// Layer of an operand feeding output batch (nidx, c4i); `m` = its broadcast mask.
uint operand_layer(TensorDesc t, uint m, uint nidx, uint c4i) {
    uint d1 = pc.dims12 & 0xFFFFu, d2 = pc.dims12 >> 16u;
    uint i2 = nidx % d2;
    uint i1 = (nidx / d2) % d1;
    uint i0 = nidx / (d1 * d2);
    uint na = (((m & 1u) != 0u ? 0u : i0) * ((m & 2u) != 0u ? 1u : d1) + ((m & 2u) != 0u ? 0u : i1)) *
                  ((m & 4u) != 0u ? 1u : d2) +
              ((m & 4u) != 0u ? 0u : i2);
    return na * t.c4 + ((m & 8u) != 0u ? 0u : c4i);
}

#endif
