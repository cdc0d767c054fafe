// Where each lane's register elements sit in the matrices of the two warp-wide tensor-core instructions the
// attention kernels use, as the PTX ISA states them (sections "Matrix Fragments for mma.m16n8k16 with floating point
// type" and "ldmatrix"): the one table both the kernels (cu_attention_tc.cu: where a score or an output element
// of an accumulator lives) and the CPU emulator of the instructions (tests/cuda_emu/cuda_runtime.h) read.
// tests/cuda_emu/test_cu_emu.cpp checks it against hand-worked lanes of the document.
//  - mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: D[16x8] = A[16x16] B[16x8] + C, bf16 A and B, fp32 C/D.
//    Per lane (g = lane >> 2, t = lane % 4): A a0..a7 in four .b32 registers (two bf16 each, the lower-numbered
//    element in the low 16 bits), B b0..b3 in two, C and D c0..c3 as four floats.
//  - ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16: matrix j's eight rows (16 bytes each) are addressed by
//    lanes 8j..8j+7; register j of lane l holds row l/4, elements 2(l%4) and 2(l%4)+1 of matrix j (of its transpose
//    with .trans).
// Plain C: CU_HD marks them __host__ __device__ under nvcc only.
#pragma once

#ifndef CU_HD
#ifdef __CUDACC__
#define CU_HD __host__ __device__
#else
#define CU_HD
#endif
#endif

// A element i (0..7) of lane: row g for a0,a1,a4,a5, g + 8 for the others; column 2t + (i & 1), + 8 for i >= 4
CU_HD static inline int cu_frag_a_row(int lane, int i) { return (lane >> 2) + 8 * ((i >> 1) & 1); }
CU_HD static inline int cu_frag_a_col(int lane, int i) { return 2 * (lane & 3) + (i & 1) + 8 * (i >> 2); }
// B element i (0..3) of lane: row (k) 2t + (i & 1), + 8 for b2,b3; column (n) g
CU_HD static inline int cu_frag_b_row(int lane, int i) { return 2 * (lane & 3) + (i & 1) + 8 * (i >> 1); }
CU_HD static inline int cu_frag_b_col(int lane, int i) { return (void)i, lane >> 2; }
// C/D element i (0..3) of lane: row g for c0,c1, g + 8 for c2,c3; column 2t + (i & 1)
CU_HD static inline int cu_frag_c_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
CU_HD static inline int cu_frag_c_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

// ldmatrix: element e (0, 1) of lane's register of matrix j sits at (row, column) of that 8x8 matrix as stored
// (rows as the addressing lanes gave them): row l/4, column 2(l%4)+e; with .trans the two swap
CU_HD static inline int cu_frag_ldm_row(int lane, int e, int trans) { return trans ? 2 * (lane & 3) + e : lane >> 2; }
CU_HD static inline int cu_frag_ldm_col(int lane, int e, int trans) { return trans ? lane >> 2 : 2 * (lane & 3) + e; }
// the lane whose address gives row r of matrix j
CU_HD static inline int cu_frag_ldm_addr_lane(int j, int r) { return 8 * j + r; }
