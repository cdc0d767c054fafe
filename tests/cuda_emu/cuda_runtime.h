// A CPU stand-in for <cuda_runtime.h>, enough to run the CUDA kernels of src/cuda/ unchanged on the host
// (tests/cuda_emu/test_cu_emu.cpp; the Makefile rewrites each launch `k<<<grid, block, smem, stream>>>(args)` into
// `cu_emu::launch(k, grid, block, smem, stream)(args)`). Not a simulator of the GPU's speed or memory model: it runs
// each block's threads as fibers on one OS thread, switching only at barriers (__syncthreads*, __syncwarp, the warp
// shuffles), so a kernel's indexing, its reductions and its barrier structure execute as written: a wrong index
// gives wrong numbers, a barrier some threads of a block never reach stops the run with a message. Device memory
// is host memory; launches run at once, in issue order (the one stream).
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <memory>
#include <setjmp.h>
#include <tuple>
#include <ucontext.h>
#include <vector>

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef int cudaError_t;
enum { cudaSuccess = 0 };
typedef struct cu_emu_stream *cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyDeviceToDevice = 3 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static   // one block runs at a time: a static is the block's shared memory
#define CU_DYNAMIC_SHARED(T, name) T *name = (T *)cu_emu::dyn_smem()

namespace cu_emu {
enum { STACK = 64 * 1024 };
struct barrier {
    unsigned arrived = 0, gen = 0;
};
struct fiber {
    ucontext_t ctx;                  // its first entry (makecontext); later switches are _setjmp/_longjmp
    jmp_buf jb;
    bool started = false;
    std::unique_ptr<char[]> stack;   // STACK bytes, kept from launch to launch
    bool done = true;
    unsigned tid = 0;   // linear thread index in the block
    struct barrier *waits = nullptr;   // the barrier it waits at (until its generation moves past wait_gen)
    unsigned wait_gen = 0;
};
struct state {
    std::vector<fiber> fibers;
    std::vector<barrier> warps;   // one per warp
    barrier block;
    ucontext_t sched;
    jmp_buf sched_jb;
    fiber *cur = nullptr;
    std::vector<char> smem;
    void (*body)(void *) = nullptr;
    void *arg = nullptr;
    unsigned long long xchg[1024];   // shuffle slots, one per thread
    int vote;                        // __syncthreads_or/count
};
inline state &st() {
    static state s;
    return s;
}
inline void *dyn_smem() { return st().smem.data(); }
}   // namespace cu_emu

inline dim3 threadIdx, blockIdx;   // set by the scheduler for the fiber it resumes
inline dim3 blockDim, gridDim;

namespace cu_emu {
inline unsigned tid() { return st().cur->tid; }
inline unsigned alive(unsigned first, unsigned n) {
    unsigned k = 0;
    for (unsigned i = first; i < first + n && i < st().fibers.size(); i++) k += !st().fibers[i].done;
    return k;
}
// the running fiber hands control back to the scheduler (no system call: no signal mask to save)
inline void yield() {
    if (!_setjmp(st().cur->jb)) _longjmp(st().sched_jb, 1);
}
inline void trampoline();
// the scheduler runs fiber f until it yields
inline void resume(fiber &f) {
    state &s = st();
    s.cur = &f;
    if (_setjmp(s.sched_jb)) return;
    if (f.started) _longjmp(f.jb, 1);
    f.started = true;
    getcontext(&f.ctx);
    f.stack.reset(new char[STACK]);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = STACK;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, trampoline, 0);
    swapcontext(&s.sched, &f.ctx);
}

// every live thread of the group [first, first + n) waits here until all have arrived
inline void wait(barrier &b, unsigned first, unsigned n) {
    if (++b.arrived >= alive(first, n)) {
        b.arrived = 0;
        b.gen++;
        return;
    }
    fiber *f = st().cur;
    f->waits = &b;
    f->wait_gen = b.gen;
    yield();   // resumed once b.gen moved
    f->waits = nullptr;
}
inline void sync_block() { wait(st().block, 0, (unsigned)st().fibers.size()); }
inline void sync_warp() {
    unsigned w = tid() / 32;
    wait(st().warps[w], w * 32, 32);
}
template <typename T> T shfl(T v, unsigned src_lane) {
    static_assert(sizeof(T) <= 8, "shuffle of 8 bytes at most");
    unsigned t = tid(), w0 = t / 32 * 32;
    memcpy(&st().xchg[t], &v, sizeof(T));
    sync_warp();
    T r = v;
    if (src_lane < 32 && w0 + src_lane < st().fibers.size()) memcpy(&r, &st().xchg[w0 + src_lane], sizeof(T));
    sync_warp();
    return r;
}
inline int vote(int pred, int any) {
    sync_block();
    if (tid() == 0) st().vote = 0;
    sync_block();
    st().vote += pred ? 1 : 0;
    sync_block();
    int r = st().vote;
    sync_block();
    return any ? r != 0 : r;
}

