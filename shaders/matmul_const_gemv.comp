#version 450
// MatMul/Gemm of a few rows (M <= 4: a decoder's one token, a head's rows) against a constant B
// read through fetch_weight, scalar mode only (output C == 1): the tiled body gives each
// workgroup 32 rows, so at M = 1 it idles 31 of every 32 invocations and serializes K in few
// workgroups. Here a workgroup of 256 owns 4 * MP output columns (MP 1, 2 or 4, at least M
// rounded up, from flag bits 24-25; vk_backend::kernels::matmul::gemv_spread) in G column groups
// and splits K into S = 256 / G slices. A GEMV is bound by the round trips to memory each
// invocation waits for, so: A's rows are staged SHARED / MP vec4s (4 k each) at a time, the whole
// row of a decoder's projection at once (K up to 6144 at M = 1), with every invocation's texel
// loads issued together; each invocation then takes its weight texels BATCH at a time, issuing a
// batch's atlas loads together and the next batch's page-table reads while they are in flight.
// The slices' partial sums meet in shared memory (a tree down to 16) and slice 0 stores.
// B layouts (flag bit 14, see include/matmul_body.glsl const_b):
//   packed [K, N]:  texel (k/4, n), 4 consecutive k in the lanes; G = 4 * MP groups of one
//                   column, the column is the fast invocation index (consecutive texels);
//   by rows (B^T):  texel (n/4)*K + k, 4 consecutive n in the lanes; G = MP groups of 4
//                   columns, the slice is the fast invocation index (consecutive k are
//                   consecutive texels).
// Bias through fetch_weight (MATMUL_WEIGHTS), no run-time C. Epilogue: include/matmul_store.glsl.
#define MATMUL_WEIGHTS
#define MATMUL_CONST_B
#include "tensor.glsl"
#include "activation.glsl"
#include "weights.glsl"

#define MAX_ROWS 4u
// Shared vec4s: A's staged chunk over all rows, then the partial sums (256 * MAX_ROWS).
#define SHARED 1536u
#define STAGED_PER_INVOCATION 6u // SHARED / 256
// Weight texels an invocation loads at once.
#define BATCH 8u

layout(local_size_x = 256) in;

TENSOR_IN(0, img_a);
TENSOR_OUT(1, img_out);

#include "matmul_common.glsl"
#include "matmul_store.glsl"

shared vec4 buf[SHARED];

