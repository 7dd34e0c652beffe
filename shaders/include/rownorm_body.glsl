// Softmax / LayerNormalization body (softmax.comp, layernorm.comp): a row-wise normalization
// over a set of reduced dims, output same shape as input.
// Texel dims T = [d0, d1, d2, C4, H, W] (vk_backend::layout rank rule). One WG-wide workgroup per
// "row": a fixed coordinate in the non-reduced T dims. When C (d3) is not reduced, a row texel
// carries 4 independent rows (one per lane) and statistics are per lane; when C is reduced,
// the lanes are part of the row and statistics are summed across lanes (padding lanes excluded).
// Define LAYERNORM for LayerNormalization and RMSNorm (scale/bias through fetch_weight), else
// Softmax; and SKIP with it (layernorm_skip*.comp) for a norm of a residual sum: the row is
// in + res (bindings 0 and 2, one layout), written to binding 3 as it is normalized, so the Add
// before the norm is no dispatch of its own.
#include "tensor.glsl"
#ifdef LAYERNORM
#include "weights.glsl"
#endif

// Invocations a row (the entry file may set it).
#ifndef WG
#define WG 64u
#endif
layout(local_size_x = WG) in;

TENSOR_IN(0, img_in);
TENSOR_OUT(1, img_out);
#ifdef SKIP
TENSOR_IN(2, img_res);
TENSOR_OUT(3, img_sum);
#endif

layout(push_constant) uniform Push {
    TensorDesc t;      // input and output share the layout
    uint dims12;       // d1 | d2 << 16
    uint mask;         // bits 0-5: reduced T dims; bit 8: log-softmax; bit 9: RMSNorm
    uint rows;         // number of rows (workgroups that do work)
    uint red_texels;   // texels per row
    float inv_count;   // 1 / reduced element count
    float eps;
    uint scale_offset; // texel offsets of the packed [prod(normalized dims)] scale and bias
    uint bias_offset;  // 0xFFFFFFFF: no bias
#ifdef PACKED_OUT
    TensorDesc out_t;  // the packed output [4, K/4, M]
#endif
} pc;

shared vec4 red[WG];

uint tdim(uint k) {
    uint d1 = pc.dims12 & 0xFFFFu, d2 = pc.dims12 >> 16u;
    switch (k) {
        case 0u: return pc.t.n / (d1 * d2);
        case 1u: return d1;
        case 2u: return d2;
        case 3u: return pc.t.c4;
        case 4u: return pc.t.h;
        default: return pc.t.w;
    }
}

// Adds to `c` the coordinates of flat index `f` over the T dims whose mask bit equals `want`.
void decompose(uint f, bool want, inout uint c[6]) {
    // Common case: only W reduced (last-axis softmax / layernorm): no divisions.
    if (want && (pc.mask & 63u) == 32u) {
        c[5] += f;
        return;
    }
    for (int k = 5; k >= 0; k--) {
        if (((pc.mask >> uint(k)) & 1u) == (want ? 1u : 0u)) {
            uint d = tdim(uint(k));
            c[k] += f % d;
            f /= d;
        }
    }
}

uint texel_of(uint c[6]) {
    uint d1 = pc.dims12 & 0xFFFFu, d2 = pc.dims12 >> 16u;
    uint layer = ((c[0] * d1 + c[1]) * d2 + c[2]) * pc.t.c4 + c[3];
    return texel_index(pc.t, layer, c[4], c[5]);
}

bool lanes_reduced() { return (pc.mask & 8u) != 0u; }

// Workgroup reduction of v (op 0: sum, 1: max); then across lanes if C is reduced. With
// SUBGROUP_REDUCE (the *_subgroup.comp entries), each subgroup reduces its own values and every
// invocation then folds the subgroups' results from shared memory; else a shared-memory tree.
vec4 wg_reduce(vec4 v, uint op, uint lid) {
#ifdef SUBGROUP_REDUCE
    vec4 own = op == 0u ? subgroupAdd(v) : subgroupMax(v);
    if (subgroupElect()) red[gl_SubgroupID] = own;
    barrier();
    vec4 r = red[0];
    for (uint s = 1u; s < gl_NumSubgroups; s++) r = op == 0u ? r + red[s] : max(r, red[s]);
#else
    red[lid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) red[lid] = op == 0u ? red[lid] + red[lid + s] : max(red[lid], red[lid + s]);
        barrier();
    }
    vec4 r = red[0];
#endif
    barrier();
    if (lanes_reduced()) {
        float h = op == 0u ? r.x + r.y + r.z + r.w : max(max(r.x, r.y), max(r.z, r.w));
        r = vec4(h);
    }
    return r;
}

#ifdef LAYERNORM
// Texel i of the row's input: the residual sum under SKIP, rounded to the storage precision as
// the Add it replaces would have stored it.
vec4 load_x(uint i) {
#ifdef SKIP
    vec4 v = LOAD_TEXEL(img_in, pc.t, i) + LOAD_TEXEL(img_res, pc.t, i);
#if TENSOR_HALF
    v = round_to_half(v);
#endif
    return v;
#else
    return LOAD_TEXEL(img_in, pc.t, i);
#endif
}

// Texels of a row one invocation holds on the register path.
#define ROW_REGS 8u

// LayerNorm / RMSNorm of a row over W alone (the lanes are four rows) of up to WG * ROW_REGS
// texels (a decoder's 2048-wide row at WG 256), held in registers: every input texel and scale
// value is loaded at once, before any is used, and the row is read once. The loop over the row
// instead waits for each texel in turn (a GPU compiler does not keep a loop's loads in flight by
// itself) and reads the row three times: an H200 took 61 us on each of the Whisper-tiny
// encoder's [1500, 384] norms that way (session 30). Only the register slots the row fills are
// loaded; within them an invocation past the row's end re-reads its last texel, unused.
void row_in_registers(uint base[6], bool rms, uint lid) {
    uint t0 = texel_of(base);
    uint last = pc.red_texels - 1u;
    bool biased = pc.bias_offset != 0xFFFFFFFFu;
    // Register slots the row fills (the same for the whole workgroup).
    uint regs = (pc.red_texels + WG - 1u) / WG;
    vec4 x[ROW_REGS];
    WeightLoc sl[ROW_REGS], bl[ROW_REGS];
    for (uint r = 0u; r < ROW_REGS; r++) {
        uint j = min(lid + WG * r, last);
        x[r] = r < regs ? load_x(t0 + j) : vec4(0.0);
        sl[r] = weight_locate(pc.scale_offset + j / 4u);
        bl[r] = weight_locate((biased ? pc.bias_offset : pc.scale_offset) + j / 4u);
    }
    vec4 sw[ROW_REGS], bw[ROW_REGS];
    for (uint r = 0u; r < ROW_REGS; r++) {
        sw[r] = r < regs ? imageLoad(weight_atlas, sl[r].at) : vec4(0.0);
        bw[r] = r < regs ? imageLoad(weight_atlas, bl[r].at) : vec4(0.0);
    }
    vec4 s = vec4(0.0);
    for (uint r = 0u; r < ROW_REGS; r++) {
        if (lid + WG * r <= last) s += x[r];
    }
    vec4 mean = rms ? vec4(0.0) : wg_reduce(s, 0u, lid) * pc.inv_count;
    vec4 q = vec4(0.0);
    for (uint r = 0u; r < ROW_REGS; r++) {
        vec4 d = x[r] - mean;
        if (lid + WG * r <= last) q += d * d;
    }
    vec4 rstd = inversesqrt(wg_reduce(q, 0u, lid) * pc.inv_count + pc.eps);
    for (uint r = 0u; r < ROW_REGS; r++) {
        uint j = lid + WG * r;
        if (j <= last) {
            float sc = weight_finish(sl[r], sw[r])[j % 4u];
            float bi = biased ? weight_finish(bl[r], bw[r])[j % 4u] : 0.0;
            STORE_TEXEL(img_out, pc.t, t0 + j, zero_padding(pc.t, base[3], (x[r] - mean) * rstd * sc + bi));
#ifdef SKIP
            STORE_TEXEL(img_sum, pc.t, t0 + j, zero_padding(pc.t, base[3], x[r]));
#endif
        }
    }
}
#endif

#ifdef ROW_GROUPS
// The row-group kernels (layernorm*_rows*.comp; LAYERNORM only): ROW_GROUP invocations a row, WG / ROW_GROUP rows a
// workgroup, for a norm over W alone of up to ROW_GROUP * GROUP_SLOTS texels, each row's texels
// held in registers. One workgroup a row left the Whisper-tiny encoder's 1500 rows of 384 texels
// latency-bound on an H200: 66 us a norm (session 31), 256 invocations waiting on two or three
// texels each. Here eight rows share a workgroup and its copy of the scale and bias.
#define ROW_GROUP 32u
#define GROUP_SLOTS 16u
shared float group_scale[ROW_GROUP * GROUP_SLOTS];
shared float group_bias[ROW_GROUP * GROUP_SLOTS];
shared bool subgroups_in_rows;

// Sum of v over the ROW_GROUP invocations of this invocation's row. On subgroup operations
// where each subgroup lies within one row (`aligned`, the same for the whole workgroup): a
// subgroup of ROW_GROUP invocations needs no shared memory; smaller ones add their subgroup sums
// through it. Else a shared-memory tree over the row's invocations.
vec4 group_sum(vec4 v, uint lid, bool aligned) {
    uint first = lid - lid % ROW_GROUP;
#ifdef SUBGROUP_REDUCE
    if (aligned) {
        vec4 s = subgroupAdd(v);
        if (gl_SubgroupSize == ROW_GROUP) return s;
        red[lid] = subgroupElect() ? s : vec4(0.0);
        barrier();
        vec4 r = vec4(0.0);
        for (uint i = 0u; i < ROW_GROUP; i++) r += red[first + i];
        barrier();
        return r;
    }
#endif
    red[lid] = v;
    barrier();
    for (uint s = ROW_GROUP / 2u; s > 0u; s >>= 1u) {
        if (lid - first < s) red[lid] += red[lid + s];
        barrier();
    }
    vec4 r = red[first];
    barrier();
    return r;
}

// The texel of its row an invocation's register slot r holds, and the slots a row of `red`
// texels fills: texels at, at + 32, ...; or with PACKED_OUT (layernorm*_rows_packed*.comp), where
// the rows are one matrix [M, K] of one value a texel and the normalized rows go out as the
// tensor-core MatMul's packed A ([4, K/4, M], texel (m, k/4) holding k..k+3 of row m;
// vk_backend::kernels::norm_packed_out_shape), slots 4s..4s+3 hold texels 4 (at + 32 s)..+3, so
// that each packed texel leaves from one invocation's registers and the MatMuls reading it need
// no packing copy. (Gathering the values through shared memory instead cost an H100 about 7 us
// more a norm of the Whisper-tiny encoder: session 38, runs 1 and 2.)
#ifdef PACKED_OUT
#define SLOT_TEXEL(at, r) (4u * ((at) + ROW_GROUP * ((r) / 4u)) + (r) % 4u)
#define SLOTS_USED(red) (4u * (((red) + 4u * ROW_GROUP - 1u) / (4u * ROW_GROUP)))
#else
#define SLOT_TEXEL(at, r) ((at) + ROW_GROUP * (r))
#define SLOTS_USED(red) (((red) + ROW_GROUP - 1u) / ROW_GROUP)
#endif

