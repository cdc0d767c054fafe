// The OMNISHARD_* environment variables (docs/operations.md "Environment variables"): read here and nowhere else,
// once, and checked. main() calls os_knobs_check() first, so a bad value stops any command before it starts, and
// hands each value to the module it sets (k_gemm_bf16_force, os_model_force_logits_rows, os_tok_force_ranges,
// comm_force_way, k_gemm_times_enable); the library below never reads a variable itself, except core/ (huge pages,
// the OpenBLAS fix, the fault hook) and train/ (the run's record of the variables set). A unit test without main
// reads them with os_knobs() and passes them on itself. What a run computes is chosen by options; a variable is
// only what has no option: diagnostics, test hooks and fault injectors, a per-process memory setting, where the
// tools are (each one's reason in the docs' table). A variable that became an option stops every command naming
// the option (tests/test_knobs.py checks that nothing else reads the environment).
#pragma once
#include <stddef.h>
#include <stdint.h>

enum { OS_COMM_AUTO, OS_COMM_MPI, OS_COMM_NCCL };

typedef struct {
    const char *bf16_gemm;   // OMNISHARD_BF16_GEMM: onednn, onednn_gemm, onednn_matmul, sgemm; NULL: from the CPU
    int gemm_times;          // OMNISHARD_GEMM_TIMES=1: the products' times at exit
    int hugepages;           // OMNISHARD_HUGEPAGES: 1 (default) the pool asks for transparent huge pages, 0 not
    int no_blas_fix;         // OMNISHARD_NO_BLAS_FIX set: OpenBLAS chooses its own core type
    const char *home;        // OMNISHARD_HOME: the source tree omnishard convert uses, or NULL
    const char *python;      // OMNISHARD_PYTHON: the interpreter of omnishard convert, or NULL
    // OMNISHARD_COMM: how the f32 collectives travel between GPUs (zero/transport.h): OS_COMM_AUTO (unset: NCCL
    // when every rank has a GPU of its own, else MPI through host buffers), OS_COMM_MPI (mpi), OS_COMM_NCCL (nccl)
    int comm;
    // Test hooks and fault injectors (for tests only; never needed by a run):
    int log_samples;         // OMNISHARD_LOG_SAMPLES=1: each step's sample ids in logging.jsonl
    int64_t logits_rows;     // OMNISHARD_LOGITS_ROWS: rows per logits chunk instead of 2^25 / V; 0: not set
    const char *count_ops;   // OMNISHARD_COUNT_OPS=PATH: the seam's calls counted per member, written to PATH at exit
    int tok_ranges;          // OMNISHARD_TOK_RANGES=1: the tokenizer's Unicode classes as explicit ranges
    struct {                 // OMNISHARD_FAULT=RANK:STEP[:KIND]: os_test_fault injects KIND at that rank and step
        int rank;            // -1: none
        int64_t step;
        char kind[8];        // error | crash | exit | stall | term (SIGTERM, then on); step 0: the final save;
                             // step -1: the start-up, before the datasets are opened
    } fault;
} os_knobs_t;

// the values (read and checked on the first call; a bad one leaves its default, os_knobs_check says why)
const os_knobs_t *os_knobs(void);
// 0, or -1 with every bad value named ("OMNISHARD_X: expected ..., got '...'"); a note on stderr for a value
// that is named and ignored (OMNISHARD_GEMM_TIMES)
int os_knobs_check(void);
// "OMNISHARD_X=v OMNISHARD_Y=w" of the variables set, "(none)" when none: for the run's settings
void os_knobs_describe(char *buf, size_t n);
// variable i of os_knobs_count(): its name in *name, its value as set (NULL: not set)
int os_knobs_count(void);
const char *os_knobs_entry(int i, const char **name);
// Test hook OMNISHARD_FAULT: at rank `rank`, step `step`: error (a user error: the message and exit 1), crash
// (SIGSEGV), exit (the process vanishes without a word), stall (waits forever, signals aside); else nothing.
void os_test_fault(int rank, int64_t step);
