#version 450
// One ONNX LSTM time step (forward, layout 0, gates i,o,f,c; sigmoid/tanh/tanh; no peepholes):
//   g = X[t] W^T + H[t-1] R^T + (Wb + Rb),  i,o,f = sigmoid, c~ = tanh,
//   C[t] = f * C[t-1] + i * c~,  H[t] = o * tanh(C[t]).
// The wrapper records one dispatch per step; H[t-1] is read back from Y (or initial_h at t = 0),
// C[t-1] from Y_c (or initial_c), so the state never leaves the output images.
// Layouts (vk_backend::layout rank rule): X [T,B,I] -> C=T, H=B, W=I (t in the RGBA lanes);
// Y [T,1,B,H] -> N=T, C=1, H=B, W=H; initial_h/c, Y_h, Y_c [1,B,H] -> C=1, H=B, W=H (lane 0).
// W, R: [K, 4H] matrices packed by layout::pack_matrix_kn (texel (k/4)*4H + n, column
// n = gate*H + h); bias: [4H] packed by layout::pack_vector.
// Workgroup: 32 hidden units (x) x 8 slices of the reduction (y); the slices meet in shared memory.
#include "tensor.glsl"
#include "weights.glsl"

#define HX 32u
#define KS 8u

layout(local_size_x = 32, local_size_y = 8) in;

TENSOR_IN(0, img_x);
TENSOR_IN(1, img_h0);     // initial_h (any tensor when flag bit 0 is clear: never read)
TENSOR_IN(2, img_c0);     // initial_c (any tensor when flag bit 1 is clear: never read)
TENSOR_INOUT(3, img_y);   // H history: H[t] written, H[t-1] read
TENSOR_INOUT(4, img_yc);  // cell state, read and written by the same invocation
TENSOR_OUT(5, img_yh);

layout(push_constant) uniform Push {
    TensorDesc x;
    TensorDesc y;
    // Physical width/height of the [1,B,H] state tensors (each may be a view over a larger image,
    // so each keeps its own fold); their logical dims are n = c = 1, h = B, w = H.
    uint h0_pw, h0_ph, c0_pw, c0_ph, yh_pw, yh_ph, yc_pw, yc_ph;
    uint w_off;
    uint r_off;
    uint b_off;
    uint t;
    uint flags;  // 1: initial_h, 2: initial_c, 4: bias
    uint _pad0;
    uint _pad1;
    uint _pad2;
} pc;

// Descriptor of a [1,B,H] state tensor with fold (pw, ph); fold_coord never reads pl.
TensorDesc state_desc(uint pw, uint ph) { return TensorDesc(1u, 1u, pc.y.h, pc.y.w, 1u, pw, ph, 1u); }

shared vec4 part[KS][HX];

float sigm(float v) { return 1.0 / (1.0 + exp(-v)); }

// tanh without the exp overflow of the naive formula.
float tanh_safe(float v) {
    float e = exp(-2.0 * abs(v));
    return sign(v) * (1.0 - e) / (1.0 + e);
}

// H[t-1][b, j] for j = 4*j4 .. 4*j4+3 (zero beyond H).
vec4 h_prev(uint b, uint j4, uint H) {
    vec4 v = vec4(0.0);
    for (uint l = 0u; l < 4u; l++) {
        uint j = 4u * j4 + l;
        if (j >= H) break;
        if (pc.t == 0u) {
            TensorDesc s = state_desc(pc.h0_pw, pc.h0_ph);
            v[l] = LOAD_TEXEL(img_h0, s, texel_index(s, 0u, b, j)).x;
        } else {
            v[l] = LOAD_TEXEL(img_y, pc.y, texel_index(pc.y, pc.t - 1u, b, j)).x;
        }
    }
    return v;
}

void main() {
    uint hl = gl_LocalInvocationID.x, ks = gl_LocalInvocationID.y;
    uint h = gl_WorkGroupID.x * HX + hl;
    uint b = gl_WorkGroupID.y;
    uint H = pc.y.w, I = pc.x.w;
    uint N = 4u * H;
    uint kx4 = (I + 3u) / 4u, kh4 = (H + 3u) / 4u;
    bool use_h = pc.t > 0u || (pc.flags & 1u) != 0u;
    uint total = use_h ? kx4 + kh4 : kx4;

    // acc = pre-activations of gates (i, o, f, c) for hidden unit h.
    vec4 acc = vec4(0.0);
    if (h < H) {
        for (uint kk = ks; kk < total; kk += KS) {
            vec4 v;
            uint base;
            if (kk < kx4) {
                v = vec4(0.0);
                for (uint l = 0u; l < 4u; l++) {
                    uint i = 4u * kk + l;
                    if (i < I) v[l] = LOAD_ELEMENT(img_x, pc.x, 0u, pc.t, b, i);
                }
                base = pc.w_off + kk * N + h;
            } else {
                v = h_prev(b, kk - kx4, H);
                base = pc.r_off + (kk - kx4) * N + h;
            }
            acc.x += dot(v, fetch_weight(base));
            acc.y += dot(v, fetch_weight(base + H));
            acc.z += dot(v, fetch_weight(base + 2u * H));
            acc.w += dot(v, fetch_weight(base + 3u * H));
        }
    }
    part[ks][hl] = acc;
    barrier();
    if (ks != 0u || h >= H) return;
    for (uint k = 1u; k < KS; k++) acc += part[k][hl];
    if ((pc.flags & 4u) != 0u) {
        for (uint g = 0u; g < 4u; g++) {
            uint n = g * H + h;
            acc[g] += fetch_weight(pc.b_off + n / 4u)[n % 4u];
        }
    }
    float ig = sigm(acc.x), og = sigm(acc.y), fg = sigm(acc.z), cg = tanh_safe(acc.w);
    // Every state tensor has the same logical dims, so one linear index serves them all.
    uint si = b * H + h;
    float c_prev = 0.0;
    if (pc.t > 0u) {
        c_prev = LOAD_TEXEL(img_yc, state_desc(pc.yc_pw, pc.yc_ph), si).x;
    } else if ((pc.flags & 2u) != 0u) {
        c_prev = LOAD_TEXEL(img_c0, state_desc(pc.c0_pw, pc.c0_ph), si).x;
    }
    float c = fg * c_prev + ig * cg;
    float hv = og * tanh_safe(c);
    STORE_TEXEL(img_yc, state_desc(pc.yc_pw, pc.yc_ph), si, vec4(c, 0.0, 0.0, 0.0));
    STORE_TEXEL(img_yh, state_desc(pc.yh_pw, pc.yh_ph), si, vec4(hv, 0.0, 0.0, 0.0));
    STORE_TEXEL(img_y, pc.y, texel_index(pc.y, pc.t, b, h), vec4(hv, 0.0, 0.0, 0.0));
}
