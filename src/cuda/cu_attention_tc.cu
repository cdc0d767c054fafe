// Attention on tensor cores (bf16 mma.sync m16n8k16, fp32 accumulation and softmax statistics), FlashAttention-2
// style: the kernels cu_attention.cu runs under bf16 mixed precision (--torch_dtype bfloat16) for head dims 64 and
// 128 (cu_attention_tc.h; docs/design.md "CUDA kernels" has the tiles, the traffic and the error bounds).
// Shapes as the fp32 kernels: q/out/dout [B,Tq,H,D], k/v [B,Tk,KH,D] (here packed bf16 copies the host side makes,
// Tk keys per batch row), keymask and seg [B,S] (row stride S), stats = the log-sum-exp [B,H,Tq].
//  - forward: a block takes 64 query rows of one (b, h), 4 warps of 16 rows; it walks key tiles of 64 (only up to
//    the block's last row under the causal mask) double-buffered in shared memory by cp.async: S = Q K^T (Q's
//    fragments kept in registers, K's by ldmatrix), masked, an online softmax in fp32 (exp2 of scores pre-scaled
//    by scale * log2 e), then O += P V (P rounded to bf16 as the A fragment straight from S's accumulators, V by
//    ldmatrix.trans). Writes out (fp32) and the row's log-sum-exp (-inf for a row with no allowed key: out 0).
//  - backward (5 products per tile pair: S^T, dP^T, dV, dK, dQ): a block owns key tiles j = c, c + C, ... (chunk
//    c of C) of one (b, query head h): 4 warps of 16 keys hold dK and dV in registers while the block walks the
//    query tiles of 32 rows that may see the keys: P^T = exp(S^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T - Drow)
//    (Drow = rowsum(dO * O), the prep kernel), dV += P^T dO, dK += dS^T Q; dS^T goes through shared memory to
//    give dQ_i += dS K_j, added into the chunk's own fp32 partial dqp[c] (each element read and written by one
//    lane of the one block that owns it, in a fixed order). Then dq += scale * sum_c dqp[c] in chunk order, and
//    dk/dv per query head summed over each kv head's heads in head order (cu_attention.cu's kernel): no atomics,
//    the same bits on every run. C depends on the shape only (never on the GPU).
#include "cu_kern.cuh"
#include "cu_index.h"
#include "cu_mma.cuh"
#include "cu_attention_tc.h"
#include <math.h>

enum { TBQ = CU_ATT_TC_BQ, TBK = CU_ATT_TC_BK, BQ2 = CU_ATT_TC_BQ_BWD, TTHREADS = 128 };
static_assert(TBQ == 64 && TBK == 64 && BQ2 == 32, "4 warps: 16 query rows (forward) or 16 keys (backward) each");

typedef struct {
    const uint16_t *q, *k, *v, *dout;   // bf16 [B,Tq,H,D] and [B,Tk,KH,D]
    const float *o, *dout32;            // fp32 out and dout (backward's prep)
    const uint8_t *km;                  // [B,S] or NULL
    const int32_t *seg;                 // [B,S] or NULL
    float *out, *lse;                   // forward
    const float *stats;                 // backward: lse [B,H,Tq]
    float *drow;                        // backward: Drow [B,H,Tq] (the prep kernel's)
    float *dqp, *dk, *dv;               // dqp [C][B,Tq,H,D]; dk/dv: [B,Tk,KH,D] (accumulated) or per-head [B,Tk,H,D]
    uint16_t *dout16;                   // prep: bf16 dout
    int64_t B, Tq, Tk, S, H, KH, off;   // query t sits at position t + off
    int causal, chunks, per_head;       // per_head: dk/dv are per query head partials (written, not accumulated)
    int acc;                            // 0: dq (and dk/dv when not per_head) overwritten, not read
    float scale;
} tc_args;

// the masks of a tile from shared memory and registers instead of global memory: a key is (ok: s < Tk and not
// masked out, its segment id or 0), a query (t, its segment id or 0); allowed: cu_att_allowed's rule on them
__device__ static inline bool seen(const tc_args &a, int64_t t, int tseg, int64_t s, bool kok, int kseg) {
    return kok && kseg == tseg && !(a.causal && s > t + a.off);
}
__device__ static inline bool key_ok(const tc_args &a, int64_t b, int64_t s) {
    return s < a.Tk && !(a.km && !a.km[b * a.S + s]);
}
__device__ static inline int seg_of(const tc_args &a, int64_t b, int64_t t) {
    return a.seg && t < a.S ? a.seg[b * a.S + t] : 0;
}

