#version 450
// ScatterND as a gather: each output element scans the index rows in order and applies every
// update addressed to it (none: the last one wins, add, mul). No atomics are needed and repeated
// indices follow the ONNX order; the cost is output elements x index rows.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_data);
TENSOR_IN(1, img_idx);
TENSOR_IN(2, img_upd);
TENSOR_OUT(3, img_out);

layout(set = 0, binding = 4, std430) readonly buffer Params {
    uint dims[6];      // data (and output), padded to 6
    uint idx_dims[6];
    uint upd_dims[6];
    uint rank;         // data's own rank
    uint k;            // index tuple length
    uint rows;         // index tuples
    uint inner;        // elements per update slice (data.shape[k:])
    uint reduction;    // 0 none, 1 add, 2 mul
} prm;

layout(push_constant) uniform Push {
    TensorDesc out_t;
    TensorDesc data_t;
    TensorDesc idx_t;
    TensorDesc upd_t;
} pc;

float load_idx(uint lin) {
    uint c[6];
    for (int a = 5; a >= 0; a--) {
        c[a] = lin % prm.idx_dims[a];
        lin /= prm.idx_dims[a];
    }
    uint layer = ((c[0] * prm.idx_dims[1] + c[1]) * prm.idx_dims[2] + c[2]) * pc.idx_t.c4 + c[3] / 4u;
    return LOAD_TEXEL(img_idx, pc.idx_t, texel_index(pc.idx_t, layer, c[4], c[5]))[c[3] % 4u];
}

float load_upd(uint lin) {
    uint c[6];
    for (int a = 5; a >= 0; a--) {
        c[a] = lin % prm.upd_dims[a];
        lin /= prm.upd_dims[a];
    }
    uint layer = ((c[0] * prm.upd_dims[1] + c[1]) * prm.upd_dims[2] + c[2]) * pc.upd_t.c4 + c[3] / 4u;
    return LOAD_TEXEL(img_upd, pc.upd_t, texel_index(pc.upd_t, layer, c[4], c[5]))[c[3] % 4u];
}

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.out_t)) return;
    uvec4 p = texel_nc4yx(pc.out_t, i);
    uint c[6];
    c[2] = p.x % prm.dims[2];
    c[1] = (p.x / prm.dims[2]) % prm.dims[1];
    c[0] = p.x / (prm.dims[1] * prm.dims[2]);
    c[4] = p.z;
    c[5] = p.w;
    vec4 v = LOAD_TEXEL(img_data, pc.data_t, texel_index(pc.data_t, p.x * pc.data_t.c4 + p.y, p.z, p.w));
    uint base = 6u - prm.rank;
    for (uint l = 0u; l < 4u; l++) {
        uint ch = p.y * 4u + l;
        if (ch >= prm.dims[3]) break;
        c[3] = ch;
        uint off = 0u;
        for (uint a = base + prm.k; a < 6u; a++) off = off * prm.dims[a] + c[a];
        float x = v[l];
        for (uint u = 0u; u < prm.rows; u++) {
            bool hit = true;
            for (uint j = 0u; j < prm.k && hit; j++) {
                int q = int(load_idx(u * prm.k + j));
                int d = int(prm.dims[base + j]);
                if (q < 0) q += d;
                hit = q == int(c[base + j]);
            }
            if (hit) {
                float w = load_upd(u * prm.inner + off);
                x = prm.reduction == 1u ? x + w : (prm.reduction == 2u ? x * w : w);
            }
        }
        v[l] = x;
    }
    STORE_TEXEL(img_out, pc.out_t, i, zero_padding(pc.out_t, p.y, v));
}
