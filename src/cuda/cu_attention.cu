// Scaled dot-product attention with grouped KV heads, fused and memory-O(T) (CPU: kernels/attention.c), in fp32:
// no T x T matrix is written to device memory. q/out [B,T,H,D], k/v [B,T,KH,D], keymask [B,T] (1 = key may be
// seen; NULL = all), seg [B,T] (a query sees only keys of its own segment; NULL = one segment), causal.
//  - forward: a block takes CU_ATT_BQ query rows of one (b, h) (4 warps, 8 rows each) and walks the keys in tiles
//    of CU_ATT_BK staged in shared memory: scores by lanes over keys, an online softmax (running maximum m and sum
//    l per row), then O += P V by lanes over the head dim. It saves stats[b,h,t] = m + log l (the log-sum-exp of
//    the row's allowed scores; -inf for a row with no allowed key, whose output is 0 as on the CPU).
//  - backward: two kernels recompute P = exp(S - lse) tile by tile, with Drow = dO . O per row:
//    dK/dV: a block owns CU_ATT_BK keys of one (b, query head h) and walks every query row of h (dV_h = P^T dO,
//    dK_h = dS^T Q, dS = P * (dO V^T - Drow)) into registers, then writes them to per-head partials [B,T,H,D]
//    (scratch); a second kernel adds each kv head's H/KH partials in head order to dk/dv (times scale for dk):
//    each row is written by one thread, in one fixed order, so no atomics;
//    dQ: a block owns CU_ATT_BQ query rows and walks the keys (dQ += scale dS K).
//  - the KV-cached forward (inference) is the forward kernel over the cache [B,S,KH,D] with keys 0..p0+t for query
//    t, no stats.
// Head dims up to 256 (registers hold D/32 values per row, D rounded up to 32, 64, 128 or 256).
// Tolerance against the CPU (the softmax of the whole row then sgemm): the same sums in another order and
// rescaled online, libdevice's expf against k_expf: out within about 2e-6 * max |v| (relative 1e-5 on ordinary
// data); dq/dk/dv within about 1e-5 relative to their largest entry (Drow = dO . O instead of the CPU's
// rowsum(P * dP) adds fp32 reassociation of the same size).
// The index arithmetic (rows, heads, masks, the tiles a block walks) is cu_index.h, tested on the CPU.
#include "cu_kern.cuh"
#include "cu_index.h"
#include "cu_ops.h"
#include "cu_attention_tc.h"
#include <math.h>
extern "C" {
}
#include <stdio.h>
#include <stdlib.h>

enum { BQ = CU_ATT_BQ, BK = CU_ATT_BK, WARPS = CU_ATT_WARPS, THREADS = 32 * CU_ATT_WARPS, RPW = BQ / WARPS };
static_assert(BK == 32, "a warp's lanes are the keys of a tile");
static_assert(BQ % WARPS == 0 && BK % WARPS == 0, "rows and keys split evenly over the warps");

typedef struct {
    const float *q, *k, *v, *out, *dout;   // q/out/dout [B,Tq,H,D]; k/v [B,S,KH,D]
    const uint8_t *km;                     // [B,S] or NULL
    const int32_t *seg;                    // [B,S] or NULL (training only: Tq == Tk == S)
    float *o, *lse;                        // forward outputs (lse may be NULL)
    const float *stats;                    // backward: the forward's lse
    float *dq, *dk, *dv;                   // backward outputs (accumulated; NULL: not computed)
    int acc;                               // 1: dq/dk/dv accumulate; 0: overwritten (not read)
    float *pdk, *pdv;                      // backward: per-query-head partials of dk, dv [B,Tk,H,D] (or NULL)
    int64_t B, Tq, Tk, S, H, KH, D, off;   // Tk keys in use of S per batch row; query t sits at position t + off
    int causal;
    float scale;
} att_args;

