// The backend's device transport (kernels/devcomm.h: NCCL between GPUs) as the f32 collectives' table, with its
// completion path under the collective watchdog (docs/design.md "Streams and events").
#pragma once
#include "zero/collectives.h"

// every rank: the communicator opened from rank 0's id (broadcast over MPI), bounded like MPI_Init; the
// watchdog's abort and the backend's host wait (os_dc_host_wait) set to this transport's
const comm_transport *coll_nccl_open(int rank, int size);
