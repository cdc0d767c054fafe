// The KV-cached forward for a few query rows (inference decode, T <= CU_ATT_DECODE_T), flash-decoding style, in
// fp32 on CUDA cores (a decode step reads each cached key once: memory-bound, no product big enough for tensor
// cores): the keys of each (b, t, h) are split across `splits` blocks (a function of the shape only, so that a
// small batch still fills the GPU), each block's 4 warps take every 4th key of its split with an online softmax
// (per warp: running max m, sum l, output o over the head dims), combined over the warps in warp order; a second
// kernel combines the splits in split order (out = sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) l_c). No atomics:
// the same bits on every run. q/out [B,T,H,D], kc/vc [B,S,KH,D] (query t sees keys 0..p0+t). Head dims up to 256.
#include "cu_kern.cuh"
#include "cu_index.h"
#include "cu_attention_tc.h"
#include <math.h>

enum { DW = 4, DTHREADS = 32 * DW, DEC_MIN_KEYS = 64 };

typedef struct {
    const float *q, *k, *v;
    float *part;   // [B,T,H][splits][D + 2]: m, l, o[D] of each split
    float *out;
    int64_t B, T, p0, S, H, KH, D, splits, len;   // len: keys per split
    float scale;
} dec_args;

// grid (splits, H, B*T); DCH head-dim chunks of 32 per lane (D <= 32 DCH)
template <int DCH> __global__ void __launch_bounds__(DTHREADS) att_decode_kernel(dec_args a) {
    __shared__ float wm[DW], wl[DW], wo[DW][32 * DCH];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t b = blockIdx.z / a.T, t = blockIdx.z % a.T, h = blockIdx.y, c = blockIdx.x;
    const int64_t g = cu_att_kv_head(h, a.H, a.KH), kend = a.p0 + t + 1;
    const int64_t s0 = c * a.len, s1 = s0 + a.len < kend ? s0 + a.len : kend;
    float q[DCH], o[DCH], m = -INFINITY, l = 0.0f;
    const float *qr = a.q + cu_att_row(b, t, h, a.T, a.H, a.D);
#pragma unroll
    for (int i = 0; i < DCH; i++) {
        int64_t d = lane + 32 * i;
        q[i] = d < a.D ? qr[d] : 0.0f;
        o[i] = 0.0f;
    }
    for (int64_t s = s0 + warp; s < s1; s += DW) {
        const float *kr = a.k + cu_att_row(b, s, g, a.S, a.KH, a.D), *vr = a.v + cu_att_row(b, s, g, a.S, a.KH, a.D);
        float x = 0.0f;
#pragma unroll
        for (int i = 0; i < DCH; i++) {
            int64_t d = lane + 32 * i;
            if (d < a.D) x += q[i] * kr[d];
        }
        x = cu_warp_allsum(x) * a.scale;
        float mnew = fmaxf(m, x), alpha = expf(m - mnew), p = expf(x - mnew);
        l = l * alpha + p;
#pragma unroll
        for (int i = 0; i < DCH; i++) {
            int64_t d = lane + 32 * i;
            o[i] = o[i] * alpha + (d < a.D ? p * vr[d] : 0.0f);
        }
        m = mnew;
    }
    if (lane == 0) wm[warp] = m, wl[warp] = l;
#pragma unroll
    for (int i = 0; i < DCH; i++) wo[warp][lane + 32 * i] = o[i];
    __syncthreads();
    if (warp) return;
    float M = -INFINITY, L = 0.0f;
    for (int w = 0; w < DW; w++) M = fmaxf(M, wm[w]);
    float *dst = a.part + ((b * a.T + t) * a.H + h) * a.splits * (a.D + 2) + c * (a.D + 2);
    float e[DW];
    for (int w = 0; w < DW; w++) {
        e[w] = wm[w] == -INFINITY ? 0.0f : expf(wm[w] - M);
        L += e[w] * wl[w];
    }
#pragma unroll
    for (int i = 0; i < DCH; i++) {
        int64_t d = lane + 32 * i;
        float s = 0.0f;
        for (int w = 0; w < DW; w++) s += e[w] * wo[w][d];
        if (d < a.D) dst[2 + d] = s;
    }
    if (lane == 0) dst[0] = M, dst[1] = L;
}

// one warp per row (b, t, h): the splits in order
__global__ void att_decode_combine_kernel(dec_args a) {
    const int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * DW + (threadIdx.x >> 5);   // (b * T + t) * H + h
    if (row >= a.B * a.T * a.H) return;
    const float *p = a.part + row * a.splits * (a.D + 2);
    float M = -INFINITY, L = 0.0f;
    for (int64_t c = 0; c < a.splits; c++) M = fmaxf(M, p[c * (a.D + 2)]);
    for (int64_t c = 0; c < a.splits; c++) {
        float mc = p[c * (a.D + 2)];
        if (mc != -INFINITY) L += expf(mc - M) * p[c * (a.D + 2) + 1];
    }
    float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int64_t d = lane; d < a.D; d += 32) {
        float s = 0.0f;
        for (int64_t c = 0; c < a.splits; c++) {
            float mc = p[c * (a.D + 2)];
            if (mc != -INFINITY) s += expf(mc - M) * p[c * (a.D + 2) + 2 + d];
        }
        a.out[row * a.D + d] = s * inv;   // out [B,T,H,D]: row (b, t, h)
    }
}

int cu_att_decode_splits(int64_t B, int64_t T, int64_t p0, int64_t H) {
    int64_t K = p0 + T, most = (K + DEC_MIN_KEYS - 1) / DEC_MIN_KEYS, want = (2 * 132 + B * T * H - 1) / (B * T * H);
    int64_t s = want < most ? want : most;   // about two blocks per SM of an H100, at least 64 keys each
    return (int)(s < 1 ? 1 : s > 64 ? 64 : s);
}

template <int DCH> static void launch(dim3 grid, const dec_args &a) {
    void (*kernel)(dec_args) = att_decode_kernel<DCH>;
    kernel<<<grid, DTHREADS, 0, cu_stream()>>>(a);
    CU_LAUNCHED("att_decode_kernel");
}

void cu_att_decode_fwd(float *out, const float *q, const float *kc, const float *vc, int64_t B, int64_t T, int64_t p0,
                       int64_t S, int64_t H, int64_t KH, int64_t D) {
    dec_args a = {};
    a.q = q, a.k = kc, a.v = vc, a.out = out;
    a.B = B, a.T = T, a.p0 = p0, a.S = S, a.H = H, a.KH = KH, a.D = D;
    a.splits = cu_att_decode_splits(B, T, p0, H);
    a.len = (p0 + T + a.splits - 1) / a.splits;
    a.scale = 1.0f / sqrtf((float)D);
    a.part = (float *)cu_scratch((int64_t)sizeof(float) * B * T * H * a.splits * (D + 2), "decode attention partials");
    dim3 grid((unsigned)a.splits, (unsigned)H, (unsigned)(B * T));
    if (D <= 32) launch<1>(grid, a);
    else if (D <= 64) launch<2>(grid, a);
    else if (D <= 128) launch<4>(grid, a);
    else launch<8>(grid, a);
    att_decode_combine_kernel<<<cu_blocks(B * T * H, DW), DTHREADS, 0, cu_stream()>>>(a);
    CU_LAUNCHED("att_decode_combine_kernel");
    cu_scratch_free(a.part);
}
