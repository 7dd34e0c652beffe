#version 450
// Rows of a lookup table in the weight space, by run-time ids (a vocabulary embedding):
// out[q, x] = table[ids[q], x]. The table [rows, width] is packed by rows (four rows per texel:
// texel (r/4)*width + x, lane r%4), the layout a tied output head reads as B^T. Ids wrap when
// negative and clamp to the table, as Gather's do. One invocation per output texel.
// Flag bit 0 (streamed lookups): write only the lanes whose row's texel is on a resident page and
// keep the others, so the runtime can fill the output over several passes, one page at a time.
#include "tensor.glsl"
#include "weights.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_ids);
TENSOR_INOUT(1, img_out);

layout(push_constant) uniform Push {
    TensorDesc ids_t;
    TensorDesc out_t;
    uint table_offset;  // first texel of the packed table
    uint rows;
    uint width;
    uint flags;
} pc;

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.out_t)) return;
    uvec4 p = texel_nc4yx(pc.out_t, i);
    bool partial = (pc.flags & 1u) != 0u;
    vec4 v = partial ? LOAD_TEXEL(img_out, pc.out_t, i) : vec4(0.0);
    for (uint j = 0u; j < 4u; j++) {
        uint c = p.y * 4u + j;
        if (c >= pc.out_t.c) {
            v[j] = 0.0;  // padding lanes stay zero
            continue;
        }
        // Row-major flat index of the element; its last axis is the table's width.
        uint e = ((p.x * pc.out_t.c + c) * pc.out_t.h + p.z) * pc.out_t.w + p.w;
        uint q = e / pc.width, x = e % pc.width;
        uint iw = q % pc.ids_t.w, ih = (q / pc.ids_t.w) % pc.ids_t.h;
        uint ic = (q / (pc.ids_t.w * pc.ids_t.h)) % pc.ids_t.c;
        uint in_ = q / (pc.ids_t.w * pc.ids_t.h * pc.ids_t.c);
        int id = int(LOAD_ELEMENT(img_ids, pc.ids_t, in_, ic, ih, iw));
        if (id < 0) id += int(pc.rows);
        uint r = uint(clamp(id, 0, int(pc.rows) - 1));
        uint t = pc.table_offset + (r / 4u) * pc.width + x;
        if (partial && !weight_mapped(t)) continue;
        v[j] = fetch_weight(t)[r & 3u];
    }
    STORE_TEXEL(img_out, pc.out_t, i, v);
}