// a fiber's life: the kernel body for each block it is given, parked in between (kept from launch to launch)
inline void trampoline() {
    for (;;) {
        st().body(st().arg);
        st().cur->done = true;
        yield();
    }
}

// runs body(arg) as every thread of every block of the grid
inline void run(dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *arg) {
    state &s = st();
    unsigned n = block.x * block.y * block.z;
    if (n == 0 || n > 1024 || n % 32) {
        fprintf(stderr, "cuda_emu: block of %u threads (a multiple of 32 up to 1024 here)\n", n);
        exit(1);
    }
    gridDim = grid;
    blockDim = block;
    if (s.fibers.size() < n) s.fibers.resize(n);   // fibers beyond n stay done
    s.smem.assign(smem + 16, 0);
    s.body = body;
    s.arg = arg;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                s.warps.assign(n / 32, barrier());
                s.block = barrier();
                for (unsigned t = 0; t < n; t++) {
                    fiber &f = s.fibers[t];
                    f.tid = t;
                    f.done = false;
                    f.waits = nullptr;
                }
                unsigned left = n;
                while (left) {
                    unsigned progressed = 0;
                    for (unsigned t = 0; t < n; t++) {
                        fiber &f = s.fibers[t];
                        if (f.done || (f.waits && f.waits->gen == f.wait_gen)) continue;   // still held
                        threadIdx = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
                        blockIdx = dim3(bx, by, bz);
                        resume(f);
                        progressed++;   // it ran: to its end or to a barrier
                        if (f.done) left--;
                    }
                    // a round where no thread could run: a barrier that the finished threads no longer join is
                    // released here, else the block is stuck
                    if (!progressed && left) {
                        bool released = false;
                        if (s.block.arrived && s.block.arrived >= alive(0, n)) s.block.arrived = 0, s.block.gen++, released = true;
                        for (unsigned w = 0; w < n / 32; w++)
                            if (s.warps[w].arrived && s.warps[w].arrived >= alive(w * 32, 32))
                                s.warps[w].arrived = 0, s.warps[w].gen++, released = true;
                        if (!released) {
                            fprintf(stderr, "cuda_emu: block (%u,%u,%u): %u threads wait at a barrier the others never "
                                    "reach\n", bx, by, bz, left);
                            exit(1);
                        }
                    }
                }
            }
}

template <typename... P> struct launcher {
    void (*k)(P...);
    dim3 grid, block;
    size_t smem;
    template <typename... A> void operator()(A... args) {
        struct pack {
            void (*k)(P...);
            std::tuple<P...> a;
        } p{k, std::tuple<P...>(args...)};
        run(grid, block, smem, [](void *v) { std::apply(((pack *)v)->k, ((pack *)v)->a); }, &p);
    }
};
template <typename... P> launcher<P...> launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem = 0,
                                               cudaStream_t = nullptr) {
    return launcher<P...>{k, grid, block, smem};
}
}   // namespace cu_emu

