#version 450
// ReduceSum / ReduceMean / ReduceMax / ReduceMin / ArgMax / ArgMin over any set of axes, keepdims
// or not. One invocation per output texel. Output dim k reads input dim map[k] (or none); the
// reduced input dims are walked by a flat counter. Fast path (flag bit 17): the output's channel
// lanes are the input's channel lanes and C is not reduced, so whole texels are combined;
// otherwise every valid output lane reduces its own elements.
// Index outputs (ArgMax/ArgMin) are written as float values of the index along the axis.
#include "tensor.glsl"

layout(local_size_x = 64) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);

layout(push_constant) uniform Push {
    TensorDesc out_t;
    TensorDesc in_t;
    uint in_d12;     // input d1 | d2 << 16
    uint out_d12;    // output d1 | d2 << 16
    uint map;        // 4 bits per output dim k: input dim feeding it, 15 = none
    uint flags;      // 0-5 reduced input dims, 8-15 op, 16 select_last_index, 17 texel fast path
    uint red_count;  // elements per reduction
    float scale;     // Mean: 1 / red_count
} pc;

void dims(TensorDesc t, uint d12, out uint e[6]) {
    uint d1 = d12 & 0xFFFFu, d2 = d12 >> 16u;
    e[0] = t.n / (d1 * d2);
    e[1] = d1;
    e[2] = d2;
    e[3] = t.c;
    e[4] = t.h;
    e[5] = t.w;
}

// Coordinates of the j-th element of the reduced set, added to `c`.
void add_reduced(uint j, uint e[6], inout uint c[6]) {
    for (int k = 5; k >= 0; k--) {
        if (((pc.flags >> uint(k)) & 1u) != 0u) {
            c[k] += j % e[k];
            j /= e[k];
        }
    }
}

uint in_texel(uint c[6], uint e[6]) {
    uint layer = ((c[0] * e[1] + c[1]) * e[2] + c[2]) * pc.in_t.c4 + c[3] / 4u;
    return texel_index(pc.in_t, layer, c[4], c[5]);
}

#define INF uintBitsToFloat(0x7F800000u)

void main() {
    uint i = global_id_1d();
    if (i >= tensor_texels(pc.out_t)) return;
    uvec4 p = texel_nc4yx(pc.out_t, i);
    uint oe[6], ie[6];
    dims(pc.out_t, pc.out_d12, oe);
    dims(pc.in_t, pc.in_d12, ie);
    uint o[6] = uint[6](p.x / (oe[1] * oe[2]), (p.x / oe[2]) % oe[1], p.x % oe[2], p.y * 4u, p.z, p.w);
    uint base[6] = uint[6](0u, 0u, 0u, 0u, 0u, 0u);
    for (uint k = 0u; k < 6u; k++) {
        uint src = (pc.map >> (4u * k)) & 15u;
        if (src < 6u) base[src] = o[k];
    }
    uint op = (pc.flags >> 8u) & 255u;
    bool last = (pc.flags & 0x10000u) != 0u;
    bool arg = op >= 4u;
    bool want_max = op == 2u || op == 4u;
    vec4 init = op <= 1u ? vec4(0.0) : vec4(want_max ? -INF : INF);
    vec4 acc = init, idx = vec4(0.0);
    if ((pc.flags & 0x20000u) != 0u) {
        for (uint j = 0u; j < pc.red_count; j++) {
            uint c[6] = base;
            add_reduced(j, ie, c);
            vec4 v = LOAD_TEXEL(img_in, pc.in_t, in_texel(c, ie));
            if (op <= 1u) {
                acc += v;
            } else {
                bvec4 better = want_max ? greaterThan(v, acc) : lessThan(v, acc);
                if (last) better = bvec4(uvec4(better) | uvec4(equal(v, acc)));
                if (j == 0u) better = bvec4(true);
                acc = mix(acc, v, better);
                idx = mix(idx, vec4(float(j)), better);
            }
        }
    } else {
        // The input dim feeding the output's channel lanes (none: only lane 0 is real).
        uint lane_src = (pc.map >> 12u) & 15u;
        for (uint l = 0u; l < 4u; l++) {
            if (p.y * 4u + l >= pc.out_t.c) break;
            uint b[6] = base;
            if (lane_src < 6u) b[lane_src] = p.y * 4u + l;
            float a = init.x, ix = 0.0;
            for (uint j = 0u; j < pc.red_count; j++) {
                uint c[6] = b;
                add_reduced(j, ie, c);
                float v = LOAD_TEXEL(img_in, pc.in_t, in_texel(c, ie))[c[3] % 4u];
                if (op <= 1u) {
                    a += v;
                } else {
                    bool better = want_max ? v > a : v < a;
                    if ((last && v == a) || j == 0u) better = true;
                    if (better) {
                        a = v;
                        ix = float(j);
                    }
                }
            }
            acc[l] = a;
            idx[l] = ix;
        }
    }
    vec4 r = arg ? idx : (op == 1u ? acc * pc.scale : acc);
    STORE_TEXEL(img_out, pc.out_t, i, zero_padding(pc.out_t, p.y, r));
}
