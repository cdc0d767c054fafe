// MPI through host buffers: the f32 collectives' transport when the backend's memory is not the host's and no
// device transport runs them (the guard backend; ranks sharing one GPU; OMNISHARD_COMM=mpi). What the rank sends is
// downloaded into a host buffer, coll_inplace's collective (and the ring's adds) runs on it, and what it received
// is uploaded when the collective completes: the same additions in the same order, the same bits as in place.
#pragma once
#include "zero/collectives.h"

const comm_transport *coll_staged_open(int rank, int size);
