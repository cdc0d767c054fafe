// Unit test of the guard backend of the device seam (kernels/ops_guard.c): its buffers are zeroed, reached through
// upload/download and the reductions (xent_fwd_bwd, sumsq: the same values as the CPU backend's), and a host read
// or write of one outside its calls stops the process with SIGSEGV (checked in a child process; under
// AddressSanitizer, whose handler reports the SEGV and exits 1, that exit).
#include "kernels/ops.h"
#include "check.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SEGV_END (-1)   // AddressSanitizer's SEGV handler: a report and exit 1
#else
#define SEGV_END SIGSEGV
#endif

// how a child that runs touch(p) ends: its signal, -(exit status) when it exits with one, 0 when it goes on
static int child_signal(void (*touch)(double *), double *p) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        touch(p);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : -WEXITSTATUS(st);
}
static void host_read(double *p) { printf("read %g\n", *(volatile double *)p); }
static void host_write(double *p) { *(volatile double *)p = 1.0; }

int main(void) {
    const os_ops *g = os_ops_guard(), *c = &os_ops_cpu;
    CHECK(g->gemm == c->gemm && g->sumsq != c->sumsq, "guard: the CPU kernels, its own reductions");
    double *d = g->alloc(3 * sizeof(double), "test scalars"), h[3] = {1, 1, 1};
    g->download(h, d, sizeof h);
    CHECK(h[0] == 0 && h[1] == 0 && h[2] == 0, "alloc zeroes: %g %g %g", h[0], h[1], h[2]);
    CHECK(child_signal(host_read, d) == SEGV_END, "a host read of a guard buffer stops with SIGSEGV");
    CHECK(child_signal(host_write, d) == SEGV_END, "a host write of a guard buffer stops with SIGSEGV");
    double hc = 0.0;
    CHECK(child_signal(host_read, &hc) == 0, "a host read of host memory goes on");

    // sumsq and the cross-entropy into guard scalars: the CPU backend's values, bit for bit
    float x[7] = {0.5f, -1.25f, 3.0f, 0.0f, 2.5f, -0.75f, 1.0f}, lg[2][7], lc[2][7];
    int32_t y[2] = {2, 5};
    for (int i = 0; i < 7; i++) lg[0][i] = lc[0][i] = x[i], lg[1][i] = lc[1][i] = -x[i];
    double want[2] = {0.25, 0}, got[2];   // the sums start from 0.25 (accumulated into)
    int64_t nc = 0, *dc = g->alloc(sizeof(int64_t), "test count"), gc = -1;
    g->upload(d + 1, &want[0], sizeof(double));
    g->sumsq(x, 7, d);
    g->xent_fwd_bwd(&lg[0][0], 7, y, 2, 7, 0.5f, d + 1, dc);
    c->sumsq(x, 7, &want[1]);
    double s = want[1];
    c->xent_fwd_bwd(&lc[0][0], 7, y, 2, 7, 0.5f, &want[0], &nc);
    g->download(got, d, sizeof got);
    g->download(&gc, dc, sizeof gc);
    CHECK(got[0] == s && got[1] == want[0] && gc == nc, "guard sums %.17g %.17g (%lld) vs cpu %.17g %.17g (%lld)",
          got[0], got[1], (long long)gc, s, want[0], (long long)nc);
    int same = 1;
    for (int i = 0; i < 14; i++) same &= (&lg[0][0])[i] == (&lc[0][0])[i];
    CHECK(same, "the cross-entropy's gradients in place as the CPU backend's");
    g->free(d), g->free(dc), g->free(NULL);
    return check_report("ops_guard");
}
