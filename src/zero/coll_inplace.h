// MPI on host memory, in place: the f32 collectives' transport when the backend's memory is the host's (the CPU
// backend) or with one rank (zero/collectives.h), and the chunked MPI calls comm.c's control plane shares.
#pragma once
#include "zero/collectives.h"
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

// the table for this rank of size ranks (size 1: nothing travels; a reduce-scatter copies its slice)
const comm_transport *coll_inplace_open(int rank, int size);
// an in-place all-reduce of n elements of type t (es bytes each) with op, in chunks of at most 2^30 elements,
// completed under the watchdog as collective seq; and a broadcast of bytes from root the same way
void mpi_allreduce(void *buf, int64_t n, MPI_Datatype t, size_t es, MPI_Op op, int64_t seq);
void mpi_bcast(void *buf, int64_t bytes, int root, int64_t seq);
