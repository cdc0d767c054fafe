// The choice of the collectives' way and its table (transport.h).
#include "zero/transport.h"
#include "zero/coll_inplace.h"
#include "zero/coll_nccl.h"
#include "zero/coll_staged.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "kernels/devcomm.h"
#include "kernels/ops.h"
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

// every rank's host, GPU and whether it can load the device transport, gathered; the way chosen from them
static int gather_and_choose(int rank, int size, int forced) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    int64_t mine[3] = {(int64_t)os_fnv1a(OS_FNV_BASIS, host, strlen(host)), os_dc ? os_dc->device() : -1, 0};
    char load_err[1024] = "";
    if (os_dc && mine[1] >= 0 && forced != OS_COMM_MPI) {
        mine[2] = os_dc->load() == 0;
        if (!mine[2]) snprintf(load_err, sizeof load_err, "%s", os_errmsg());
    }
    int64_t *all = os_alloc(sizeof mine * (size_t)size, "ranks' devices");
    // like wd_init's, right after MPI_Init and outside the watchdog's numbering: the collectives' sequence numbers
    // (and so every watchdog message) are those of a run before the device transport existed
    MPI_Allgather(mine, 3, MPI_INT64_T, all, 3, MPI_INT64_T, MPI_COMM_WORLD);
    comm_peer *p = os_alloc(sizeof *p * (size_t)size, "ranks' devices");
    for (int r = 0; r < size; r++) p[r] = (comm_peer){(uint64_t)all[3 * r], (int)all[3 * r + 1], (int)all[3 * r + 2]};
    char why[512];
    int way = comm_choose_way(p, size, forced, why, sizeof why);
    os_free(all), os_free(p);
    if (way < 0) {   // every rank decided the same: each says why, the ranks without the library their reason
        if (rank == 0 || load_err[0])
            fprintf(stderr, "omnishard: rank %d: %s\n", rank, load_err[0] ? load_err : os_errmsg());
        return -1;
    }
    if (why[0]) os_info("%s", why);
    return way;
}

const comm_transport *transport_open(int rank, int size, int forced) {
    if (size < 2) return coll_inplace_open(rank, size);
    int way = gather_and_choose(rank, size, forced);
    if (way < 0) return NULL;
    if (way == COMM_WAY_DEVICE) return coll_nccl_open(rank, size);
    return os_k->host_memory ? coll_inplace_open(rank, size) : coll_staged_open(rank, size);
}