void rows_in_groups(bool rms, uint lid) {
    uint wg = global_id_1d() / WG;
    uint rows_per_wg = WG / ROW_GROUP;
    if (wg * rows_per_wg >= pc.rows) return;  // uniform per workgroup
    uint at = lid % ROW_GROUP;
    uint row = wg * rows_per_wg + lid / ROW_GROUP;
    bool valid = row < pc.rows;
    uint base[6] = uint[6](0u, 0u, 0u, 0u, 0u, 0u);
    decompose(min(row, pc.rows - 1u), false, base);
    uint t0 = texel_of(base);
    uint last = pc.red_texels - 1u;
    uint regs = SLOTS_USED(pc.red_texels);
    vec4 x[GROUP_SLOTS];
    [[unroll]] for (uint r = 0u; r < GROUP_SLOTS; r++) {
        x[r] = r < regs ? load_x(t0 + min(SLOT_TEXEL(at, r), last)) : vec4(0.0);
    }
    // The scale and bias, a value a column, once for the workgroup's rows.
    bool biased = pc.bias_offset != 0xFFFFFFFFu;
    for (uint i = lid; i < (pc.red_texels + 3u) / 4u; i += WG) {
        vec4 sc = fetch_weight(pc.scale_offset + i);
        vec4 bi = biased ? fetch_weight(pc.bias_offset + i) : vec4(0.0);
        for (uint l = 0u; l < 4u; l++) {
            group_scale[i * 4u + l] = sc[l];
            group_bias[i * 4u + l] = bi[l];
        }
    }
#ifdef SUBGROUP_REDUCE
    if (lid == 0u) subgroups_in_rows = true;
    barrier();
    uint r0 = lid / ROW_GROUP;
    if (gl_SubgroupSize > ROW_GROUP || subgroupMin(r0) != subgroupMax(r0)) subgroups_in_rows = false;
#endif
    barrier();
#ifdef SUBGROUP_REDUCE
    bool aligned = subgroups_in_rows;
#else
    bool aligned = false;
#endif
    vec4 s = vec4(0.0);
    [[unroll]] for (uint r = 0u; r < GROUP_SLOTS; r++) {
        if (SLOT_TEXEL(at, r) <= last) s += x[r];
    }
    vec4 mean = rms ? vec4(0.0) : group_sum(s, lid, aligned) * pc.inv_count;
    vec4 q = vec4(0.0);
    [[unroll]] for (uint r = 0u; r < GROUP_SLOTS; r++) {
        vec4 d = x[r] - mean;
        if (SLOT_TEXEL(at, r) <= last) q += d * d;
    }
    vec4 rstd = inversesqrt(group_sum(q, lid, aligned) * pc.inv_count + pc.eps);
#ifdef PACKED_OUT
    [[unroll]] for (uint r = 0u; r < GROUP_SLOTS; r += 4u) {
        uint p = at + ROW_GROUP * (r / 4u);
        if (valid && 4u * p <= last) {
            vec4 v;
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                uint j = 4u * p + i;
                v[i] = ((x[r + i] - mean) * rstd * group_scale[j] + group_bias[j]).x;
#ifdef SKIP
                STORE_TEXEL(img_sum, pc.t, t0 + j, zero_padding(pc.t, base[3], x[r + i]));
#endif
            }
            STORE_TEXEL(img_out, pc.out_t, texel_index(pc.out_t, 0u, p, row), v);
        }
    }
#else
    [[unroll]] for (uint r = 0u; r < GROUP_SLOTS; r++) {
        uint j = at + ROW_GROUP * r;
        if (valid && j <= last) {
            vec4 y = (x[r] - mean) * rstd * group_scale[j] + group_bias[j];
            STORE_TEXEL(img_out, pc.t, t0 + j, zero_padding(pc.t, base[3], y));
#ifdef SKIP
            STORE_TEXEL(img_sum, pc.t, t0 + j, zero_padding(pc.t, base[3], x[r]));
#endif
        }
    }
#endif
}
#endif