// Packed segments: tiles no row of the block may see are skipped, as under the causal mask. ids: shared scratch of
// TBK ints. Every thread of the block calls these (block reductions); without segments they return at once.
// the distinct runs of segment ids of positions [p0, p0 + n) of batch row b into ids (thread 0), their count
__device__ static int seg_runs(const tc_args &a, int64_t b, int64_t p0, int64_t n, int *ids) {
    __shared__ int nid;
    if (threadIdx.x == 0) {
        int c = 0;
        for (int64_t p = p0; p < p0 + n; p++)
            if (p == p0 || a.seg[b * a.S + p] != a.seg[b * a.S + p - 1]) ids[c++] = a.seg[b * a.S + p];
        nid = c;
    }
    __syncthreads();
    return nid;
}
__device__ static inline bool seg_in(int x, const int *ids, int nid) {
    for (int i = 0; i < nid; i++)
        if (x == ids[i]) return true;
    return false;
}
// the first key (of [0, kend)) holding a segment id of rows [r0, r0 + n): no row sees a key before it (0 without
// segments)
__device__ static int64_t seg_first_key(const tc_args &a, int64_t b, int64_t r0, int64_t n, int64_t kend, int *ids) {
    if (!a.seg) return 0;
    int nid = seg_runs(a, b, r0, n, ids);
    int64_t first = kend;
    for (int64_t s = threadIdx.x; s < kend && first == kend; s += TTHREADS)
        if (seg_in(a.seg[b * a.S + s], ids, nid)) first = s;
    return cu_block_min(first);
}
// 1 + the last row (of [t0, Tq)) holding a segment id of keys [s0, s0 + n): no row after it sees them (Tq without
// segments)
__device__ static int64_t seg_row_end(const tc_args &a, int64_t b, int64_t s0, int64_t n, int64_t t0, int *ids) {
    if (!a.seg) return a.Tq;
    int nid = seg_runs(a, b, s0, n, ids);
    int64_t last = t0 - 1;
    for (int64_t t = a.Tq - 1 - threadIdx.x; t >= t0 && last < t0; t -= TTHREADS)
        if (seg_in(a.seg[b * a.S + t], ids, nid)) last = t;
    return cu_block_max(last) + 1;
}

// rows [r0, r0+ROWS) of a bf16 [B,T,heads,D] tensor (head hd of batch row b) into dst[ROWS][D+8] by cp.async;
// rows at or past T are zero-filled
template <int D, int ROWS> __device__ static inline void tile_async(uint16_t *dst, const uint16_t *src, int64_t b,
                                                                  int64_t r0, int64_t hd, int64_t T, int64_t heads) {
    constexpr int CH = D / 8;   // 16-byte chunks per row
    for (int c = threadIdx.x; c < ROWS * CH; c += TTHREADS) {
        int r = c / CH, x = c % CH;
        int64_t t = r0 + r;
        bool ok = t < T;
        cu_cp_async16(dst + r * (D + 8) + 8 * x, src + (ok ? cu_att_row(b, t, hd, T, heads, D) + 8 * x : 0), ok ? 16 : 0);
    }
}

// A fragments (16 rows x 16 columns at column k0) of rows r0.. of a [.][D+8] tile: ldmatrix matrices (rows 0-7,
// cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) are a0..a7
template <int D> __device__ static inline void frag_a(uint32_t (&f)[4], const uint16_t *tile, int r0, int k0) {
    const int lane = threadIdx.x & 31;
    cu_ldmatrix_x4(f, tile + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * (D + 8) + k0 + (lane >> 4) * 8);
}
// B fragments of two n8 tiles (rows n0..n0+15 of a [n][k] tile: the .col operand) at column k0: b of tile n0 in
// f[0..1], of n0 + 8 in f[2..3]
template <int LD> __device__ static inline void frag_b_nk(uint32_t (&f)[4], const uint16_t *tile, int n0, int k0) {
    const int lane = threadIdx.x & 31;
    cu_ldmatrix_x4(f, tile + (n0 + (lane & 7) + (lane >> 4) * 8) * LD + k0 + ((lane >> 3) & 1) * 8);
}
// B fragments of two n8 tiles from a [k][n] tile (rows k0..k0+15, columns n0..n0+15) through ldmatrix.trans
template <int LD> __device__ static inline void frag_b_kn(uint32_t (&f)[4], const uint16_t *tile, int k0, int n0) {
    const int lane = threadIdx.x & 31;
    cu_ldmatrix_x4_trans(f, tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n0 + (lane >> 4) * 8);
}
// A fragments of a [k][m] tile read as its transpose (A rows m0.., columns k0..): ldmatrix.trans
template <int LD> __device__ static inline void frag_a_t(uint32_t (&f)[4], const uint16_t *tile, int m0, int k0) {
    const int lane = threadIdx.x & 31;
    cu_ldmatrix_x4_trans(f, tile + (k0 + (lane & 7) + (lane >> 4) * 8) * LD + m0 + ((lane >> 3) & 1) * 8);
}
__device__ static inline void mma2(float (&d0)[4], float (&d1)[4], const uint32_t (&a)[4], const uint32_t (&b)[4]) {
    uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
    cu_mma_bf16(d0, a, b0);
    cu_mma_bf16(d1, a, b1);
}
// the A fragment (k16 chunk kk) of accumulators c[2kk], c[2kk+1] (two n8 tiles of one 16-row strip), as bf16
__device__ static inline void acc_to_a(uint32_t (&f)[4], const float (&c0)[4], const float (&c1)[4]) {
    f[0] = cu_pack_bf16(c0[0], c0[1]), f[1] = cu_pack_bf16(c0[2], c0[3]);
    f[2] = cu_pack_bf16(c1[0], c1[1]), f[3] = cu_pack_bf16(c1[2], c1[3]);
}
__device__ static inline float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ static inline float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