// butterfly reductions: every lane ends with the same bits
__device__ static inline float lanes_sum(float x) { return cu_warp_allsum(x); }
__device__ static inline float lanes_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ static inline float dot(const float *a, const float *b, int64_t D) {
    float s = 0.0f;
    for (int64_t d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

// rows [t0, t0+BQ) of a [B,T,heads,D] tensor (head hd of batch row b) -> dst[BQ][D]; rows past T are zero
__device__ static void load_rows(float *dst, const float *src, int64_t b, int64_t t0, int64_t hd, int64_t T,
                                 int64_t heads, int64_t D, int64_t stride) {
    const int D32 = (int)D;   // 32-bit index arithmetic: BQ * D is small
    for (int e = threadIdx.x; e < BQ * D32; e += THREADS) {
        int r = e / D32, d = e % D32;
        int64_t t = t0 + r;
        dst[r * stride + d] = t < T ? src[cu_att_row(b, t, hd, T, heads, D) + d] : 0.0f;
    }
}

// keys [s0, s0+BK) of k or v [B,S,KH,D] (kv head g) -> dst[BK][D+1]; keys at or past Tk are zero
__device__ static void load_keys(float *dst, const float *src, const att_args &a, int64_t b, int64_t s0, int64_t g) {
    const int D32 = (int)a.D;   // 32-bit index arithmetic: BK * D is small
    for (int e = threadIdx.x; e < BK * D32; e += THREADS) {
        int j = e / D32, d = e % D32;
        int64_t s = s0 + j;
        dst[j * (D32 + 1) + d] = s < a.Tk ? src[cu_att_row(b, s, g, a.S, a.KH, a.D) + d] : 0.0f;
    }
}

// may query t see key s of batch row b (t < Tq, s < Tk checked here)?
__device__ static inline bool allowed(const att_args &a, int64_t b, int64_t t, int64_t s) {
    if (t >= a.Tq || s >= a.Tk) return false;
    return cu_att_allowed(t, s, a.off, a.causal, a.km ? a.km + b * a.S : NULL, a.seg ? a.seg + b * a.S : NULL);
}

// Drow = dout[t] . out[t] for row t of head h (every lane gets it; 0 past Tq)
__device__ static inline float row_dot(const att_args &a, int64_t b, int64_t t, int64_t h) {
    if (t >= a.Tq) return 0.0f;
    int64_t base = cu_att_row(b, t, h, a.Tq, a.H, a.D);
    float s = 0.0f;
    for (int64_t d = threadIdx.x & 31; d < a.D; d += 32) s += a.dout[base + d] * a.out[base + d];
    return lanes_sum(s);
}

// shared memory of each kernel, in floats
static int64_t fwd_floats(int64_t D) { return BQ * D + 2 * BK * (D + 1) + BQ * (BK + 1); }
static int64_t dq_floats(int64_t D) { return 2 * BQ * D + 2 * BK * (D + 1) + BQ * (BK + 1); }
static int64_t dkv_floats(int64_t D) { return 2 * BQ * D + 2 * BK * (D + 1) + 2 * BQ * (BK + 1); }

// acc[i][c] += sum_j W[r][j] X[j][d] for the warp's rows r = warp + WARPS i and the lane's head dims d = lane + 32 c
// (W [BQ][BK+1] the tile's probabilities or dS, X [BK][D+1] its values or keys)
template <int DCH> __device__ static inline void rows_times_keys(float (&acc)[RPW][DCH], const float *W, const float *X,
                                                                 int64_t D) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        int r = warp + WARPS * i;
        for (int j = 0; j < BK; j++) {
            float w = W[r * (BK + 1) + j];
#pragma unroll
            for (int c = 0; c < DCH; c++) {
                int64_t d = lane + 32 * c;
                if (d < D) acc[i][c] += w * X[j * (D + 1) + d];
            }
        }
    }
}

// dst[d] = acc[c] for the lane's head dims d = lane + 32 c of one row
template <int DCH> __device__ static inline void put_row(float *dst, const float (&acc)[DCH], int64_t D) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int c = 0; c < DCH; c++) {
        int64_t d = lane + 32 * c;
        if (d < D) dst[d] = acc[c];
    }
}

// dst[d] += scale * acc[c] for the lane's head dims d = lane + 32 c of one row (keep 0: dst[d] = 0 + that)
template <int DCH>
__device__ static inline void add_row(float *dst, const float (&acc)[DCH], float scale, int64_t D, int keep) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int c = 0; c < DCH; c++) {
        int64_t d = lane + 32 * c;
        if (d < D) dst[d] = (keep ? dst[d] : 0.0f) + scale * acc[c];
    }
}

// grid (query tiles, H, B); DCH = head-dim chunks of 32 held per row in registers (D <= 32 * DCH)
template <int DCH> __global__ void __launch_bounds__(THREADS) attention_fwd_kernel(att_args a) {
    CU_DYNAMIC_SHARED(float, sm);
    const int64_t D = a.D, b = blockIdx.z, h = blockIdx.y, g = cu_att_kv_head(h, a.H, a.KH);
    const int64_t t0 = (int64_t)blockIdx.x * BQ;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float *Qs = sm, *Ks = Qs + BQ * D, *Vs = Ks + BK * (D + 1), *Ps = Vs + BK * (D + 1);
    float o[RPW][DCH], m[RPW], l[RPW];
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < DCH; c++) o[i][c] = 0.0f;
    }
    load_rows(Qs, a.q, b, t0, h, a.Tq, a.H, D, D);
    int64_t kend = cu_att_key_end(t0, a.Tq - t0 < BQ ? a.Tq - t0 : (int64_t)BQ, a.off, a.causal, a.Tk);
    for (int64_t s0 = 0; s0 < kend; s0 += BK) {
        __syncthreads();   // the previous tile is no longer read (and Qs is written, the first time)
        load_keys(Ks, a.k, a, b, s0, g);
        load_keys(Vs, a.v, a, b, s0, g);
        __syncthreads();
        float alpha[RPW];
#pragma unroll
        for (int i = 0; i < RPW; i++) {   // scores and the online softmax: lane = key s0 + lane
            int r = warp + WARPS * i;
            int64_t t = t0 + r, s = s0 + lane;
            bool ok = allowed(a, b, t, s);
            float x = ok ? a.scale * dot(Qs + r * D, Ks + lane * (D + 1), D) : -INFINITY;
            float mnew = fmaxf(m[i], lanes_max(x));
            float p = ok && mnew != -INFINITY ? expf(x - mnew) : 0.0f;
            alpha[i] = mnew != -INFINITY ? expf(m[i] - mnew) : 1.0f;
            l[i] = l[i] * alpha[i] + lanes_sum(p);
            m[i] = mnew;
            Ps[r * (BK + 1) + lane] = p;
        }
        __syncwarp();
#pragma unroll
        for (int i = 0; i < RPW; i++)   // O = alpha O + P V: lane = head dims lane + 32 c
#pragma unroll
            for (int c = 0; c < DCH; c++) o[i][c] *= alpha[i];
        rows_times_keys<DCH>(o, Ps, Vs, D);
    }
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        int64_t t = t0 + warp + WARPS * i;
        if (t >= a.Tq) continue;
        bool any = m[i] != -INFINITY;   // a row with no allowed key: zero output, lse -inf
        float inv = any ? 1.0f / l[i] : 0.0f;
        int64_t base = cu_att_row(b, t, h, a.Tq, a.H, D);
#pragma unroll
        for (int c = 0; c < DCH; c++) {
            int64_t d = lane + 32 * c;
            if (d < D) a.o[base + d] = o[i][c] * inv;
        }
        if (a.lse && lane == 0) a.lse[cu_att_stat(b, h, t, a.H, a.Tq)] = any ? m[i] + logf(l[i]) : -INFINITY;
    }
}

// P and dS of query row r (t) against key lane (s) of the staged tiles; lse -inf: a row with no allowed key
__device__ static inline void p_ds(const att_args &a, int64_t b, int64_t t, int64_t s, const float *q,
                                   const float *dO, const float *k, const float *v, float lse, float drow, float *p,
                                   float *ds) {
    *p = 0.0f;
    *ds = 0.0f;
    if (!allowed(a, b, t, s) || lse == -INFINITY) return;
    *p = expf(a.scale * dot(q, k, a.D) - lse);
    *ds = *p * (dot(dO, v, a.D) - drow);
}

// grid (query tiles, H, B): dq[t] += scale sum_s dS[t,s] k[s]
template <int DCH> __global__ void __launch_bounds__(THREADS) attention_dq_kernel(att_args a) {
    CU_DYNAMIC_SHARED(float, sm);
    const int64_t D = a.D, b = blockIdx.z, h = blockIdx.y, g = cu_att_kv_head(h, a.H, a.KH);
    const int64_t t0 = (int64_t)blockIdx.x * BQ;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float *Qs = sm, *dOs = Qs + BQ * D, *Ks = dOs + BQ * D, *Vs = Ks + BK * (D + 1), *dSs = Vs + BK * (D + 1);
    float acc[RPW][DCH], lse[RPW], drow[RPW];
    load_rows(Qs, a.q, b, t0, h, a.Tq, a.H, D, D);
    load_rows(dOs, a.dout, b, t0, h, a.Tq, a.H, D, D);
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        int64_t t = t0 + warp + WARPS * i;
        lse[i] = t < a.Tq ? a.stats[cu_att_stat(b, h, t, a.H, a.Tq)] : -INFINITY;
        drow[i] = row_dot(a, b, t, h);
#pragma unroll
        for (int c = 0; c < DCH; c++) acc[i][c] = 0.0f;
    }
    int64_t kend = cu_att_key_end(t0, a.Tq - t0 < BQ ? a.Tq - t0 : (int64_t)BQ, a.off, a.causal, a.Tk);
    for (int64_t s0 = 0; s0 < kend; s0 += BK) {
        __syncthreads();
        load_keys(Ks, a.k, a, b, s0, g);
        load_keys(Vs, a.v, a, b, s0, g);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < RPW; i++) {   // lane = key
            int r = warp + WARPS * i;
            float p, ds;
            p_ds(a, b, t0 + r, s0 + lane, Qs + r * D, dOs + r * D, Ks + lane * (D + 1), Vs + lane * (D + 1), lse[i],
                 drow[i], &p, &ds);
            dSs[r * (BK + 1) + lane] = ds;
        }
        __syncwarp();
        rows_times_keys<DCH>(acc, dSs, Ks, D);   // lane = head dims
    }
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        int64_t t = t0 + warp + WARPS * i;
        if (t >= a.Tq) continue;
        add_row<DCH>(a.dq + cu_att_row(b, t, h, a.Tq, a.H, D), acc[i], a.scale, D, a.acc);
    }
}

// grid (key tiles, H, B): for the block's keys s, over every query row t of query head h (kv head g):
// pdv[s,h] = sum_t P[t,s] dO[t];  pdk[s,h] = sum_t dS[t,s] q[t]. Thread: keys warp + WARPS i, dims lane + 32 c
template <int DCH> __global__ void __launch_bounds__(THREADS) attention_dkv_kernel(att_args a) {
    CU_DYNAMIC_SHARED(float, sm);
    const int64_t D = a.D, b = blockIdx.z, h = blockIdx.y, g = cu_att_kv_head(h, a.H, a.KH);
    const int64_t s0 = (int64_t)blockIdx.x * BK;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float *Ks = sm, *Vs = Ks + BK * (D + 1), *Qs = Vs + BK * (D + 1), *dOs = Qs + BQ * D, *Ps = dOs + BQ * D;
    float *dSs = Ps + BQ * (BK + 1);
    float dk[BK / WARPS][DCH], dv[BK / WARPS][DCH];
#pragma unroll
    for (int i = 0; i < BK / WARPS; i++)
#pragma unroll
        for (int c = 0; c < DCH; c++) dk[i][c] = dv[i][c] = 0.0f;
    load_keys(Ks, a.k, a, b, s0, g);
    load_keys(Vs, a.v, a, b, s0, g);
    for (int64_t t0 = cu_att_query_begin(s0, a.off, a.causal); t0 < a.Tq; t0 += BQ) {
        __syncthreads();   // the previous rows are no longer read
        load_rows(Qs, a.q, b, t0, h, a.Tq, a.H, D, D);
        load_rows(dOs, a.dout, b, t0, h, a.Tq, a.H, D, D);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < RPW; i++) {   // lane = key, warp's rows
            int r = warp + WARPS * i;
            int64_t t = t0 + r;
            float lse = t < a.Tq ? a.stats[cu_att_stat(b, h, t, a.H, a.Tq)] : -INFINITY, p, ds;
            p_ds(a, b, t, s0 + lane, Qs + r * D, dOs + r * D, Ks + lane * (D + 1), Vs + lane * (D + 1), lse,
                 row_dot(a, b, t, h), &p, &ds);
            Ps[r * (BK + 1) + lane] = p;
            dSs[r * (BK + 1) + lane] = ds;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < BK / WARPS; i++) {   // thread: key warp + WARPS i, head dims lane + 32 c
            int j = warp + WARPS * i;
            for (int r = 0; r < BQ; r++) {
                float p = Ps[r * (BK + 1) + j], ds = dSs[r * (BK + 1) + j];
#pragma unroll
                for (int c = 0; c < DCH; c++) {
                    int64_t d = lane + 32 * c;
                    if (d < D) {
                        dv[i][c] += p * dOs[r * D + d];
                        dk[i][c] += ds * Qs[r * D + d];
                    }
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < BK / WARPS; i++) {
        int64_t s = s0 + warp + WARPS * i;
        if (s >= a.Tk) continue;
        int64_t base = cu_att_row(b, s, h, a.Tk, a.H, D);
        if (a.pdk) put_row<DCH>(a.pdk + base, dk[i], D);
        if (a.pdv) put_row<DCH>(a.pdv + base, dv[i], D);
    }
}

// dk[b,s,g] += scale * sum_r pdk[b,s,g*R+r] and dv[b,s,g] += sum_r pdv[b,s,g*R+r], heads in order; one thread per
// element e of dk/dv [B,Tk,KH,D] (training: S == Tk); acc 0: dk/dv = 0 + the sums (not read)
__global__ void attention_dkv_sum_kernel(att_args a) {
    int64_t R = a.H / a.KH;
    CU_FOR(e, a.B * a.Tk * a.KH * a.D) {
        int64_t d = e % a.D, g = e / a.D % a.KH, bs = e / (a.D * a.KH);   // bs = b * Tk + s
        float sk = 0.0f, sv = 0.0f;
        for (int64_t r = 0; r < R; r++) {
            int64_t p = (bs * a.H + g * R + r) * a.D + d;
            if (a.pdk) sk += a.pdk[p];
            if (a.pdv) sv += a.pdv[p];
        }
        if (a.dk) a.dk[e] = (a.acc ? a.dk[e] : 0.0f) + a.scale * sk;
        if (a.dv) a.dv[e] = (a.acc ? a.dv[e] : 0.0f) + sv;
    }
}

// ---- host side ----

int64_t cu_attention_stats_floats(int64_t B, int64_t T, int64_t H) { return B * H * T; }

// the registers' head-dim chunks for D (32 * DCH >= D), or 0 when D is above what the kernels hold
static int dim_chunks(int64_t D) { return D <= 32 ? 1 : D <= 64 ? 2 : D <= 128 ? 4 : D <= 256 ? 8 : 0; }

static void check_shape(const char *op, int64_t H, int64_t KH, int64_t D) {
    if (dim_chunks(D) && H % KH == 0) return;
    fprintf(stderr, "CUDA backend: %s: head dim %lld with %lld query heads over %lld kv heads is not supported (head dim "
            "1..256, query heads a multiple of kv heads)\n", op, (long long)D, (long long)H, (long long)KH);
    exit(1);
}

// launches kernel<DCH> for a.D on grid with `floats` of dynamic shared memory (above 48 KB: raised per kernel)
// (what: "launch of <kernel>", the message of a failed launch)
static void launch_one(void (*kernel)(att_args), dim3 grid, int64_t floats, const att_args &a, const char *what) {
    size_t bytes = sizeof(float) * (size_t)floats;
    if (bytes > 48 * 1024) CU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    kernel<<<grid, THREADS, bytes, cu_stream()>>>(a);
    cu_check(cudaGetLastError(), what);
}

enum { K_FWD, K_DQ, K_DKV };
template <int DCH> static void launch_dch(int which, dim3 grid, const att_args &a) {
    if (which == K_FWD) launch_one(attention_fwd_kernel<DCH>, grid, fwd_floats(a.D), a, "launch of attention_fwd_kernel");
    if (which == K_DQ) launch_one(attention_dq_kernel<DCH>, grid, dq_floats(a.D), a, "launch of attention_dq_kernel");
    if (which == K_DKV) launch_one(attention_dkv_kernel<DCH>, grid, dkv_floats(a.D), a, "launch of attention_dkv_kernel");
}

static void launch(int which, const att_args &a) {
    dim3 grid = which == K_DKV ? dim3(cu_blocks(a.Tk, BK), (unsigned)a.H, (unsigned)a.B)
                               : dim3(cu_blocks(a.Tq, BQ), (unsigned)a.H, (unsigned)a.B);
    switch (dim_chunks(a.D)) {
    case 1: launch_dch<1>(which, grid, a); break;
    case 2: launch_dch<2>(which, grid, a); break;
    case 4: launch_dch<4>(which, grid, a); break;
    default: launch_dch<8>(which, grid, a); break;
    }
}

static att_args args(const float *q, const float *k, const float *v, int64_t B, int64_t Tq, int64_t Tk, int64_t S,
                     int64_t H, int64_t KH, int64_t D, int64_t off, int causal) {
    att_args a = {};
    a.q = q, a.k = k, a.v = v;
    a.B = B, a.Tq = Tq, a.Tk = Tk, a.S = S, a.H = H, a.KH = KH, a.D = D, a.off = off, a.causal = causal;
    a.scale = D > 0 ? 1.0f / sqrtf((float)D) : 1.0f;
    return a;
}

void cu_att_sum_heads(float *dk, float *dv, const float *pdk, const float *pdv, int64_t B, int64_t T, int64_t H,
                      int64_t KH, int64_t D, float scale, int acc) {
    att_args a = args(NULL, NULL, NULL, B, T, T, T, H, KH, D, 0, 0);
    a.dk = dk, a.dv = dv, a.pdk = (float *)pdk, a.pdv = (float *)pdv, a.scale = scale, a.acc = acc;
    attention_dkv_sum_kernel<<<cu_grid(B * T * KH * D), CU_THREADS, 0, cu_stream()>>>(a);
    CU_LAUNCHED("attention_dkv_sum_kernel");
}

// the tensor cores take attention under bf16 mixed precision (--torch_dtype bfloat16: their inputs are rounded to
// bf16, as the products' are) for the head dims they are built for; fp32 keeps the fp32 kernels above
static int g_bf16;   // the backend's precision (os_cuda_open: cu_attention_set_bf16)
void cu_attention_set_bf16(int bf16) { g_bf16 = bf16; }
static int tensor_cores(int64_t D) { return g_bf16 && cu_att_tc_dim(D); }

void cu_attention_fwd(float *out, float *stats, const float *q, const float *k, const float *v, const uint8_t *keymask,
                      const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D) {
    if (B <= 0 || T <= 0 || H <= 0 || KH <= 0) return;
    check_shape("attention_fwd", H, KH, D);
    if (tensor_cores(D)) return cu_att_tc_fwd(out, stats, q, k, v, keymask, seg, causal, B, T, T, T, 0, H, KH, D);
    att_args a = args(q, k, v, B, T, T, T, H, KH, D, 0, causal);
    a.km = keymask, a.seg = seg, a.o = out, a.lse = stats;
    launch(K_FWD, a);
}

void cu_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                      const float *v, const float *out, const float *stats, const uint8_t *keymask,
                      const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D,
                      int acc) {
    if (B <= 0 || T <= 0 || H <= 0 || KH <= 0 || D <= 0) return;
    check_shape("attention_bwd", H, KH, D);
    if (tensor_cores(D))
        return cu_att_tc_bwd(dq, dk, dv, dout, q, k, v, out, stats, keymask, seg, causal, B, T, H, KH, D, acc);
    att_args a = args(q, k, v, B, T, T, T, H, KH, D, 0, causal);
    a.km = keymask, a.seg = seg, a.out = out, a.dout = dout, a.stats = stats, a.dq = dq, a.dk = dk, a.dv = dv;
    a.acc = acc;
    if (dk || dv) {   // per-head partials, then their sum per kv head
        int64_t n = B * T * H * D;
        float *part = (float *)cu_scratch((int64_t)sizeof(float) * n * ((dk != NULL) + (dv != NULL)),
                                          "attention backward dk/dv per query head");
        a.pdk = dk ? part : NULL;
        a.pdv = dv ? part + (dk ? n : 0) : NULL;
        launch(K_DKV, a);
        cu_att_sum_heads(dk, dv, a.pdk, a.pdv, B, T, H, KH, D, a.scale, acc);
        cu_scratch_free(part);
    }
    if (dq) launch(K_DQ, a);
}

void cu_attention_cached_fwd(float *out, const float *q, const float *kc, const float *vc, int64_t B, int64_t T,
                             int64_t p0, int64_t S, int64_t H, int64_t KH, int64_t D) {
    if (B <= 0 || T <= 0 || H <= 0 || KH <= 0) return;
    check_shape("attention_cached_fwd", H, KH, D);
    if (T <= CU_ATT_DECODE_T) return cu_att_decode_fwd(out, q, kc, vc, B, T, p0, S, H, KH, D);
    if (tensor_cores(D)) return cu_att_tc_fwd(out, NULL, q, kc, vc, NULL, NULL, 1, B, T, p0 + T, S, p0, H, KH, D);
    att_args a = args(q, kc, vc, B, T, p0 + T, S, H, KH, D, p0, 1);
    a.o = out;
    launch(K_FWD, a);
}
