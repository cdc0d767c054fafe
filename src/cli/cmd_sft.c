// omnishard sft: parse the ms-swift style flags, start MPI, run the training loop.
#include "core/err.h"
#include "train/args.h"
#include "train/sft.h"
#include "zero/comm.h"

int cmd_sft(int argc, char **argv) {
    comm_init(&argc, &argv);
    os_sft_args a;
    int rc = os_sft_args_parse(&a, argc, argv);
    if (rc == 1) {
        comm_finalize();
        return 0;
    }
    comm_set_timeout(rc == 0 ? a.ddp_timeout : OS_DDP_TIMEOUT_DEFAULT);
    int failed = comm_any_failed(rc < 0);   // ranks launched with different flags still stop together
    if (failed) {
        if (rc < 0) os_info("omnishard sft: %s", os_errmsg());
        else os_info("omnishard sft: the options given to %d other rank(s) are invalid", failed);
        comm_finalize();
        return 2;
    }
    rc = os_sft_run(&a);
    comm_finalize();
    return rc;
}