// grid (query tiles of 64, H, B); dynamic shared memory (64 + 4 * 64) rows of D + 8 bf16
template <int D> __global__ void __launch_bounds__(TTHREADS) att_tc_fwd_kernel(tc_args a) {
    CU_DYNAMIC_SHARED(uint16_t, sm);
    constexpr int LD = D + 8, ND = D / 8;
    uint16_t *Qs = sm, *Ks = Qs + TBQ * LD, *Vs = Ks + 2 * TBK * LD;
    int *kseg = (int *)(Vs + 2 * TBK * LD);          // [2][TBK]: each buffered tile's keys' segment ids
    uint8_t *kok = (uint8_t *)(kseg + 2 * TBK);      // [2][TBK]: and whether any query may see them
    const int64_t b = blockIdx.z, h = blockIdx.y, g = cu_att_kv_head(h, a.H, a.KH), t0 = (int64_t)blockIdx.x * TBQ;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int rseg[2];   // the segment ids of the lane's rows g and g + 8 of the warp's strip
    for (int hr = 0; hr < 2; hr++) rseg[hr] = seg_of(a, b, t0 + 16 * warp + (lane >> 2) + 8 * hr);
    const int64_t nrows = a.Tq - t0 < TBQ ? a.Tq - t0 : (int64_t)TBQ;
    const int64_t kend = cu_att_key_end(t0, nrows, a.off, a.causal, a.Tk);
    const int ntiles = (int)((kend + TBK - 1) / TBK), j0 = (int)(seg_first_key(a, b, t0, nrows, kend, kseg) / TBK);
    const float sl2 = a.scale * LOG2E;
    tile_async<D, TBQ>(Qs, a.q, b, t0, h, a.Tq, a.H);
    if (j0 < ntiles) {
        tile_async<D, TBK>(Ks, a.k, b, (int64_t)j0 * TBK, g, a.Tk, a.KH);
        tile_async<D, TBK>(Vs, a.v, b, (int64_t)j0 * TBK, g, a.Tk, a.KH);
        if (threadIdx.x < TBK) {
            int64_t s = (int64_t)j0 * TBK + threadIdx.x;
            kok[threadIdx.x] = key_ok(a, b, s), kseg[threadIdx.x] = seg_of(a, b, s);
        }
    }
    cu_cp_async_commit();
    float o[ND][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    uint32_t qf[D / 16][4];
#pragma unroll
    for (int n = 0; n < ND; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    for (int j = j0; j < ntiles; j++) {
        const int buf = (j - j0) & 1;
        const int64_t s0 = (int64_t)j * TBK;
        if (j + 1 < ntiles) {   // the next tile into the other buffer, while this one is used
            tile_async<D, TBK>(Ks + (buf ^ 1) * TBK * LD, a.k, b, s0 + TBK, g, a.Tk, a.KH);
            tile_async<D, TBK>(Vs + (buf ^ 1) * TBK * LD, a.v, b, s0 + TBK, g, a.Tk, a.KH);
            if (threadIdx.x < TBK) {
                int64_t s = s0 + TBK + threadIdx.x;
                kok[(buf ^ 1) * TBK + threadIdx.x] = key_ok(a, b, s), kseg[(buf ^ 1) * TBK + threadIdx.x] = seg_of(a, b, s);
            }
        }
        cu_cp_async_commit();
        cu_cp_async_wait<1>();
        __syncthreads();
        if (j == j0)
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) frag_a<D>(qf[kk], Qs, 16 * warp, 16 * kk);
        const uint16_t *Kt = Ks + buf * TBK * LD, *Vt = Vs + buf * TBK * LD;
        float s[TBK / 8][4];
#pragma unroll
        for (int n = 0; n < TBK / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
            for (int np = 0; np < TBK / 16; np++) {
                uint32_t kf[4];
                frag_b_nk<LD>(kf, Kt, 16 * np, 16 * kk);
                mma2(s[2 * np], s[2 * np + 1], qf[kk], kf);
            }
        // a tile that some key or row of the block may not see: padding, masks, the causal diagonal
        const bool edge = a.km || a.seg || s0 + TBK > a.Tk || t0 + TBQ > a.Tq || (a.causal && s0 + TBK - 1 > t0 + a.off);
#pragma unroll
        for (int n = 0; n < TBK / 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float x = s[n][i] * sl2;
                const int j = 8 * n + cu_frag_c_col(lane, i), r = 16 * warp + cu_frag_c_row(lane, i);
                if (edge && !(t0 + r < a.Tq && seen(a, t0 + r, rseg[i >> 1], s0 + j, kok[buf * TBK + j], kseg[buf * TBK + j])))
                    x = -INFINITY;
                s[n][i] = x;
            }
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {   // rows g (c0, c1) and g + 8 (c2, c3) of the warp's strip
            float mx = -INFINITY;
#pragma unroll
            for (int n = 0; n < TBK / 8; n++) mx = fmaxf(mx, fmaxf(s[n][2 * hr], s[n][2 * hr + 1]));
            float mnew = fmaxf(m[hr], quad_max(mx)), muse = mnew == -INFINITY ? 0.0f : mnew;
            float alpha = exp2f(m[hr] - muse);
            m[hr] = mnew;
            l[hr] *= alpha;
#pragma unroll
            for (int n = 0; n < ND; n++) o[n][2 * hr] *= alpha, o[n][2 * hr + 1] *= alpha;
#pragma unroll
            for (int n = 0; n < TBK / 8; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float p = exp2f(s[n][2 * hr + e] - muse);
                    s[n][2 * hr + e] = p;
                    l[hr] += p;
                }
        }
#pragma unroll
        for (int kk = 0; kk < TBK / 16; kk++) {   // O += P V
            uint32_t pa[4];
            acc_to_a(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
            for (int dp = 0; dp < D / 16; dp++) {
                uint32_t vf[4];
                frag_b_kn<LD>(vf, Vt, 16 * kk, 16 * dp);
                mma2(o[2 * dp], o[2 * dp + 1], pa, vf);
            }
        }
        __syncthreads();   // this buffer is loaded again two tiles on
    }
    cu_cp_async_wait<0>();
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        float lsum = quad_sum(l[hr]);
        int64_t t = t0 + 16 * warp + (lane >> 2) + 8 * hr;
        if (t >= a.Tq) continue;
        float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
        float *dst = a.out + cu_att_row(b, t, h, a.Tq, a.H, D);
#pragma unroll
        for (int n = 0; n < ND; n++) {
            int d = 8 * n + cu_frag_c_col(lane, 2 * hr);
            dst[d] = o[n][2 * hr] * inv, dst[d + 1] = o[n][2 * hr + 1] * inv;
        }
        if (a.lse && (lane & 3) == 0)
            a.lse[cu_att_stat(b, h, t, a.H, a.Tq)] = lsum > 0.0f ? m[hr] * LN2 + logf(lsum) : -INFINITY;
    }
}

// one warp per row (b, t, h): drow[b,h,t] = dout . out (fp32, a fixed butterfly), dout16 = bf16 of dout
__global__ void att_tc_prep_kernel(tc_args a, int64_t D) {
    const int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * (TTHREADS / 32) + (threadIdx.x >> 5);
    if (row >= a.B * a.Tq * a.H) return;
    int64_t h = row % a.H, t = row / a.H % a.Tq, b = row / (a.H * a.Tq), base = row * D;
    float s = 0.0f;
    for (int64_t d = 2 * lane; d < D; d += 64) {
        float x0 = a.dout32[base + d], x1 = a.dout32[base + d + 1];
        s += x0 * a.o[base + d] + x1 * a.o[base + d + 1];
        ((uint32_t *)a.dout16)[(base + d) / 2] = cu_pack_bf16(x0, x1);
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) a.drow[cu_att_stat(b, h, t, a.H, a.Tq)] = s;
}

// rows [t0, t0 + BQ2) of (b, h): lse (-inf past Tq), Drow, segment ids into shared memory (threads 0..BQ2-1)
__device__ static inline void rows_in(const tc_args &a, float *lse, float *dr, int *sg, int64_t b, int64_t h, int64_t t0) {
    if (threadIdx.x >= BQ2) return;
    int64_t t = t0 + threadIdx.x;
    bool in = t < a.Tq;
    lse[threadIdx.x] = in ? a.stats[cu_att_stat(b, h, t, a.H, a.Tq)] : -INFINITY;
    dr[threadIdx.x] = in ? a.drow[cu_att_stat(b, h, t, a.H, a.Tq)] : 0.0f;
    sg[threadIdx.x] = seg_of(a, b, t);
}

// grid (C chunks, H, B); shared memory: K, V [64][D+8], Q, dO [2][32][D+8], dS^T [64][40] (bf16), then the rows'
// lse, Drow, segment ids [2][32] (rows_in)
template <int D> __global__ void __launch_bounds__(TTHREADS) att_tc_bwd_kernel(tc_args a) {
    CU_DYNAMIC_SHARED(uint16_t, sm);
    constexpr int LD = D + 8, ND = D / 8, LDS = BQ2 + 8;
    uint16_t *Ks = sm, *Vs = Ks + TBK * LD, *Qs = Vs + TBK * LD, *dOs = Qs + 2 * BQ2 * LD, *dSs = dOs + 2 * BQ2 * LD;
    // [2][BQ2] each, with Q and dO's buffers: the rows' lse (-inf past Tq), Drow and segment ids
    float *qlse = (float *)(dSs + TBK * LDS), *qdr = qlse + 2 * BQ2;
    int *qseg = (int *)(qdr + 2 * BQ2);
    const int64_t b = blockIdx.z, h = blockIdx.y, g = cu_att_kv_head(h, a.H, a.KH);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t nkt = (a.Tk + TBK - 1) / TBK, N = a.B * a.Tq * a.H * D;
    const float sl2 = a.scale * LOG2E;
    float *dqp = a.dqp ? a.dqp + (int64_t)blockIdx.x * N : NULL;
    for (int64_t j = blockIdx.x; j < nkt; j += a.chunks) {
        const int64_t s0 = j * TBK;
        int64_t tq0 = a.causal && s0 - a.off > 0 ? (s0 - a.off) / BQ2 * BQ2 : 0;   // the first rows that see a key
        int64_t qend = seg_row_end(a, b, s0, a.Tk - s0 < TBK ? a.Tk - s0 : (int64_t)TBK, tq0, qseg);
        const int nqt = tq0 < qend ? (int)((qend - tq0 + BQ2 - 1) / BQ2) : 0;
        tile_async<D, TBK>(Ks, a.k, b, s0, g, a.Tk, a.KH);
        tile_async<D, TBK>(Vs, a.v, b, s0, g, a.Tk, a.KH);
        if (nqt > 0) {
            tile_async<D, BQ2>(Qs, a.q, b, tq0, h, a.Tq, a.H), tile_async<D, BQ2>(dOs, a.dout, b, tq0, h, a.Tq, a.H);
            rows_in(a, qlse, qdr, qseg, b, h, tq0);
        }
        cu_cp_async_commit();
        bool kok[2];   // the lane's keys: rows g and g + 8 of the warp's 16
        int kseg[2];
        for (int hr = 0; hr < 2; hr++) {
            int64_t s = s0 + 16 * warp + (lane >> 2) + 8 * hr;
            kok[hr] = key_ok(a, b, s), kseg[hr] = seg_of(a, b, s);
        }
        float dk[ND][4], dv[ND][4];
#pragma unroll
        for (int n = 0; n < ND; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) dk[n][i] = dv[n][i] = 0.0f;
        for (int ii = 0; ii < nqt; ii++) {
            const int buf = ii & 1;
            const int64_t t0 = tq0 + (int64_t)ii * BQ2;
            if (ii + 1 < nqt) {
                tile_async<D, BQ2>(Qs + (buf ^ 1) * BQ2 * LD, a.q, b, t0 + BQ2, h, a.Tq, a.H);
                tile_async<D, BQ2>(dOs + (buf ^ 1) * BQ2 * LD, a.dout, b, t0 + BQ2, h, a.Tq, a.H);
                rows_in(a, qlse + (buf ^ 1) * BQ2, qdr + (buf ^ 1) * BQ2, qseg + (buf ^ 1) * BQ2, b, h, t0 + BQ2);
            }
            cu_cp_async_commit();
            cu_cp_async_wait<1>();
            __syncthreads();
            const uint16_t *Qt = Qs + buf * BQ2 * LD, *dOt = dOs + buf * BQ2 * LD;
            float st[BQ2 / 8][4], dpt[BQ2 / 8][4];   // S^T and dP^T: the warp's 16 keys x 32 rows
#pragma unroll
            for (int n = 0; n < BQ2 / 8; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) st[n][i] = dpt[n][i] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                uint32_t kf[4], vf[4];
                frag_a<D>(kf, Ks, 16 * warp, 16 * kk);
                frag_a<D>(vf, Vs, 16 * warp, 16 * kk);
#pragma unroll
                for (int np = 0; np < BQ2 / 16; np++) {
                    uint32_t qf[4], of[4];
                    frag_b_nk<LD>(qf, Qt, 16 * np, 16 * kk);
                    frag_b_nk<LD>(of, dOt, 16 * np, 16 * kk);
                    mma2(st[2 * np], st[2 * np + 1], kf, qf);
                    mma2(dpt[2 * np], dpt[2 * np + 1], vf, of);
                }
            }
            const bool edge = a.km || a.seg || s0 + TBK > a.Tk || t0 + BQ2 > a.Tq || (a.causal && s0 + TBK - 1 > t0 + a.off);
#pragma unroll
            for (int n = 0; n < BQ2 / 8; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) {   // element (key s, row t) of the transposed tiles
                    const int r = buf * BQ2 + 8 * n + cu_frag_c_col(lane, i);
                    int64_t s = s0 + 16 * warp + cu_frag_c_row(lane, i), t = t0 + 8 * n + cu_frag_c_col(lane, i);
                    float lse = qlse[r];
                    bool ok = lse != -INFINITY && (!edge || seen(a, t, qseg[r], s, kok[i >> 1], kseg[i >> 1]));
                    float p = ok ? exp2f(st[n][i] * sl2 - lse * LOG2E) : 0.0f;
                    float dr = qdr[r];
                    st[n][i] = p;
                    dpt[n][i] = p * (dpt[n][i] - dr);   // dS^T
                }
#pragma unroll
            for (int kk = 0; kk < BQ2 / 16; kk++) {   // dV += P^T dO, dK += dS^T Q (k: the tile's rows)
                uint32_t pa[4], sa[4];
                acc_to_a(pa, st[2 * kk], st[2 * kk + 1]);
                acc_to_a(sa, dpt[2 * kk], dpt[2 * kk + 1]);
#pragma unroll
                for (int dp = 0; dp < D / 16; dp++) {
                    uint32_t of[4], qf[4];
                    frag_b_kn<LD>(of, dOt, 16 * kk, 16 * dp);
                    frag_b_kn<LD>(qf, Qt, 16 * kk, 16 * dp);
                    mma2(dv[2 * dp], dv[2 * dp + 1], pa, of);
                    mma2(dk[2 * dp], dk[2 * dp + 1], sa, qf);
                }
            }
#pragma unroll
            for (int n = 0; n < BQ2 / 8; n++)   // dS^T (bf16) to shared memory for dQ
#pragma unroll
                for (int hr = 0; hr < 2; hr++)
                    *(uint32_t *)(dSs + (16 * warp + (lane >> 2) + 8 * hr) * LDS + 8 * n + cu_frag_c_col(lane, 0)) =
                        cu_pack_bf16(dpt[n][2 * hr], dpt[n][2 * hr + 1]);
            __syncthreads();
            if (!a.dqp) continue;   // (uniform over the block) no dq wanted
            // dQ_i += dS K_j: warp w takes rows 16 (w & 1) .. + 15 and head dims (w >> 1) D/2 .. + D/2 - 1
            const int r0 = 16 * (warp & 1), d0 = (warp >> 1) * (D / 2);
            float dq[D / 16][4];
#pragma unroll
            for (int n = 0; n < D / 16; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < TBK / 16; kk++) {
                uint32_t sa[4];
                frag_a_t<LDS>(sa, dSs, r0, 16 * kk);
#pragma unroll
                for (int dp = 0; dp < D / 32; dp++) {
                    uint32_t kf[4];
                    frag_b_kn<LD>(kf, Ks, 16 * kk, d0 + 16 * dp);
                    mma2(dq[2 * dp], dq[2 * dp + 1], sa, kf);
                }
            }
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                int64_t t = t0 + r0 + (lane >> 2) + 8 * hr;
                if (t >= a.Tq) continue;
                float *dst = dqp + cu_att_row(b, t, h, a.Tq, a.H, D) + d0;
#pragma unroll
                for (int n = 0; n < D / 16; n++) {
                    int d = 8 * n + cu_frag_c_col(lane, 0);
                    dst[d] += dq[n][2 * hr], dst[d + 1] += dq[n][2 * hr + 1];
                }
            }
            __syncthreads();   // dS^T and this buffer are written again
        }
        cu_cp_async_wait<0>();
        __syncthreads();   // K and V are loaded again for the next key tile
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            int64_t s = s0 + 16 * warp + (lane >> 2) + 8 * hr;
            if (s >= a.Tk) continue;
            int64_t base = a.per_head ? cu_att_row(b, s, h, a.Tk, a.H, D) : cu_att_row(b, s, g, a.Tk, a.KH, D);
#pragma unroll
            for (int n = 0; n < ND; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int64_t d = base + 8 * n + cu_frag_c_col(lane, e);
                    if (a.per_head) {
                        if (a.dk) a.dk[d] = dk[n][2 * hr + e];
                        if (a.dv) a.dv[d] = dv[n][2 * hr + e];
                    } else {
                        if (a.dk) a.dk[d] = (a.acc ? a.dk[d] : 0.0f) + a.scale * dk[n][2 * hr + e];
                        if (a.dv) a.dv[d] = (a.acc ? a.dv[d] : 0.0f) + dv[n][2 * hr + e];
                    }
                }
        }
    }
}

