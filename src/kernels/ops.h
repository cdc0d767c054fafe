// The device seam: every operation the model (src/model/), the parameter loss terms and the optimizer step run on
// their buffers, as one table. A backend fills the table; the callers go through os_k, so a new device (CUDA,
// Ascend) is a new ops_<device>.c and its kernels, not edits across the tree. docs/design.md "Device seam" says
// which buffers live where and who synchronises.
// The members are listed once, with their signatures, shapes and accumulate rules, in kernels/ops_list.h; the
// struct, the CPU, guard, counting and CUDA tables and op_compare's coverage are made from that list. The buffer
// members stand for memset/memcpy on the backend's memory.
// Reductions (xent_fwd_bwd, sumsq) write their results into scalars on the backend's memory, never return them:
// the host reads them with download, at one point per micro-batch (train/step.c) and one for the gradient norm
// (zero/runtime.c), so nothing inside the forward and backward waits for the device.
#pragma once
#include "kernels/ops_list.h"
#include <stdint.h>

// the members (kernels/ops_list.h: one line each, with their shapes): `ret (*name)(args)`
#define OS_OPS_FIELD(name, R, GUARD, CPU, ...) OS_T(R) (*name)(OS_PARAMS(__VA_ARGS__));
typedef struct {
    const char *name;
    // 1: the backend's memory is the host's (the CPU backend): MPI may read and write it in place (zero/comm.c);
    // 0: it is reached only through this table (comm.c stages the collectives through host buffers)
    int host_memory;
    // the products' precision, set when the backend was opened (os_ops_cpu_open, os_ops_guard_open, os_cuda_open;
    // --torch_dtype): 0 fp32, 1 bf16 mixed precision (every product rounds its fp32 operands to bf16 and
    // accumulates in fp32: matmul, the attention's and the convolution's products)
    int bf16;
    // the bytes the backend's buffers hold now in memory of its own, as it holds them (the guard: whole pages; CUDA:
    // its allocator's size classes), beside the host's that os_alloc_live_bytes counts; NULL: the backend's memory
    // is the host's (the CPU backend: os_alloc counts it)
    int64_t (*held_bytes)(void);
    OS_OPS_LIST(OS_OPS_FIELD)
} os_ops;

extern const os_ops os_ops_cpu;   // kernels/ops_cpu.c: OpenBLAS + OpenMP, fp32 products
// the CPU backend opened with its products' precision (bf16 1: the table whose product members round; call
// k_gemm_bf16_setup first, kernels.h)
const os_ops *os_ops_cpu_open(int bf16);
extern const os_ops *os_k;        // the backend in use (os_ops_cpu; cli/device.c opens another: --device,
                                  // with --torch_dtype's precision)
// kernels/ops_guard.c: the CPU kernels with the backend's memory out of the host's reach outside its calls, run
// in order only at download and free as on a device's stream (ops_guard_queue.c; a test hook)
// os_ops_guard: the table as last opened (fp32 until opened otherwise); os_ops_guard_open(bf16): opened over the CPU
// backend of that precision (one guard backend per process: opening it again sets its precision)
// a backend copy of the host's int32 list h[n] (an index list for gather_rows, scatter_add_rows; what: named in
// the out-of-memory message), freed by the caller with os_k->free
int32_t *os_ids_upload(const int32_t *h, int64_t n, const char *what);
const os_ops *os_ops_guard(void);
const os_ops *os_ops_guard_open(int bf16);
// kernels/ops_count.c: a backend that runs each member on `inner` and counts its calls (and the bytes of alloc*,
// upload and download): OMNISHARD_COUNT_OPS=PATH (a test hook; cli/device.c) wraps the backend --device chooses and writes the
// counts to PATH at exit. Member i's name and counts so far (i < OS_OPS_MEMBERS, the list's order); write: JSON
// {"backend": name, "members": {member: {"calls": n, "bytes": n}, ...}, "phases": {phase: {member: calls, ...},
// ...}}, 0 or -1 with the reason in os_errmsg. Phases: the part of the run the following calls belong to, set by
// os_ops_count_phase (train/step.c marks a micro-batch's forward, its loss and its backward; the rest, loading, the
// optimizer step, evaluation's set-up, is "other"); each phase lists the members it called.
const os_ops *os_ops_count(const os_ops *inner);
typedef struct {
    int64_t calls, bytes;
} os_op_count;
const char *os_ops_member_name(int i);
os_op_count os_ops_count_of(int i);
int os_ops_count_write(const char *path);
enum { OS_PHASE_OTHER, OS_PHASE_FORWARD, OS_PHASE_LOSS, OS_PHASE_BACKWARD, OS_PHASES };
void os_ops_count_phase(int phase);
// strict guard (the default; --device guard:lax turns it off): a member given host memory where a device needs
// its own memory (any pointer of a compute member, upload's destination, download's source) stops the program
// naming both
void os_guard_set_strict(int on);
