// The index arithmetic of the CUDA kernels whose indexing is easy to get wrong (attention tiles and masks, the
// cross-entropy's rows per block, the embedding backward's windows), as inline functions that compile for the
// device (nvcc) and the host (C): tests/unit/test_cu_index.c runs them on the CPU against the CPU kernels.
// Plain C, no CUDA header: CU_HD marks them __host__ __device__ under nvcc only.
#pragma once
#include <stdint.h>

#ifdef __CUDACC__
#define CU_HD __host__ __device__
#else
#define CU_HD
#endif

// ---- attention (cu_attention.cu) ----
// A block takes CU_ATT_BQ query rows of one (batch row b, head h) and walks the keys in tiles of CU_ATT_BK.
// q/out [B,T,H,D]; k/v [B,S,KH,D] (S positions per batch row: T in training, the cache's capacity in inference).
enum { CU_ATT_BQ = 32, CU_ATT_BK = 32, CU_ATT_WARPS = 4 };

// the first element of row (b, t, head h) of a [B, T, H, D] tensor
CU_HD static inline int64_t cu_att_row(int64_t b, int64_t t, int64_t h, int64_t T, int64_t H, int64_t D) {
    return ((b * T + t) * H + h) * D;
}

// the kv head that query head h reads (H % KH == 0: H/KH consecutive query heads share one kv head)
CU_HD static inline int64_t cu_att_kv_head(int64_t h, int64_t H, int64_t KH) { return h / (H / KH); }

// the log-sum-exp of query row t of (b, h) in stats [B, H, T]
CU_HD static inline int64_t cu_att_stat(int64_t b, int64_t h, int64_t t, int64_t H, int64_t T) {
    return (b * H + h) * T + t;
}

// may query t see key s (both < the row's key count)? causal: s <= t + off (off: the query's position minus its
// index, p0 for the KV cache, 0 in training); km: the batch row's key mask [T] (NULL: all); sg: its segment ids [T]
// (NULL: one segment)
CU_HD static inline int cu_att_allowed(int64_t t, int64_t s, int64_t off, int causal, const uint8_t *km,
                                      const int32_t *sg) {
    if (causal && s > t + off) return 0;
    if (km && !km[s]) return 0;
    if (sg && sg[s] != sg[t]) return 0;
    return 1;
}

// keys [0, end) that query rows [t0, t0 + n) may see: all Tk keys, or causally up to the last row's position
CU_HD static inline int64_t cu_att_key_end(int64_t t0, int64_t n, int64_t off, int causal, int64_t Tk) {
    int64_t e = t0 + n + off;
    return causal && e < Tk ? e : Tk;
}

// the first query row that may see a key of the tile starting at s0 (causal: row s0 - off, at least 0), rounded
// down to the start of its CU_ATT_BQ tile; 0 without the causal mask
CU_HD static inline int64_t cu_att_query_begin(int64_t s0, int64_t off, int causal) {
    int64_t t = causal ? s0 - off : 0;
    return t > 0 ? t / CU_ATT_BQ * CU_ATT_BQ : 0;
}

// ---- cross-entropy (cu_xent.cu) ----
// the i-th row of block j when `blocks` blocks take the rows of a chunk in turn
CU_HD static inline int64_t cu_xent_row(int64_t j, int64_t i, int64_t blocks) { return j + i * blocks; }

// ---- dropout (cu_dropout.cu): the CPU's counter-based stream, core/rng.c os_rng_uniform(key, i), on the device ----
CU_HD static inline uint64_t cu_rng_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
CU_HD static inline double cu_rng_uniform(uint64_t key, uint64_t i) {   // in [0, 1): os_rng_uniform's bits
    return (double)(cu_rng_mix64(cu_rng_mix64(key) + (i + 1) * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1.0p-53;
}
