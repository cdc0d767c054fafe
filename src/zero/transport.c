// The choice of the collectives' way (transport.h).
#include "zero/transport.h"
#include "core/err.h"
#include "core/knobs.h"
#include <stdio.h>

// the first two ranks on one GPU of one host (*a < *b), or 0 when every rank has a device of its own
static int shared_gpu(const comm_peer *p, int n, int *a, int *b) {
    for (int j = 1; j < n; j++)
        for (int i = 0; i < j; i++)
            if (p[i].host == p[j].host && p[i].device == p[j].device) return *a = i, *b = j, 1;
    return 0;
}

int comm_choose_way(const comm_peer *p, int n, int forced, char *why, size_t whyn) {
    why[0] = 0;
    if (n < 2) return COMM_WAY_HOST;
    int nodev = -1, a, b;
    for (int r = 0; r < n && nodev < 0; r++)
        if (p[r].device < 0) nodev = r;
    if (nodev >= 0) {
        if (forced == OS_COMM_NCCL)
            return os_errf("OMNISHARD_COMM=nccl: rank %d runs on the CPU (--device cpu); NCCL needs --device cuda on "
                           "every rank", nodev);
        return COMM_WAY_HOST;
    }
    if (forced == OS_COMM_MPI) {
        snprintf(why, whyn, "collectives: MPI through host buffers (OMNISHARD_COMM=mpi), %d ranks", n);
        return COMM_WAY_HOST;
    }
    if (shared_gpu(p, n, &a, &b)) {
        if (forced == OS_COMM_NCCL)
            return os_errf("OMNISHARD_COMM=nccl: ranks %d and %d share GPU %d of one host, which NCCL refuses; give "
                           "each rank a GPU of its own or unset OMNISHARD_COMM (MPI through host buffers)", a, b,
                           p[a].device);
        snprintf(why, whyn, "collectives: MPI through host buffers, not NCCL: ranks %d and %d share GPU %d of one host "
                 "(NCCL needs a GPU per rank)", a, b, p[a].device);
        return COMM_WAY_HOST;
    }
    for (int r = 0; r < n; r++)
        if (!p[r].usable)
            return os_errf("collectives between GPUs: rank %d cannot run NCCL (its own message above says why: "
                           "libnccl.so.2 not found); install NCCL (pip install nvidia-nccl-cu13) or set "
                           "OMNISHARD_COMM=mpi to send them through host buffers over MPI", r);
    snprintf(why, whyn, "collectives: NCCL between the GPUs of %d ranks%s", n,
             forced == OS_COMM_NCCL ? " (OMNISHARD_COMM=nccl)" : "");
    return COMM_WAY_DEVICE;
}