void main() {
    uint tid = gl_LocalInvocationID.x;
    bool rows_b = (pc.flags & 16384u) != 0u;
    uint M = pc.out_t.h, N = pc.out_t.w, K = pc.k;
    uint mp = 1u << ((pc.flags >> 24u) & 3u);
    uint CHUNK = SHARED / mp;
    uint G = rows_b ? mp : 4u * mp, S = 256u / G;
    uint g = rows_b ? tid / S : tid % G;
    uint s = rows_b ? tid % S : tid / G;
    uint layer = gl_WorkGroupID.z;
    uint nidx = layer / pc.out_t.c4, c4i = layer % pc.out_t.c4;
    uint fa = pc.flags & 15u;
    bool ta = (pc.flags & 256u) != 0u;
    uint a_layer = operand_layer(pc.a_t, fa, nidx, c4i);
    // First column of this invocation's group.
    uint n = (gl_WorkGroupID.x * G + g) * (rows_b ? 4u : 1u);
    bool live = n < N;
    uint K4 = (K + 3u) / 4u;
    uint rows_base = pc.b_t.n + (n / 4u) * K;

    vec4 acc[MAX_ROWS];
    for (uint m = 0u; m < MAX_ROWS; m++) acc[m] = vec4(0.0);
    for (uint c0 = 0u; c0 < K4; c0 += CHUNK) {
        uint end = min(CHUNK, K4 - c0);
        if (c0 > 0u) barrier(); // the previous chunk is read
        // Stage A[m, 4*(c0 + t) .. +3] for every row: buf[m * CHUNK + t], t < end (element e =
        // m * end + t, so that the elements past M * end are whole skipped vectors on a CPU).
        vec4 av[STAGED_PER_INVOCATION];
        for (uint r = 0u; r < STAGED_PER_INVOCATION; r++) {
            uint e = tid + r * 256u, m = e / end, t = e % end;
            vec4 v = vec4(0.0);
            if (m < M) {
                for (uint j = 0u; j < 4u; j++) {
                    uint k = 4u * (c0 + t) + j;
                    if (k < K) {
                        uint idx = ta ? texel_index(pc.a_t, a_layer, k, m) : texel_index(pc.a_t, a_layer, m, k);
                        v[j] = LOAD_TEXEL(img_a, pc.a_t, idx).x;
                    }
                }
            }
            av[r] = v;
        }
        for (uint r = 0u; r < STAGED_PER_INVOCATION; r++) {
            uint e = tid + r * 256u;
            if (e < M * end) buf[(e / end) * CHUNK + e % end] = av[r];
        }
        barrier();
        // This invocation's items: packed, t = s, s + S, ... below `end` (texel (c0 + t, n));
        // by rows, k - 4 * c0 = s, s + S, ... below `limit` (texel rows_base + k).
        uint limit = rows_b ? min(K, 4u * (c0 + end)) - 4u * c0 : end;
        uint batches = ((limit + S - 1u) / S + BATCH - 1u) / BATCH;
        uint ent[BATCH];
        for (uint u = 0u; u < BATCH; u++) {
            uint raw = s + u * S, it = min(raw, limit - 1u);
            uint wi = rows_b ? rows_base + 4u * c0 + it : pc.b_t.n + (c0 + it) * N + n;
            ent[u] = live && raw < limit ? weight_entry(wi) : WEIGHT_UNMAPPED;
        }
        for (uint b = 0u; b < batches; b++) {
            vec4 w[BATCH];
            uint wi[BATCH];
            // Items past the slice's end load nothing (a short K would otherwise load the
            // last texel BATCH times over).
            for (uint u = 0u; u < BATCH; u++) {
                uint raw = s + (b * BATCH + u) * S, it = min(raw, limit - 1u);
                wi[u] = rows_b ? rows_base + 4u * c0 + it : pc.b_t.n + (c0 + it) * N + n;
                w[u] = live && raw < limit ? imageLoad(weight_atlas, weight_coord(wi[u], ent[u]))
                                           : vec4(0.0);
            }
            uint next[BATCH];
            for (uint u = 0u; u < BATCH; u++) {
                uint raw = s + ((b + 1u) * BATCH + u) * S, it = min(raw, limit - 1u);
                uint ni = rows_b ? rows_base + 4u * c0 + it : pc.b_t.n + (c0 + it) * N + n;
                next[u] = live && raw < limit ? weight_entry(ni) : WEIGHT_UNMAPPED;
            }
            for (uint u = 0u; u < BATCH; u++) {
                uint it = s + (b * BATCH + u) * S;
                if (live && it < limit) {
                    vec4 wv = weight_finish(wi[u], ent[u], w[u]);
                    for (uint m = 0u; m < MAX_ROWS; m++) {
                        if (m >= M) continue;
                        if (rows_b) {
                            acc[m] += buf[m * CHUNK + it / 4u][it % 4u] * wv;
                        } else {
                            acc[m].x += dot(buf[m * CHUNK + it], wv);
                        }
                    }
                }
            }
            for (uint u = 0u; u < BATCH; u++) ent[u] = next[u];
        }
    }
    barrier(); // buf now holds the partial sums: [slice][row][group]
    for (uint m = 0u; m < MAX_ROWS; m++) buf[(s * MAX_ROWS + m) * G + g] = acc[m];
    // Halve the slices in a tree down to 16, which slice 0 sums (a barrier costs more than
    // summing 16 on a CPU device, where S is 16 and the tree is skipped).
    for (uint stride = S / 2u; stride >= 16u; stride >>= 1u) {
        barrier();
        if (s < stride) {
            for (uint m = 0u; m < MAX_ROWS; m++) {
                buf[(s * MAX_ROWS + m) * G + g] += buf[((s + stride) * MAX_ROWS + m) * G + g];
            }
        }
    }
    barrier();
    if (s != 0u || !live) return;
    for (uint m = 0u; m < M && m < MAX_ROWS; m++) {
        vec4 v = vec4(0.0);
        for (uint i = 0u; i < min(S, 16u); i++) v += buf[(i * MAX_ROWS + m) * G + g];
        if (rows_b) {
            for (uint l = 0u; l < 4u && n + l < N; l++) store_out(layer, c4i, m, n + l, vec4(v[l], 0.0, 0.0, 0.0));
        } else {
            store_out(layer, c4i, m, n, vec4(v.x, 0.0, 0.0, 0.0));
        }
    }
}
