// The collective watchdog (docs/operations.md, "Timeouts and stuck ranks"): comm.c's own completion path. Every
// collective gets a sequence number when it starts (the same number on every rank, since every rank issues the same
// collectives in the same order) and is completed by wd_wait, which polls MPI_Testall against the deadline
// (--ddp_timeout). When a wait passes the deadline, or another rank reports that its own did, this rank asks every
// other rank where it is (point-to-point messages on MPI_COMM_WORLD with tags of their own), prints which collective,
// which step and which ranks did not arrive, and ends the job (MPI_Abort). MPI is called only in zero/ (docs/zero.md).
// comm.c and the transports (coll_*.c) include this header; infer/infer_run.c too, for wd_timeout only.
#pragma once
#include <mpi.h>
#include <stdint.h>

enum wd_kind {
    WD_BARRIER, WD_BCAST, WD_ALLREDUCE, WD_ALLGATHER, WD_REDUCE_SCATTER, WD_ALLTOALL, WD_AGREE_OPTIONS, WD_AGREE_STATUS,
    WD_NKINDS
};

// collective right after MPI_Init (every rank's process id and namespace, for the check of dead peers)
void wd_init(int rank, int size);
// the text a rank ending in a collective adds to its last line ("Last complete checkpoint: ...")
void wd_set_note(const char *note);
void wd_set_timeout(double seconds);   // <= 0: no deadline
double wd_timeout(void);
void wd_set_step(int64_t step);
// what the job is doing, named by the report instead of the step ("while decoding records 8-15 of 960"); "": the step
void wd_set_phase(const char *phase);
// a new collective of this kind moving `bytes` per rank starts: returns its sequence number
int64_t wd_begin(enum wd_kind kind, int64_t bytes);
// complete n requests of collective seq, or report and end the job at the deadline
void wd_wait(MPI_Request *r, int n, int64_t seq);
// the same wait for a collective another transport runs (NCCL): until done(arg) returns 1, under the same
// deadline, reports and peer checks. done is called often: it must not block
void wd_poll(int (*done)(void *arg), void *arg, int64_t seq);
// called first when the job ends inside a wait (the deadline, another rank's report, a dead peer): NCCL's
// communicator is aborted there, so that its kernels end on every rank (ncclCommAbort)
void wd_set_abort(void (*abort_transport)(void));
