// Unit test of the collectives' way (src/zero/transport.c, comm_choose_way): one rank or a CPU rank: the host;
// distinct GPUs (one host or several): the device transport (NCCL); two ranks on one GPU of one host: the host
// (MPI staged), with the ranks and the GPU named; the same GPU index on two hosts is distinct; OMNISHARD_COMM=mpi
// forces the host; =nccl forces NCCL and is an error where NCCL cannot run (a shared GPU, a CPU rank); a rank
// without the library is an error naming it and the knob.
#include "zero/transport.h"
#include "core/err.h"
#include "core/knobs.h"
#include "check.h"
#include <string.h>

static int way(const comm_peer *p, int n, int forced, char *why) { return comm_choose_way(p, n, forced, why, 256); }

int main(void) {
    char why[256];
    const comm_peer one[1] = {{1, 0, 1}};
    CHECK(way(one, 1, OS_COMM_AUTO, why) == COMM_WAY_HOST && !why[0], "one rank: host, nothing said");
    CHECK(way(one, 1, OS_COMM_NCCL, why) == COMM_WAY_HOST, "one rank: nothing travels, even when forced");

    const comm_peer two_gpus[2] = {{7, 0, 1}, {7, 1, 1}};
    CHECK(way(two_gpus, 2, OS_COMM_AUTO, why) == COMM_WAY_DEVICE, "distinct GPUs: NCCL");
    CHECK(strstr(why, "NCCL") && strstr(why, "2 ranks"), "says NCCL: %s", why);
    CHECK(way(two_gpus, 2, OS_COMM_NCCL, why) == COMM_WAY_DEVICE && strstr(why, "OMNISHARD_COMM=nccl"), "forced: %s", why);
    CHECK(way(two_gpus, 2, OS_COMM_MPI, why) == COMM_WAY_HOST && strstr(why, "OMNISHARD_COMM=mpi"),
          "forced mpi: the host: %s", why);

    const comm_peer two_hosts[4] = {{7, 0, 1}, {7, 1, 1}, {9, 0, 1}, {9, 1, 1}};   // GPU 0 on each of two hosts
    CHECK(way(two_hosts, 4, OS_COMM_AUTO, why) == COMM_WAY_DEVICE, "GPU 0 of two hosts are two GPUs: NCCL");

    const comm_peer shared[3] = {{7, 0, 1}, {7, 1, 1}, {7, 1, 1}};   // ranks 1 and 2 on GPU 1
    CHECK(way(shared, 3, OS_COMM_AUTO, why) == COMM_WAY_HOST, "a shared GPU: MPI staged");
    CHECK(strstr(why, "ranks 1 and 2 share GPU 1") && strstr(why, "MPI"), "names the ranks and GPU: %s", why);
    CHECK(way(shared, 3, OS_COMM_NCCL, why) == -1 && strstr(os_errmsg(), "ranks 1 and 2 share GPU 1") &&
              strstr(os_errmsg(), "OMNISHARD_COMM=nccl"), "forced nccl on a shared GPU: error: %s", os_errmsg());
    CHECK(way(shared, 3, OS_COMM_MPI, why) == COMM_WAY_HOST, "forced mpi on a shared GPU: the host");

    const comm_peer cpu[2] = {{7, -1, 0}, {7, -1, 0}};
    CHECK(way(cpu, 2, OS_COMM_AUTO, why) == COMM_WAY_HOST && !why[0], "CPU ranks: MPI (in place), nothing said");
    CHECK(way(cpu, 2, OS_COMM_MPI, why) == COMM_WAY_HOST, "CPU ranks forced mpi: the host");
    CHECK(way(cpu, 2, OS_COMM_NCCL, why) == -1 && strstr(os_errmsg(), "rank 0 runs on the CPU"),
          "forced nccl on the CPU: error: %s", os_errmsg());

    const comm_peer nolib[2] = {{7, 0, 1}, {7, 1, 0}};
    CHECK(way(nolib, 2, OS_COMM_AUTO, why) == -1 && strstr(os_errmsg(), "rank 1 cannot run NCCL") &&
              strstr(os_errmsg(), "libnccl.so.2") && strstr(os_errmsg(), "OMNISHARD_COMM=mpi"),
          "a rank without NCCL: error naming it: %s", os_errmsg());
    CHECK(way(nolib, 2, OS_COMM_MPI, why) == COMM_WAY_HOST, "without NCCL, forced mpi runs staged");
    const comm_peer nolib_shared[2] = {{7, 0, 0}, {7, 0, 0}};
    CHECK(way(nolib_shared, 2, OS_COMM_AUTO, why) == COMM_WAY_HOST, "one GPU needs no NCCL library");
    return check_report("test_transport");
}
