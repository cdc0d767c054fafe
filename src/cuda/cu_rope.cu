// Rotary position embedding, rotate-half form of Hugging Face Qwen2, on q[B,T,H,D] and k[B,T,KH,D] in one launch
// (CPU: kernels/rope.c).
// The table's inverse frequencies are computed on the host with the CPU's very expression (glibc powf, float
// division), so they are the CPU's bits; each angle (float)pos * inv_freq is the CPU's float product; its cos and
// sin are taken in double and rounded once (libdevice's cosf/sinf may differ by 2 ulp, and at positions in the
// thousands that is visible): equal to the CPU's glibc cosf/sinf except where those are not correctly rounded
// (at most 1 ulp). The rotation rounds each product and sum as the CPU does: equal bit for bit given the table.
#include "cu_kern.cuh"
#include "cu_ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { CU_ROPE_MAX_HALF = 512 };   // D/2 at most (head dims up to 1024)
typedef struct {
    float inv_freq[CU_ROPE_MAX_HALF];   // passed by value as a kernel argument (2 KB)
} rope_freqs;

__global__ void rope_table_kernel(float *cos_t, float *sin_t, const int32_t *pos, int64_t T, int64_t half,
                                  rope_freqs f) {
    CU_FOR(i, T * half) {
        int64_t t = i / half, j = i % half;
        double angle = (double)__fmul_rn((float)pos[t], f.inv_freq[j]);
        cos_t[i] = (float)cos(angle);
        sin_t[i] = (float)sin(angle);
    }
}

void cu_rope_table(float *cos_t, float *sin_t, const int32_t *pos, int64_t T, int64_t D, float theta) {
    int64_t half = D / 2;
    if (T <= 0 || half <= 0) return;
    if (half > CU_ROPE_MAX_HALF) {
        fprintf(stderr, "CUDA backend: rope_table: head dim %lld is above the supported %d\n", (long long)D,
                2 * CU_ROPE_MAX_HALF);
        exit(1);
    }
    rope_freqs f;
    for (int64_t j = 0; j < half; j++) f.inv_freq[j] = 1.0f / powf(theta, (float)(2 * j) / (float)D);
    rope_table_kernel<<<cu_grid(T * half), CU_THREADS, 0, cu_stream()>>>(cos_t, sin_t, pos, T, half, f);
    CU_LAUNCHED("rope_table_kernel");
}

// one thread per pair (j, j + D/2) of a row: the first pq pairs are q[B*T*H, D]'s, the rest k[B*T*KH, D]'s; sign
// +1 rotates by +angle (forward), -1 by -angle (the transpose, the backward: an overwrite, as on the CPU)
__global__ void rope_rotate_kernel(float *q, float *k, const float *cos_t, const float *sin_t, int64_t T, int64_t H,
                                   int64_t KH, int64_t D, int64_t pq, int64_t pairs, float sign) {
    int64_t half = D / 2;
    CU_FOR(i, pairs) {
        bool inq = i < pq;
        int64_t e = inq ? i : i - pq, row = e / half, j = e % half, t = (row / (inq ? H : KH)) % T;
        float *v = (inq ? q : k) + row * D;
        float x1 = v[j], x2 = v[j + half], c = cos_t[t * half + j], s = sign * sin_t[t * half + j];
        v[j] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
        v[j + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
    }
}

static void rotate(float *q, float *k, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H,
                   int64_t KH, int64_t D, float sign) {
    int64_t pq = B * T * H * (D / 2), pairs = pq + (k ? B * T * KH * (D / 2) : 0);
    if (pairs <= 0) return;
    rope_rotate_kernel<<<cu_grid(pairs), CU_THREADS, 0, cu_stream()>>>(q, k, cos_t, sin_t, T, H, KH, D, pq, pairs, sign);
    CU_LAUNCHED("rope_rotate_kernel");
}

void cu_rope_fwd(float *q, float *k, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H,
                 int64_t KH, int64_t D) {
    rotate(q, k, cos_t, sin_t, B, T, H, KH, D, 1.0f);
}

void cu_rope_bwd(float *dq, float *dk, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H,
                 int64_t KH, int64_t D) {
    rotate(dq, dk, cos_t, sin_t, B, T, H, KH, D, -1.0f);
}
