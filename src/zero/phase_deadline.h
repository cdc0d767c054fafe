// A deadline for the MPI calls outside any collective: MPI_Init and MPI_Finalize wait for every rank of the job
// (Open MPI's start-up and shut-down fences), so a rank that never starts or never finishes would hold the others
// there forever. comm.c arms a guard thread around each call; when the call has not returned within the deadline
// (--ddp_timeout, docs/operations.md "Timeouts and stuck ranks") the guard prints which call, the bound and what it
// means, and ends this process with exit status 1 (mpirun then ends the rest of the job). Only comm.c and coll_nccl.c include this.
#pragma once

#define PD_MAX_SECONDS 31536000.0   // a year: a longer deadline waits a year (--ddp_timeout refuses more)

// start the guard for `phase` ("MPI_Init", "MPI_Finalize"); seconds <= 0: no deadline (nothing is started)
void pd_arm(const char *phase, double seconds);
// the call returned: stop the guard (and wait for its thread to end)
void pd_disarm(void);