// dq[e] += scale * sum_c dqp[c][e], chunks in order (one thread per element; acc 0: dq[e] = 0 + that)
__global__ void att_tc_dq_sum_kernel(float *dq, const float *dqp, int64_t n, int chunks, float scale, int acc) {
    CU_FOR(e, n) {
        float s = 0.0f;
        for (int c = 0; c < chunks; c++) s += dqp[(int64_t)c * n + e];
        dq[e] = (acc ? dq[e] : 0.0f) + scale * s;
    }
}

// ---- host side ----

int cu_att_tc_dim(int64_t D) { return D == 64 || D == 128; }

static size_t fwd_bytes(int64_t D) { return sizeof(uint16_t) * (size_t)((TBQ + 4 * TBK) * (D + 8)) + 2 * TBK * 5; }
static size_t bwd_bytes(int64_t D) {
    return sizeof(uint16_t) * (size_t)(2 * TBK * (D + 8) + 4 * BQ2 * (D + 8) + TBK * (BQ2 + 8)) + 3 * 2 * BQ2 * 4;
}

static void launch(void (*kernel)(tc_args), dim3 grid, size_t bytes, const tc_args &a, const char *what) {
    if (bytes > 48 * 1024) CU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    kernel<<<grid, TTHREADS, bytes, cu_stream()>>>(a);
    cu_check(cudaGetLastError(), what);
}

