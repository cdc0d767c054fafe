// The tensor-core and asynchronous-copy instructions of the attention kernels (cu_attention_tc.cu), each behind a
// small device function over inline PTX, so that the CPU emulator (tests/cuda_emu/cuda_runtime.h, which defines
// CU_EMU) substitutes its own implementation of exactly these functions. Fragment layouts: cu_mma_frag.h.
//  - cu_mma_bf16: d += a b, mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (a: 4 registers of A[16x16],
//    b: 2 of B[16x8], d: 4 floats of D[16x8]); all 32 lanes of the warp, at the same instruction (.sync.aligned).
//  - cu_ldmatrix_x{1,2,4}[_trans]: 1, 2 or 4 8x8 bf16 matrices from shared memory (p: this lane's row address,
//    16-byte aligned; lanes 0-7 address matrix 0, 8-15 matrix 1, ...).
//  - cu_cp_async16: 16 bytes global -> shared without registers (cp.async.cg; the bytes past `bytes` are zero
//    filled, 0 reads nothing), completed in groups: cu_cp_async_commit closes a group, cu_cp_async_wait<N> waits
//    until at most N groups are in flight (then __syncthreads makes the bytes visible to the block).
//  - cu_pack_bf16: two floats rounded to nearest even into one .b32 (lo in the low 16 bits).
#pragma once
#include "cu_mma_frag.h"
#include <stdint.h>

#ifndef CU_EMU
__device__ __forceinline__ void cu_mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ unsigned cu_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cu_ldmatrix_x4(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(cu_smem_addr(p)) : "memory");
}
__device__ __forceinline__ void cu_ldmatrix_x4_trans(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(cu_smem_addr(p)) : "memory");
}
__device__ __forceinline__ void cu_ldmatrix_x2(uint32_t (&r)[2], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(cu_smem_addr(p)) : "memory");
}
__device__ __forceinline__ void cu_ldmatrix_x2_trans(uint32_t (&r)[2], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(cu_smem_addr(p)) : "memory");
}
__device__ __forceinline__ void cu_ldmatrix_x1(uint32_t (&r)[1], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(cu_smem_addr(p)) : "memory");
}
__device__ __forceinline__ void cu_ldmatrix_x1_trans(uint32_t (&r)[1], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0]) : "r"(cu_smem_addr(p)) : "memory");
}

__device__ __forceinline__ void cu_cp_async16(void *smem, const void *gmem, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(cu_smem_addr(smem)), "l"(gmem), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void cu_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cu_cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ uint32_t cu_pack_bf16(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
#endif
