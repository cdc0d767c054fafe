// The tensor-core attention (cu_attention_tc.cu) and the split-key decode (cu_attention_decode.cu) that
// cu_attention.cu's members run where they apply (docs/design.md "CUDA kernels"). Host functions, device pointers.
#pragma once
#include <stdint.h>

// forward tiles: 64 query rows (4 warps of 16) x key tiles of 64; backward: key tiles of 64 x query tiles of 32
enum { CU_ATT_TC_BQ = 64, CU_ATT_TC_BK = 64, CU_ATT_TC_BQ_BWD = 32, CU_ATT_TC_MAX_CHUNKS = 8 };
// decode: at most this many query rows per call take the split-key kernel
enum { CU_ATT_DECODE_T = 4 };

#ifdef __cplusplus
extern "C" {
#endif

// head dims the tensor-core kernels take (64, 128)
int cu_att_tc_dim(int64_t D);
// out/lse as cu_attention_fwd's (lse [B,H,Tq], may be NULL), q [B,Tq,H,D], k/v [B,S,KH,D] of which keys [0, Tk) per
// batch row are read, query t at position t + off (keymask/seg: [B,S] or NULL)
void cu_att_tc_fwd(float *out, float *lse, const float *q, const float *k, const float *v, const uint8_t *keymask,
                   const int32_t *seg, int causal, int64_t B, int64_t Tq, int64_t Tk, int64_t S, int64_t off, int64_t H,
                   int64_t KH, int64_t D);
// cu_attention_bwd's arguments and rules, on tensor cores
void cu_att_tc_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v,
                   const float *out, const float *stats, const uint8_t *keymask, const int32_t *seg, int causal,
                   int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D, int acc);
// the key chunks of the backward (its dq partials): a function of the shape only
int cu_att_tc_chunks(int64_t B, int64_t T, int64_t H);
// dk[b,s,g] += scale * sum_r pdk[b,s,g*R+r], dv the same without scale (R = H/KH, heads in order; NULL: skipped;
// acc 0: dk, dv = 0 + the sums, not read)
void cu_att_sum_heads(float *dk, float *dv, const float *pdk, const float *pdv, int64_t B, int64_t T, int64_t H,
                      int64_t KH, int64_t D, float scale, int acc);
// the KV-cached forward for few query rows (T <= CU_ATT_DECODE_T), fp32: keys split across blocks, combined in order
void cu_att_decode_fwd(float *out, const float *q, const float *kc, const float *vc, int64_t B, int64_t T, int64_t p0,
                       int64_t S, int64_t H, int64_t KH, int64_t D);
// the number of key splits it uses (a function of the shape only)
int cu_att_decode_splits(int64_t B, int64_t T, int64_t p0, int64_t H);

#ifdef __cplusplus
}
#endif