// bf16 copies: dst [B,rows,heads,D] packed from src [B,S,heads,D] (rows <= S of each batch row)
__global__ void att_tc_pack_kernel(uint32_t *dst, const float *src, int64_t B, int64_t rows, int64_t S, int64_t w) {
    CU_FOR(e, B * rows * w / 2) {   // w = heads * D floats per position, even
        int64_t x = 2 * e % w, r = 2 * e / w % rows, b = 2 * e / (w * rows);
        const float *s = src + (b * S + r) * w + x;
        dst[e] = cu_pack_bf16(s[0], s[1]);
    }
}
static uint16_t *pack(const float *src, int64_t B, int64_t rows, int64_t S, int64_t heads, int64_t D, const char *what) {
    int64_t n = B * rows * heads * D;
    uint16_t *d = (uint16_t *)cu_scratch(2 * n, what);
    att_tc_pack_kernel<<<cu_grid(n / 2), CU_THREADS, 0, cu_stream()>>>((uint32_t *)d, src, B, rows, S, heads * D);
    CU_LAUNCHED("att_tc_pack_kernel");
    return d;
}

void cu_att_tc_fwd(float *out, float *lse, const float *q, const float *k, const float *v, const uint8_t *keymask,
                   const int32_t *seg, int causal, int64_t B, int64_t Tq, int64_t Tk, int64_t S, int64_t off, int64_t H,
                   int64_t KH, int64_t D) {
    tc_args a = {};
    a.q = pack(q, B, Tq, Tq, H, D, "attention bf16 q");
    a.k = pack(k, B, Tk, S, KH, D, "attention bf16 k");
    a.v = pack(v, B, Tk, S, KH, D, "attention bf16 v");
    a.km = keymask, a.seg = seg, a.out = out, a.lse = lse;
    a.B = B, a.Tq = Tq, a.Tk = Tk, a.S = S, a.H = H, a.KH = KH, a.off = off, a.causal = causal;
    a.scale = 1.0f / sqrtf((float)D);
    dim3 grid(cu_blocks(Tq, TBQ), (unsigned)H, (unsigned)B);
    if (D == 64) launch(att_tc_fwd_kernel<64>, grid, fwd_bytes(D), a, "launch of att_tc_fwd_kernel<64>");
    else launch(att_tc_fwd_kernel<128>, grid, fwd_bytes(D), a, "launch of att_tc_fwd_kernel<128>");
    cu_scratch_free((void *)a.q), cu_scratch_free((void *)a.k), cu_scratch_free((void *)a.v);
}

