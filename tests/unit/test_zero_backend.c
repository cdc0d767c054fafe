// Unit test of the ZeRO runtime on a backend whose memory the host cannot read (the guard backend, kernels/ops.h;
// one rank, no MPI). Its buckets — parameters (whole and sharded), gathered buckets, gradients, moments — are the
// backend's memory: a host read of one stops with SIGSEGV (in a child process). Everything the runtime does to them
// goes through the seam and gives the CPU backend's bits: the initial fill (uploaded), a row fetch (replicated), the
// gradient's mask, the non-finite check (answered on the backend), the gradient read, AdamW and the zeroing after it.
#include "check.h"
#include "kernels/ops.h"
#include "zero/runtime.h"
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SEGV_END (-1)   // AddressSanitizer's SEGV handler: a report and exit 1
#else
#define SEGV_END SIGSEGV
#endif

// bucket 0: "e.w" [6, 4] trained on rows 2..5 (elements [8, 24)); bucket 1: "n.w" [5] and "n.b" [3], trained
static void build(zr_registry *r) {
    zr_reg_init(r, 2, 3);
    zr_reg_bucket(r, "e", 1, 8, 24);
    zr_reg_tensor(r, "e.w", 2, (const int64_t[]){6, 4});
    zr_reg_bucket(r, "n", 1, 0, 8);
    zr_reg_tensor(r, "n.w", 1, (const int64_t[]){5});
    zr_reg_tensor(r, "n.b", 1, (const int64_t[]){3});
}

static int fill_vals(void *ctx, int tensor, int64_t start, int64_t n, float *dst) {
    (void)ctx;
    for (int64_t j = 0; j < n; j++) dst[j] = 0.25f * (float)(tensor * 100 + start + j) - 3.0f;
    return 0;
}

// how a child reading p on the host ends: its signal (or -exit status), 0 when it goes on
static int host_read_ends(const float *p) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        printf("read %g\n", *(const volatile float *)p);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : -WEXITSTATUS(st);
}

typedef struct {
    float rows[2 * 4], grads[24 + 8], after[24 + 8];
    int bad_grad, bad_param;
} results;

// one short life of a runtime at `stage` on the backend in use: what the host read back through the runtime
static void live(int stage, results *o, int guarded) {
    zr_registry reg;
    build(&reg);
    zr_runtime rt;
    zr_init(&rt, &reg, stage, 0, 1);
    for (int b = 0; b < 2; b++) CHECK(zr_fill(&rt, b, fill_vals, NULL) == 0, "fill");
    if (guarded) {
        CHECK(host_read_ends(zr_local(&rt, 0, ZR_PARAMETERS).p) == SEGV_END, "stage %d: parameters on the host", stage);
        CHECK(host_read_ends(zr_local(&rt, 1, ZR_EXP_AVG).p) == SEGV_END, "stage %d: moments on the host", stage);
        CHECK(host_read_ends(zr_gather(&rt, 1)) == SEGV_END, "stage %d: a gathered bucket on the host", stage);
        zr_release(&rt, 1);
    }
    if (stage < 3) {   // sharded: collective (MPI). The rows land in the backend's memory, read by a download
        float *rows = os_k->alloc(sizeof o->rows, "rows");
        zr_read_rows(&rt, 0, (const int32_t[]){1, 4}, 2, rows);
        os_k->download(o->rows, rows, sizeof o->rows);
        os_k->free(rows);
    }
    // a gradient: every element set (one NaN in bucket 1), the untrained rows of bucket 0 masked at the close
    float g[24];
    for (int i = 0; i < 24; i++) g[i] = 0.5f - 0.125f * (float)i;
    for (int b = 0; b < 2; b++) {
        float *d = zr_grad_open(&rt, b);
        if (guarded) CHECK(host_read_ends(d) == SEGV_END, "stage %d: a gradient bucket on the host", stage);
        os_k->upload(d, g, (int64_t)sizeof(float) * (b ? 8 : 24));
        if (b) os_k->upload(d + 6, &(float){NAN}, sizeof(float));
        zr_grad_close(&rt, b);
    }
    zr_reduce_grads(&rt);
    o->bad_grad = zr_first_nonfinite(&rt, 1);
    o->bad_param = zr_first_nonfinite(&rt, 0);
    zr_read_grads(&rt, 0, o->grads);
    zr_read_grads(&rt, 1, o->grads + 24);
    o->grads[24 + 6] = 0.0f;   // NaN != NaN: compared as checked above
    zr_adamw_step(&rt, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f, 1);
    zr_read_bucket(&rt, 0, o->after);
    zr_read_bucket(&rt, 1, o->after + 24);
    for (int b = 0; b < 2; b++) {   // AdamW zeroed the gradients: a second check finds them finite
        zr_grad_open(&rt, b);
        zr_grad_close(&rt, b);
    }
    zr_reduce_grads(&rt);
    CHECK(zr_first_nonfinite(&rt, 1) == -1, "stage %d: gradients zeroed after AdamW", stage);
    zr_free(&rt);
}

int main(void) {
    for (int stage = 0; stage <= 3; stage++) {
        results want, got;
        memset(&want, 0, sizeof want), memset(&got, 0, sizeof got);
        os_k = &os_ops_cpu;
        live(stage, &want, 0);
        os_k = os_ops_guard();
        live(stage, &got, 1);
        os_k = &os_ops_cpu;
        CHECK(want.bad_grad == 2 && got.bad_grad == 2, "stage %d: first non-finite gradient %d / %d, expected n.b (2)",
              stage, want.bad_grad, got.bad_grad);
        CHECK(want.bad_param == -1 && got.bad_param == -1, "stage %d: parameters finite", stage);
        CHECK(!memcmp(&want, &got, sizeof want), "stage %d: the guard's rows, gradients and updated parameters are "
              "the CPU backend's bits", stage);
        CHECK((stage == 3 || want.rows[4] == 0.25f * 16 - 3.0f) && want.grads[0] == 0.0f && want.grads[8] == -0.5f,
              "stage %d: rows and mask as filled", stage);
    }
    return check_report("zero_backend");
}
