// The filter rows of one output unit of the dense direct convolutions (include/conv2d_body.glsl,
// include/conv2d_splitk_body.glsl): CONV_FILTER_ROWS(n, o0, row_texels) declares in_layer0 (the
// unit's group's first input layer), wbase (the weight-space texel of each of the four rows,
// pack_conv_filter: one row an output channel; padding output lanes read the last real row,
// their result zeroed on store) and, in the _plain kernels (PLAIN_WEIGHT_ROWS), wr (each row's
// pages found once, weight_run). FILTER_TEXEL(j, t) is texel t of row j either way. Needs the
// conv push constants and weights.glsl.
#ifndef TEXSTREAM_CONV_FILTER_ROWS_GLSL
#define TEXSTREAM_CONV_FILTER_ROWS_GLSL

#define CONV_FILTER_ROW_BASES(n, o0, row_texels)                                              \
    uint in_layer0 = (n) * pc.in_t.c4 + (((o0) / pc.ocg) * pc.icg) / 4u;                     \
    uvec4 wbase = min(uvec4(o0, (o0) + 1u, (o0) + 2u, (o0) + 3u), uvec4(pc.out_t.c - 1u)) *  \
                      (row_texels) + pc.w_off

#ifdef PLAIN_WEIGHT_ROWS
#define CONV_FILTER_ROWS(n, o0, row_texels)                                                   \
    CONV_FILTER_ROW_BASES(n, o0, row_texels);                                                \
    WeightRun wr[4] = WeightRun[4](weight_run(wbase.x), weight_run(wbase.y), weight_run(wbase.z), \
                                   weight_run(wbase.w))
#define FILTER_TEXEL(j, t) fetch_run(wr[j], t)
#else
#define CONV_FILTER_ROWS(n, o0, row_texels) CONV_FILTER_ROW_BASES(n, o0, row_texels)
#define FILTER_TEXEL(j, t) fetch_weight(wbase[j] + (t))
#endif

#endif