// One workgroup a row.
void row_per_workgroup() {
    uint lid = gl_LocalInvocationID.x;
    uint row = global_id_1d() / WG;
    if (row >= pc.rows) return;  // uniform per workgroup
    uint base[6] = uint[6](0u, 0u, 0u, 0u, 0u, 0u);
    decompose(row, false, base);
    const float NEG_INF = uintBitsToFloat(0xFF800000u);
#ifdef LAYERNORM
    // Mask bit 9: RMSNorm, x / sqrt(mean(x^2) + eps) * scale: no mean to subtract.
    bool rms = (pc.mask & 512u) != 0u;
    if ((pc.mask & 63u) == 32u && pc.red_texels <= WG * ROW_REGS) {
        row_in_registers(base, rms, lid);
        return;
    }
    vec4 s = vec4(0.0);
    for (uint j = lid; !rms && j < pc.red_texels; j += WG) {
        uint c[6] = base;
        decompose(j, true, c);
        s += load_x(texel_of(c));  // padding lanes are 0
    }
    vec4 mean = rms ? vec4(0.0) : wg_reduce(s, 0u, lid) * pc.inv_count;
    vec4 q = vec4(0.0);
    for (uint j = lid; j < pc.red_texels; j += WG) {
        uint c[6] = base;
        decompose(j, true, c);
        vec4 d = load_x(texel_of(c)) - mean;
        q += lanes_reduced() ? mix(vec4(0.0), d * d, channel_valid(pc.t, c[3])) : d * d;
    }
    vec4 rstd = inversesqrt(wg_reduce(q, 0u, lid) * pc.inv_count + pc.eps);
    // Element strides of the normalized (suffix) dims, for the scale/bias index.
    uint E[6] = uint[6](tdim(0u), tdim(1u), tdim(2u), pc.t.c, pc.t.h, pc.t.w);
    for (uint j = lid; j < pc.red_texels; j += WG) {
        uint c[6] = base;
        decompose(j, true, c);
        uint i = texel_of(c);
        vec4 xi = load_x(i);
        vec4 v = (xi - mean) * rstd;
        vec4 sc, bi = vec4(0.0);
        for (uint l = 0u; l < 4u; l++) {
            uint idx = 0u;
            for (uint k = 0u; k < 6u; k++) {
                if (((pc.mask >> k) & 1u) != 0u) idx = idx * E[k] + (k == 3u ? c[3] * 4u + l : c[k]);
            }
            sc[l] = fetch_weight(pc.scale_offset + idx / 4u)[idx % 4u];
            if (pc.bias_offset != 0xFFFFFFFFu) bi[l] = fetch_weight(pc.bias_offset + idx / 4u)[idx % 4u];
            if (!lanes_reduced()) {
                sc = vec4(sc.x);
                bi = vec4(bi.x);
                break;
            }
        }
        STORE_TEXEL(img_out, pc.t, i, zero_padding(pc.t, c[3], v * sc + bi));
#ifdef SKIP
        STORE_TEXEL(img_sum, pc.t, i, zero_padding(pc.t, c[3], xi));
#endif
    }
#else
    vec4 m = vec4(NEG_INF);
    for (uint j = lid; j < pc.red_texels; j += WG) {
        uint c[6] = base;
        decompose(j, true, c);
        vec4 v = LOAD_TEXEL(img_in, pc.t, texel_of(c));
        m = max(m, lanes_reduced() ? mix(vec4(NEG_INF), v, channel_valid(pc.t, c[3])) : v);
    }
    m = wg_reduce(m, 1u, lid);
    vec4 s = vec4(0.0);
    for (uint j = lid; j < pc.red_texels; j += WG) {
        uint c[6] = base;
        decompose(j, true, c);
        vec4 e = exp(LOAD_TEXEL(img_in, pc.t, texel_of(c)) - m);
        s += lanes_reduced() ? mix(vec4(0.0), e, channel_valid(pc.t, c[3])) : e;
    }
    s = wg_reduce(s, 0u, lid);
    bool logsm = (pc.mask & 256u) != 0u;
    vec4 inv = 1.0 / s, ls = log(s);
    for (uint j = lid; j < pc.red_texels; j += WG) {
        uint c[6] = base;
        decompose(j, true, c);
        uint i = texel_of(c);
        vec4 x = LOAD_TEXEL(img_in, pc.t, i) - m;
        vec4 y = logsm ? x - ls : exp(x) * inv;
        STORE_TEXEL(img_out, pc.t, i, zero_padding(pc.t, c[3], y));
    }
#endif
}

void main() {
#ifdef ROW_GROUPS
    rows_in_groups((pc.mask & 512u) != 0u, gl_LocalInvocationID.x);
#else
    row_per_workgroup();
#endif
}
