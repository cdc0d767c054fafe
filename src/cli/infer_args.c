// omnishard infer's ranks stop together (infer_args.h).
#include "cli/infer_args.h"
#include "core/err.h"
#include "zero/comm.h"
#include <stdio.h>

int os_infer_failed(int rc) {
    int n = comm_any_failed(rc < 0);
    if (!n) return 0;
    if (rc < 0 && os_rank >= 0) fprintf(stderr, "omnishard infer: rank %d: %s\n", os_rank, os_errmsg());
    else if (rc < 0) fprintf(stderr, "omnishard infer: %s\n", os_errmsg());
    else if (comm_rank() == 0) fprintf(stderr, "omnishard infer: stopping: %d other rank(s) reported an error\n", n);
    return 1;
}
