// The device seam's communication part: a backend whose memory is not the host's may bring a transport that runs
// zero/comm.c's f32 collectives between devices itself (the CUDA backend: NCCL, src/cuda/cu_nccl.c). zero/coll_nccl.c
// alone calls it (zero/transport.c asks for the rank's device and loads the library) (docs/zero.md "Transport", docs/design.md "Streams and events"); cli/ sets os_dc when it opens
// such a backend. Every collective runs on the transport's own stream, ordered against the backend's compute
// stream by events: it starts after every op issued before it, and an op issued after join(h) runs after it.
#pragma once
#include <stdint.h>

typedef struct os_dc_op os_dc_op;   // one collective in flight (an event on the transport's stream)

typedef struct {
    const char *name;                  // "NCCL"
    int64_t id_bytes;                  // the size of the communicator's id (ncclUniqueId)
    // 0 when the transport's library loads, else -1 with the reason in os_errmsg (the library, where it looked)
    int (*load)(void);
    int (*device)(void);               // the GPU this rank uses (its index on its host)
    int (*make_id)(void *id);          // rank 0: a new communicator id (0, or -1 + os_errmsg)
    int (*open)(const void *id, int nranks, int rank);   // every rank, the same id: 0, or -1 + os_errmsg
    // the collectives (shapes as comm.h's: full[nranks * shard_n], shard[shard_n], buf[n]; backend memory),
    // enqueued after the compute stream's work so far; the handle completes by test or join
    os_dc_op *(*allgather_f32)(float *full, int64_t shard_n);
    os_dc_op *(*reduce_scatter_sum_f32)(const float *full, float *shard, int64_t shard_n);
    os_dc_op *(*allreduce_sum_f32)(float *buf, int64_t n);
    int (*test)(os_dc_op *h);          // 1: complete on the device (host may observe), 0: not yet; -1 + os_errmsg
    void (*join)(os_dc_op *h);         // the compute stream's later work waits for h (no host wait)
    void (*release)(os_dc_op *h);      // h done with (after test said 1, or after join: the event is reused later)
    // 0, or -1 with the communicator's asynchronous error in os_errmsg (ncclCommGetAsyncError: a peer gone, a
    // network error); polled while the host waits
    int (*error)(void);
    void (*abort)(void);               // tear the communicator down now (ncclCommAbort): its kernels end
    void (*close)(void);               // at the end of the run (every rank)
} os_devcomm;

extern const os_devcomm *os_dc;        // NULL: none (the CPU and guard backends)
// the backend's host waits (its download) call this, when set, instead of blocking: it must return once
// ready(arg) returns 1, and meanwhile watches the collectives in flight (zero/coll_nccl.c: the collective watchdog)
extern void (*os_dc_host_wait)(int (*ready)(void *arg), void *arg);
