// The f32 collectives as one table: each way their bytes can travel between ranks is one transport of its own
// file, and zero/transport.c picks one table once at start-up (docs/zero.md "Transport"); comm.c calls it.
//   coll_inplace.c: MPI on host memory, in place (the CPU backend; one rank);
//   coll_staged.c:  MPI through host buffers (a backend whose memory is not the host's: the guard backend, ranks
//                   sharing one GPU): down, coll_inplace's collective on the host copy, up;
//   coll_nccl.c:    the backend's device transport (kernels/devcomm.h: NCCL between GPUs) on its own stream.
// Shapes and rules are comm.h's (full[size * shard_n], shard[shard_n], buf[n]; backend memory). Every collective
// gets its watchdog sequence number from comm.c (wd_begin, taken before the call, the same on every rank).
#pragma once
#include <stdint.h>

// what every transport's request starts with (comm.h's comm_req); the transport that made it tests and frees it
struct comm_req {
    int done;        // 1: completed (comm_test said so)
    int64_t seq;     // the collective's watchdog number (-1: one rank, nothing travels)
};
typedef struct comm_req comm_req;

typedef struct {
    const char *name;
    void (*allreduce_sum_f32)(float *buf, int64_t n, int64_t seq);
    void (*allgather_f32)(float *full, int64_t shard_n, int64_t seq);
    comm_req *(*iallgather_f32)(float *full, int64_t shard_n, int64_t seq);
    comm_req *(*ireduce_scatter_sum_f32)(float *full, float *shard, int64_t shard_n, int64_t seq);
    int (*test)(comm_req *r);   // 1: completed (the buffers are the caller's again)
    void (*wait)(comm_req *r);  // complete under the watchdog's deadline, then free
    void (*close)(void);        // NULL, or at comm_finalize before MPI_Finalize (every collective ended first)
} comm_transport;

// a transport file's table, from its static functions named as the members, with .name (and .close) given
#define COMM_TRANSPORT_TABLE(...)                                                                                 \
    {.allreduce_sum_f32 = allreduce_sum_f32, .allgather_f32 = allgather_f32,                                    \
     .iallgather_f32 = iallgather_f32, .ireduce_scatter_sum_f32 = ireduce_scatter_sum_f32, .test = test,          \
     .wait = wait, __VA_ARGS__}
