// The direct convolution kernels' epilogue (include/conv2d_body.glsl,
// include/conv2d_splitk_body.glsl): bias, addend, activation and store of one output unit (4
// channels of output layer `layer` at PX pixels from ox0 of row oy). Needs PX, the conv push
// constants, and the img_out and img_add bindings.
#ifndef TEXSTREAM_CONV_EPILOGUE_GLSL
#define TEXSTREAM_CONV_EPILOGUE_GLSL

void store_conv_unit(uint layer, uint oc4, uint oy, uint ox0, vec4 acc[PX]) {
    vec4 bias = pc.b_off == 0xFFFFFFFFu ? vec4(0.0) : fetch_weight(pc.b_off + oc4);
    uint act = pc.act & 0xFFu;
    bool addend = (pc.act & 0x200u) != 0u;
    uint orow_out = texel_index(pc.out_t, layer, oy, 0u);
    for (int p = 0; p < PX; ++p) {
        uint ox = ox0 + uint(p);
        if (ox >= pc.out_t.w) break;
        vec4 s = acc[p] + bias;
        if (addend) s += LOAD_TEXEL(img_add, pc.out_t, orow_out + ox);
        vec4 v = apply_unary(act, pc.alpha, pc.beta, s);
        STORE_TEXEL(img_out, pc.out_t, orow_out + ox, zero_padding(pc.out_t, oc4, v));
    }
}

#endif
