// Shared pieces of the CUDA kernels (src/cuda/cu_*.cu): launch shapes, grid-stride loops and block reductions
// whose order is fixed by the launch shape alone (the same bits on every run and every GPU).
#pragma once
#include "cu_runtime.h"
#include <stdint.h>

enum { CU_THREADS = 256 };   // threads per block of the elementwise kernels

// a kernel's dynamic shared memory, T name[] (tests/cuda_emu/cuda_runtime.h, the CPU stand-in, defines its own)
#ifndef CU_DYNAMIC_SHARED
#define CU_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

// blocks for n items at CU_THREADS per block, capped (the kernels loop over the rest: CU_FOR)
static inline unsigned cu_grid(int64_t n) {
    unsigned b = cu_blocks(n, CU_THREADS);
    return b < (1u << 20) ? b : (1u << 20);
}

// i over [0, n) spread over the whole grid
#define CU_FOR(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// the bf16 bits of x, round to nearest even (a NaN stays a quiet NaN): k_bf16_round's rule
__device__ inline uint16_t cu_bf16_bits(float x) {
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
// x rounded to bf16, as a float (exact: a bf16 value is a float): what a bf16 product's operand is
__device__ inline float cu_bf16_value(float x) { return __uint_as_float((uint32_t)cu_bf16_bits(x) << 16); }

// the sum of x over the warp, in lane 0 (a fixed tree: shfl_down halves)
template <typename T> __device__ inline T cu_warp_sum(T x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
    return x;
}

// the sum of x over the warp, in every lane with the same bits (a butterfly: a + b == b + a exactly)
template <typename T> __device__ inline T cu_warp_allsum(T x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

template <typename T> __device__ inline T cu_warp_max(T x) {
    for (int o = 16; o > 0; o >>= 1) {
        T y = __shfl_down_sync(0xffffffffu, x, o);
        x = y > x ? y : x;
    }
    return x;
}

template <typename T> __device__ inline T cu_warp_min(T x) {
    for (int o = 16; o > 0; o >>= 1) {
        T y = __shfl_down_sync(0xffffffffu, x, o);
        x = y < x ? y : x;
    }
    return x;
}

// the block-wide reduction (op: 0 sum, 1 max, 2 min) of x, returned to every thread; blockDim.x a multiple of 32,
// at most 1024. Every thread of the block must call it (it holds two barriers and leaves its shared memory free)
template <typename T, int OP> __device__ inline T cu_block_reduce(T x) {
    __shared__ T part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    x = OP == 0 ? cu_warp_sum(x) : OP == 1 ? cu_warp_max(x) : cu_warp_min(x);
    if (lane == 0) part[warp] = x;
    __syncthreads();
    if (warp == 0) {
        T y = lane < nw ? part[lane] : part[0];   // part[0] is neutral for max and min; sum adds nothing below
        if (OP == 0 && lane >= nw) y = T(0);
        y = OP == 0 ? cu_warp_sum(y) : OP == 1 ? cu_warp_max(y) : cu_warp_min(y);
        if (lane == 0) part[0] = y;
    }
    __syncthreads();
    T r = part[0];
    __syncthreads();   // part may be written by the next call
    return r;
}
template <typename T> __device__ inline T cu_block_sum(T x) { return cu_block_reduce<T, 0>(x); }
template <typename T> __device__ inline T cu_block_max(T x) { return cu_block_reduce<T, 1>(x); }
template <typename T> __device__ inline T cu_block_min(T x) { return cu_block_reduce<T, 2>(x); }
