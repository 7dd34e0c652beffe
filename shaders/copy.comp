#version 450
// Generic strided N-d copy / gather into a region of the destination (Transpose, Reshape,
// Slice, Concat, Split, Expand, Tile, Gather, Cast). One invocation per destination texel of the
// region's texel box. For every valid lane whose element lies in the region, with region-local
// coordinates r[6]:
//   mode 0 (affine): src linear index = base + sum_k w(r[k]) * stride[k], where w wraps a
//                    coordinate modulo wrap[k] when that is non-zero (Tile), else keeps it
//   mode 1 (gather): same, but dims [qs, qs+qr) are replaced by idx_value * axis_stride, where
//                    idx_value is read from the index tensor at those coordinates (negative wraps)
//   mode 2 (gather elements): dim qs is replaced by idx_value * axis_stride, where idx_value is
//                    read from the index tensor (destination-shaped) at the same coordinates
// The src linear index is decomposed over the src's 6-dim shape to find the texel and lane.
// Lanes outside the region keep the destination's current value (the image is read-write), so
// several dispatches can fill one tensor (Concat). post: 0 copy, 1 trunc (cast to int), 2 x != 0.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_src);
TENSOR_IN(1, img_idx);
TENSOR_INOUT(2, img_dst);

layout(set = 0, binding = 3, std430) readonly buffer Params {
    uint dst_dims[6];
    uint src_dims[6];
    int stride[6];     // per destination dim, in src elements (row-major src linear index)
    int base;
    uint lo[6];        // region origin in destination element coordinates
    uint size[6];      // region extent
    uint mode;
    uint qs;           // gather: first destination dim fed by the index tensor
    uint qr;           // gather: number of index dims
    int axis_stride;   // gather: src stride of the gathered axis
    int axis_size;     // gather: size of the gathered axis (negative indices wrap)
    uint idx_dims[6];
    uint post;
    uint box_c4;       // C4 blocks the region touches
    uint wrap[6];      // per destination dim: coordinate modulus, 0 = none (Tile)
} prm;

layout(push_constant) uniform Push {
    TensorDesc dst_t;
    TensorDesc src_t;
    TensorDesc idx_t;
    uint box_texels;
} pc;

float load_src(int lin) {
    uint f = uint(lin);
    uint c[6];
    for (int k = 5; k >= 0; k--) {
        c[k] = f % prm.src_dims[k];
        f /= prm.src_dims[k];
    }
    uint layer = ((c[0] * prm.src_dims[1] + c[1]) * prm.src_dims[2] + c[2]) * pc.src_t.c4 + c[3] / 4u;
    return LOAD_TEXEL(img_src, pc.src_t, texel_index(pc.src_t, layer, c[4], c[5]))[c[3] % 4u];
}

float load_idx(uint r[6]) {
    uint c[6] = uint[6](0u, 0u, 0u, 0u, 0u, 0u);
    if (prm.mode == 2u) c = r;
    else for (uint j = 0u; j < prm.qr; j++) c[6u - prm.qr + j] = r[prm.qs + j];
    uint layer = ((c[0] * prm.idx_dims[1] + c[1]) * prm.idx_dims[2] + c[2]) * pc.idx_t.c4 + c[3] / 4u;
    return LOAD_TEXEL(img_idx, pc.idx_t, texel_index(pc.idx_t, layer, c[4], c[5]))[c[3] % 4u];
}

void main() {
    uint i = global_id_1d();
    if (i >= pc.box_texels) return;
    // Box texel -> region-local coordinates (C as a C4 block).
    uint rx = i % prm.size[5];
    uint t = i / prm.size[5];
    uint ry = t % prm.size[4];
    t /= prm.size[4];
    uint rc = t % prm.box_c4;
    t /= prm.box_c4;
    uint r2 = t % prm.size[2];
    t /= prm.size[2];
    uint r1 = t % prm.size[1];
    uint r0 = t / prm.size[1];
    uint o[6] = uint[6](prm.lo[0] + r0, prm.lo[1] + r1, prm.lo[2] + r2, 0u, prm.lo[4] + ry, prm.lo[5] + rx);
    uint c4i = prm.lo[3] / 4u + rc;
    uint layer = ((o[0] * prm.dst_dims[1] + o[1]) * prm.dst_dims[2] + o[2]) * pc.dst_t.c4 + c4i;
    uint di = texel_index(pc.dst_t, layer, o[4], o[5]);
    // Lanes in the region; if some valid lane is outside it, keep the current value there.
    uint first = c4i * 4u;
    bool whole = first >= prm.lo[3] && first + 4u <= prm.lo[3] + prm.size[3];
    bool whole_valid = first >= prm.lo[3] && min(first + 4u, prm.dst_dims[3]) <= prm.lo[3] + prm.size[3];
    vec4 v = whole || whole_valid ? vec4(0.0) : LOAD_TEXEL(img_dst, pc.dst_t, di);
    for (uint l = 0u; l < 4u; l++) {
        uint ch = first + l;
        if (ch < prm.lo[3] || ch >= prm.lo[3] + prm.size[3] || ch >= prm.dst_dims[3]) continue;
        uint r[6] = uint[6](r0, r1, r2, ch - prm.lo[3], ry, rx);
        int lin = prm.base;
        for (uint k = 0u; k < 6u; k++) {
            if (prm.mode != 0u && k >= prm.qs && k < prm.qs + prm.qr) continue;
            uint rk = prm.wrap[k] != 0u ? r[k] % prm.wrap[k] : r[k];
            lin += int(rk) * prm.stride[k];
        }
        if (prm.mode != 0u) {
            int q = int(load_idx(r));
            if (q < 0) q += prm.axis_size;
            q = clamp(q, 0, prm.axis_size - 1);
            lin += q * prm.axis_stride;
        }
        float x = load_src(lin);
        if (prm.post == 1u) x = trunc(x);
        else if (prm.post == 2u) x = x != 0.0 ? 1.0 : 0.0;
        v[l] = x;
    }
    STORE_TEXEL(img_dst, pc.dst_t, di, zero_padding(pc.dst_t, c4i, v));
}
