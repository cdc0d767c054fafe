// Which way comm.c's f32 collectives travel (docs/zero.md "Transport"): decided once at start-up from every rank's
// host, GPU and device transport, and the knob OMNISHARD_COMM (main hands it to comm_force_way); the way's table of
// collectives (zero/collectives.h) is what comm.c calls from then on. The choice itself is arithmetic (comm_choose_way, unit-tested in
// tests/unit/test_transport.c): every rank decides the same from the same facts.
#pragma once
#include "zero/collectives.h"
#include "core/knobs.h"   // OS_COMM_AUTO, OS_COMM_MPI, OS_COMM_NCCL: OMNISHARD_COMM's values
#include <stddef.h>
#include <stdint.h>

enum comm_way {
    COMM_WAY_HOST,     // MPI on host memory: in place (the CPU backend), else staged through host buffers
    COMM_WAY_DEVICE,   // the backend's device transport (NCCL between GPUs) on its own stream
};

// one rank's facts: its host (any key equal on the ranks of one machine: comm.c hashes the host name), the GPU it
// uses (-1: none, the CPU backend), and whether its device transport can run (0: no transport in this build or
// its library is missing; the rank says why itself)
typedef struct {
    uint64_t host;
    int device;
    int usable;
} comm_peer;

// the way for n ranks of facts p under forced (OS_COMM_AUTO, OS_COMM_MPI, OS_COMM_NCCL):
// one rank, or a rank without a GPU: the host; forced mpi: the host; two ranks on one GPU of one host: the host
// (NCCL refuses two ranks on one device), forced nccl then an error; distinct GPUs: the device transport, an error
// when a rank cannot run it. `why` gets one line saying what was chosen and why (empty with one rank). Returns the
// way, or -1 with the reason in os_errmsg (naming the ranks, the GPU, the knob).
int comm_choose_way(const comm_peer *p, int n, int forced, char *why, size_t whyn);

// Right after MPI_Init, every rank: the ranks' facts gathered (outside the watchdog's numbering, like wd_init's
// exchange), the way chosen, said once (rank 0) when it is not MPI in place, and its table opened: MPI in place
// (the backend's memory is the host's, or one rank), MPI through host buffers, or the device transport (NCCL, its
// communicator opened). NULL when the way cannot run: each rank has printed why; the caller ends the job (exit 2).
const comm_transport *transport_open(int rank, int size, int forced);