// ---- device functions ----
inline void __syncthreads() { cu_emu::sync_block(); }
inline int __syncthreads_or(int p) { return cu_emu::vote(p, 1); }
inline int __syncthreads_count(int p) { return cu_emu::vote(p, 0); }
inline void __syncwarp(unsigned = 0xffffffffu) { cu_emu::sync_warp(); }
template <typename T> T __shfl_xor_sync(unsigned, T v, int m) { return cu_emu::shfl(v, (cu_emu::tid() & 31) ^ (unsigned)m); }
template <typename T> T __shfl_down_sync(unsigned, T v, unsigned d) {
    unsigned src = (cu_emu::tid() & 31) + d;
    T r = cu_emu::shfl(v, src < 32 ? src : 32);
    return r;
}
// ---- tensor-core and async-copy instructions (src/cuda/cu_mma.cuh; fragment layouts cu_mma_frag.h) ----
// mma.sync and ldmatrix are warp-collective (.sync.aligned): each lane posts its operands, the 32 lanes meet at the
// warp's barrier (as shuffles do), each reads what the instruction hands it from the others' posts, and they meet
// again before a post may be overwritten. All 32 lanes must be live and at the same instruction, as on the GPU.
// The mma sums in fp32, k in order, onto c (the products of two bf16 values are exact in fp32; the hardware's own
// order and rounding of the sum is not documented: the kernels' tests allow for it). cp.async copies at once
// (the emulator has no concurrency, so waiting for a group has nothing to wait for).
#define CU_EMU 1
#include "cu_mma_frag.h"
namespace cu_emu {
enum { OP_MMA = 1, OP_LDM = 2 };   // OP_LDM + 2 * num + trans: each ldmatrix form is its own instruction
struct warp_post {
    int op;
    uint32_t r[6];      // mma: a0..a3, b0..b1
    const void *addr;   // ldmatrix: this lane's row address
};
inline warp_post *posts() {
    static warp_post p[1024];
    return p;
}
inline void collective(int op, const char *what) {
    unsigned t = tid(), w0 = t / 32 * 32;
    if (alive(w0, 32) != 32 || w0 + 32 > st().fibers.size()) {
        fprintf(stderr, "cuda_emu: %s with fewer than 32 live lanes in warp %u\n", what, w0 / 32);
        exit(1);
    }
    posts()[t].op = op;
    sync_warp();
    for (unsigned l = 0; l < 32; l++)
        if (posts()[w0 + l].op != op) {
            fprintf(stderr, "cuda_emu: %s: lane %u of warp %u is at another instruction (a diverged warp)\n", what,
                    l, w0 / 32);
            exit(1);
        }
}
inline float bf16_value(uint32_t reg, int hi) {
    uint32_t u = (hi ? reg >> 16 : reg & 0xffffu) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline void mma_bf16(float *d, const uint32_t *a, const uint32_t *b) {
    unsigned t = tid(), w0 = t / 32 * 32, lane = t & 31;
    memcpy(posts()[t].r, a, 16);
    memcpy(posts()[t].r + 4, b, 8);
    collective(OP_MMA, "mma.sync.m16n8k16");
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const uint32_t *r = posts()[w0 + l].r;
        for (int i = 0; i < 8; i++) A[cu_frag_a_row(l, i)][cu_frag_a_col(l, i)] = bf16_value(r[i / 2], i & 1);
        for (int i = 0; i < 4; i++) B[cu_frag_b_row(l, i)][cu_frag_b_col(l, i)] = bf16_value(r[4 + i / 2], i & 1);
    }
    float out[4];
    for (int i = 0; i < 4; i++) {
        int row = cu_frag_c_row((int)lane, i), col = cu_frag_c_col((int)lane, i);
        float acc = d[i];
        for (int k = 0; k < 16; k++) acc += A[row][k] * B[k][col];
        out[i] = acc;
    }
    sync_warp();   // every lane has read the posts
    memcpy(d, out, 16);
}
inline void ldmatrix(uint32_t *r, int num, int trans, const void *p) {
    unsigned t = tid(), w0 = t / 32 * 32, lane = t & 31;
    posts()[t].addr = p;
    collective(OP_LDM + 2 * num + trans, "ldmatrix");
    uint32_t out[4];
    for (int j = 0; j < num; j++) {
        uint32_t v = 0;
        for (int e = 0; e < 2; e++) {
            int row = cu_frag_ldm_row((int)lane, e, trans), col = cu_frag_ldm_col((int)lane, e, trans);
            const uint16_t *rowp = (const uint16_t *)posts()[w0 + cu_frag_ldm_addr_lane(j, row)].addr;
            v |= (uint32_t)rowp[col] << (16 * e);
        }
        out[j] = v;
    }
    sync_warp();
    memcpy(r, out, 4 * (size_t)num);
}
}   // namespace cu_emu
inline void cu_mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) { cu_emu::mma_bf16(d, a, b); }
inline void cu_ldmatrix_x4(uint32_t (&r)[4], const void *p) { cu_emu::ldmatrix(r, 4, 0, p); }
inline void cu_ldmatrix_x4_trans(uint32_t (&r)[4], const void *p) { cu_emu::ldmatrix(r, 4, 1, p); }
inline void cu_ldmatrix_x2(uint32_t (&r)[2], const void *p) { cu_emu::ldmatrix(r, 2, 0, p); }
inline void cu_ldmatrix_x2_trans(uint32_t (&r)[2], const void *p) { cu_emu::ldmatrix(r, 2, 1, p); }
inline void cu_ldmatrix_x1(uint32_t (&r)[1], const void *p) { cu_emu::ldmatrix(r, 1, 0, p); }
inline void cu_ldmatrix_x1_trans(uint32_t (&r)[1], const void *p) { cu_emu::ldmatrix(r, 1, 1, p); }
inline void cu_cp_async16(void *smem, const void *gmem, int bytes) {
    memset(smem, 0, 16);
    if (bytes > 0) memcpy(smem, gmem, (size_t)(bytes < 16 ? bytes : 16));
}
inline void cu_cp_async_commit(void) {}
template <int N> inline void cu_cp_async_wait(void) {}
// round to nearest even (a NaN stays NaN), as cvt.rn.bf16x2.f32
inline uint32_t cu_pack_bf16(float lo, float hi) {
    auto bits = [](float f) {
        uint32_t u;
        memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
        return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    };
    return bits(lo) | bits(hi) << 16;
}

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline uint32_t __float_as_uint(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
inline float __uint_as_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// ---- host API (the calls src/cuda/ makes; all synchronous here) ----
inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
inline const char *cudaGetErrorString(cudaError_t) { return "no error"; }
inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) {
    memset(p, v, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) {
    memmove(d, s, n);
    return cudaSuccess;
}
template <typename F> cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }
