// The transport. This file pair (with watchdog.c, which completes every request) is the only code that calls MPI. Every call is collective unless noted and
// must be issued by every rank in the same order (the step's schedule depends only on model and config).
// Counts are in elements and may exceed INT_MAX (split internally).
#pragma once
#include <stdint.h>

// MPI_Init; sets os_rank (when size > 1) and the abort hook. MPI_Init and MPI_Finalize wait for every rank of the
// job: each is bounded by the timeout set so far (comm_set_timeout; set it before comm_init), and a call that does
// not return in time prints which one and ends this process with exit 1 (zero/phase_deadline.h)
void comm_init(int *argc, char ***argv);
// OMNISHARD_COMM's choice (core/knobs.h: OS_COMM_AUTO, the default, OS_COMM_MPI or OS_COMM_NCCL): main sets it
// once at start, before comm_init
void comm_force_way(int forced);
void comm_finalize(void);
int comm_rank(void);
int comm_size(void);
_Noreturn void comm_abort(int code);      // stop every rank now (MPI_Abort)
// The collective watchdog (docs/operations.md): a collective that does not complete within `seconds` (<= 0: no
// deadline; 1800 until set; MPI needs not be started) ends the job with a report naming the collective, the step and the ranks that did not
// arrive. The step is only for those messages (0: start-up).
void comm_set_timeout(double seconds);
// the text (the last complete checkpoint) a rank adds when it ends inside a collective: a peer rank died, or a stop
// signal came and the collective cannot complete
void comm_set_stop_note(const char *note);
void comm_set_step(int64_t step);
// what the job is doing, named by a collective's timeout report instead of the step (NULL or "": the step)
void comm_set_phase(const char *phase);

void comm_barrier(void);
void comm_bcast(void *buf, int64_t bytes, int root);
void comm_allreduce_sum_f32(float *buf, int64_t n);
void comm_allreduce_sum_f64(double *buf, int64_t n);
void comm_allreduce_max_i64(int64_t *buf, int64_t n);
void comm_allreduce_min_i64(int64_t *buf, int64_t n);
// in place: rank r's slice is full[r*shard_n, (r+1)*shard_n); afterwards full holds every slice
void comm_allgather_f32(float *full, int64_t shard_n);
// shard[shard_n] = sum over ranks of full[rank*shard_n ...] (full is [size*shard_n] and is used as scratch: its
// contents are destroyed); no memory is allocated
void comm_reduce_scatter_sum_f32(float *full, float *shard, int64_t shard_n);
// gather bytes from every rank to all: out[size * bytes]
void comm_allgather_bytes(const void *in, void *out, int64_t bytes);
// each rank p gets sbytes[p] bytes from send + soff[p]; from each rank p, rbytes[p] bytes arrive at recv + roff[p]
// (each rank's rbytes[p] equal to p's sbytes[rank]); counts and offsets at most INT_MAX
void comm_alltoallv_bytes(const void *send, const int64_t *sbytes, const int64_t *soff, void *recv,
                          const int64_t *rbytes, const int64_t *roff);

// Non-blocking collectives. A request is started on every rank in the same order like any collective; comm_test
// advances it without blocking (MPI progress, and for the reduce-scatter the ring's adds and next steps) and says
// whether it completed; comm_wait completes it under the watchdog's deadline (counted from the wait) and frees it.
// The buffers belong to the request until comm_test returned 1 or comm_wait returned. At most a few in flight.
typedef struct comm_req comm_req;
comm_req *comm_iallgather_f32(float *full, int64_t shard_n);                     // as comm_allgather_f32
comm_req *comm_ireduce_scatter_sum_f32(float *full, float *shard, int64_t shard_n);   // as comm_reduce_scatter_sum_f32
int comm_test(comm_req *r);   // 1: completed (r NULL: 1)
void comm_wait(comm_req *r);

// comm_allgather_bytes and comm_bcast for the start-up agreement (src/train/agree.c): the watchdog names them so
void comm_agree_allgather_bytes(const void *in, void *out, int64_t bytes);
void comm_agree_bcast(void *buf, int64_t bytes, int root);
// Agreement on failure: each rank passes its local status (0 ok, non-zero failed); returns the number of ranks
// that failed (0 = all fine). Used after steps that read rank-local input so all ranks stop together.
int comm_any_failed(int local_failed);