int cu_att_tc_chunks(int64_t B, int64_t T, int64_t H) {
    int64_t nkt = (T + TBK - 1) / TBK, c = (2 * 132 + B * H - 1) / (B * H);   // about two blocks per SM of an H100
    c = c < (int64_t)CU_ATT_TC_MAX_CHUNKS ? c : (int64_t)CU_ATT_TC_MAX_CHUNKS;
    return (int)(c < nkt ? c : nkt);
}

void cu_att_tc_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v,
                   const float *out, const float *stats, const uint8_t *keymask, const int32_t *seg, int causal,
                   int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D, int acc) {
    tc_args a = {};
    int64_t n = B * T * H * D;
    a.acc = acc;
    a.B = B, a.Tq = T, a.Tk = T, a.S = T, a.H = H, a.KH = KH, a.off = 0, a.causal = causal;
    a.scale = 1.0f / sqrtf((float)D);
    a.km = keymask, a.seg = seg, a.stats = stats, a.o = out, a.dout32 = dout;
    a.chunks = cu_att_tc_chunks(B, T, H);
    a.q = pack(q, B, T, T, H, D, "attention bf16 q");
    a.k = pack(k, B, T, T, KH, D, "attention bf16 k");
    a.v = pack(v, B, T, T, KH, D, "attention bf16 v");
    a.dout16 = (uint16_t *)cu_scratch(2 * n, "attention bf16 dout");
    a.dout = a.dout16;
    a.drow = (float *)cu_scratch(4 * B * H * T, "attention rowsum(dout * out)");
    att_tc_prep_kernel<<<cu_blocks(B * T * H, TTHREADS / 32), TTHREADS, 0, cu_stream()>>>(a, D);
    CU_LAUNCHED("att_tc_prep_kernel");
    if (dq) {
        a.dqp = (float *)cu_scratch(4 * n * a.chunks, "attention dq partials per key chunk");
        CU_CHECK(cudaMemsetAsync(a.dqp, 0, sizeof(float) * (size_t)(n * a.chunks), cu_stream()));
    }
    a.per_head = H != KH;
    float *part = NULL;
    if (a.per_head) {   // per-query-head dk/dv (written by the kernel), summed per kv head below
        part = (float *)cu_scratch(4 * 2 * n, "attention dk/dv per query head");
        a.dk = dk ? part : NULL, a.dv = dv ? part + n : NULL;
    } else {
        a.dk = dk, a.dv = dv;
    }
    dim3 grid((unsigned)a.chunks, (unsigned)H, (unsigned)B);
    if (D == 64) launch(att_tc_bwd_kernel<64>, grid, bwd_bytes(D), a, "launch of att_tc_bwd_kernel<64>");
    else launch(att_tc_bwd_kernel<128>, grid, bwd_bytes(D), a, "launch of att_tc_bwd_kernel<128>");
    if (dq) {
        att_tc_dq_sum_kernel<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(dq, a.dqp, n, a.chunks, a.scale, acc);
        CU_LAUNCHED("att_tc_dq_sum_kernel");
    }
    if (part) cu_att_sum_heads(dk, dv, a.dk, a.dv, B, T, H, KH, D, a.scale, acc);
    cu_scratch_free(part), cu_scratch_free(a.dqp), cu_scratch_free(a.drow), cu_scratch_free(a.dout16);
    cu_scratch_free((void *)a.q), cu_scratch_free((void *)a.k), cu_scratch_free((void *)a.v);
}
