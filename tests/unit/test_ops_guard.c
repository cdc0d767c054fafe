// Unit test of the guard backend of the device seam (kernels/ops_guard.c): its buffers are zeroed, reached through
// upload/download and every other member (each opens the buffers it is given for the call only: the CPU
// backend's values, and the buffers closed again after), and a host read or write of one outside its calls stops
// the process with SIGSEGV (checked in a child process; under AddressSanitizer, whose handler reports the SEGV and
// exits 1, that exit). A product opens the bf16 copy bound to its operand; strict mode (the default) stops a member
// given host memory, naming the member and the argument; the members run in order at download and free only.
#include "kernels/ops.h"
#include "kernels/kernels.h"
#include "core/knobs.h"
#include "check.h"
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SEGV_END (-1)   // AddressSanitizer's SEGV handler: a report and exit 1
#else
#define SEGV_END SIGSEGV
#endif

// how a child that runs touch(p) ends: its signal, -(exit status) when it exits with one, 0 when it goes on; its
// stderr in err (when not NULL)
static int child_end(void (*touch)(void *), void *p, char *err, size_t n) {
    int fd[2];
    if (pipe(fd)) return 99;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2), close(fd[0]);
        touch(p);
        _exit(0);
    }
    close(fd[1]);
    size_t k = 0;
    ssize_t r;
    char sink[256];
    while ((r = read(fd[0], err && k + 1 < n ? err + k : sink, err && k + 1 < n ? n - 1 - k : sizeof sink)) > 0)
        if (err && k + 1 < n) k += (size_t)r;
    if (err) err[k] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : -WEXITSTATUS(st);
}
static int child_signal(void (*touch)(void *), void *p) { return child_end(touch, p, NULL, 0); }
static void host_read(void *p) { printf("read %g\n", *(volatile double *)p); }
static void host_write(void *p) { *(volatile double *)p = 1.0; }

// strict: add given a host operand b (p: a guard buffer of 4 floats)
static void strict_add_host(void *p) {
    float h[4] = {1, 2, 3, 4};
    os_guard_set_strict(1);
    os_ops_guard()->add(p, p, h, 4);
}
// strict: upload into host memory
static void strict_upload_host(void *p) {
    float h[4];
    os_guard_set_strict(1);
    os_ops_guard()->upload(h, p, sizeof h);
}

// matmul c = a @ b^T (2x3 @ (2x3)^T) on guard buffers, with bf16 products and b's bf16 copy (cast) in a guard
// buffer of its own read as a bf16 view (as the runtime's weights): the copy is read, so it must be opened; the
// result equals the CPU's product rounding b in the call
static void bound_product(void *arg) {
    const os_ops *g = os_ops_guard_open(1);
    int *ok = arg;
    float ha[6] = {0.3f, -1.7f, 2.2f, 0.9f, 1.1f, -0.4f}, hb[6] = {1.01f, 0.5f, -2.3f, 0.77f, -0.6f, 1.9f}, hc[4], want[4];
    float *a = g->alloc(sizeof ha, "a"), *b = g->alloc(sizeof hb, "b"), *c = g->alloc(sizeof hc, "c");
    void *r = g->alloc(6 * 2, "bf16 copy of b");
    os_tensor none = os_tensor_none();
    g->upload(a, ha, sizeof ha), g->upload(b, hb, sizeof hb);
    g->cast(os_vec(r, OS_BF16, 6), os_vecf(b, 6));
    g->matmul(os_matf(c, 2, 2, 2), os_matf(a, 2, 3, 3), os_tensor_t(os_mat(r, OS_BF16, 2, 3, 3)), 1.0f, 0.0f, none, none);
    os_ops_cpu_open(1)->matmul(os_matf(want, 2, 2, 2), os_matf(ha, 2, 3, 3), os_tensor_t(os_matf(hb, 2, 3, 3)), 1.0f,
                               0.0f, none, none);
    g->download(hc, c, sizeof hc);
    *ok = !memcmp(hc, want, sizeof hc);
    printf("bound product %s\n", *ok ? "matches" : "differs");
    fflush(stdout);
    _exit(*ok ? 0 : 5);
}

// The queue: members run at download and free, not when called (v: a guard buffer of 4 floats holding cv[0..4)).
// A host array handed to a member (strict off) and changed before the next synchronisation gives the changed
// numbers, a host result read without a download is not there yet; an upload's source is read when called, and
// free runs the calls recorded before it
static void queue_checks(const os_ops *g, float *v, const float *cv) {
    float h[4] = {1, 2, 3, 4}, got[4], late[4], want[4];
    os_guard_set_strict(0);
    float *u = g->alloc(sizeof got, "u");
    g->add(u, v, h, 4);   // (a): h changed after the call, before the queue ran
    h[0] = 100;
    g->download(got, u, sizeof got);
    os_ops_cpu.add(want, cv, (const float[]){1, 2, 3, 4}, 4);
    CHECK(got[0] == cv[0] + 100 && got[0] != want[0] && !memcmp(got + 1, want + 1, 3 * sizeof(float)),
          "(a) a host array changed after the call: the queue reads it late (%g, the CPU backend %g)", got[0], want[0]);
    memset(late, 0, sizeof late);
    g->add(late, v, v, 4);   // (b): a result in host memory read without a download
    int absent = late[0] == 0 && late[3] == 0;
    g->download(got, u, sizeof got);   // the synchronisation point: it is written now
    CHECK(absent && late[0] == cv[0] + cv[0] && late[3] == cv[3] + cv[3],
          "(b) a result read by the host before a download is not there (%d), after it is (%g)", absent, late[0]);
    os_guard_set_strict(1);
    float src[4] = {5, 6, 7, 8}, *x = g->alloc(sizeof src, "x");
    g->upload(x, src, sizeof src);
    src[0] = -1;   // the host may reuse an upload's source when it returns
    g->copy(u, x, 4);
    g->free(x);   // free runs the copy first (it reads x)
    g->download(got, u, sizeof got);
    CHECK(got[0] == 5 && got[3] == 8, "an upload's bytes are taken when called, and free runs the queue first: %g %g",
          got[0], got[3]);
    // with nothing pending an upload is written at once; with a call pending it waits behind it, with its bytes
    float ones[4] = {1, 1, 1, 1}, nines[4] = {9, 9, 9, 9}, gy[4], *y = g->alloc(sizeof ones, "y");
    g->upload(y, ones, sizeof ones);
    g->add(u, y, y, 4);   // pending: reads the ones
    g->upload(y, nines, sizeof nines);
    nines[0] = -1;
    g->download(got, u, sizeof got);
    g->download(gy, y, sizeof gy);
    CHECK(got[0] == 2 && got[3] == 2 && gy[0] == 9 && gy[3] == 9, "an upload behind a pending call lands after it: "
          "%g %g, %g %g", got[0], got[3], gy[0], gy[3]);
    g->free(y);
    g->free(u);
}

// held_bytes: the pages the live buffers map
static void held_checks(const os_ops *g) {
    int64_t page = sysconf(_SC_PAGESIZE), before = g->held_bytes();
    float *a = g->alloc(1, "one byte"), *b = g->alloc(page + 1, "a page and a byte");
    CHECK(g->held_bytes() - before == 3 * page, "held: %lld bytes over %lld, want 3 pages of %lld",
          (long long)g->held_bytes(), (long long)before, (long long)page);
    g->free(a), g->free(b);
    CHECK(g->held_bytes() == before, "held after free: %lld, was %lld", (long long)g->held_bytes(), (long long)before);
    CHECK(!os_ops_cpu.held_bytes, "the CPU backend's memory is the host's (os_alloc counts it)");
}

int main(void) {
    const os_ops *g = os_ops_guard(), *c = &os_ops_cpu;
    const char *path;
    if (k_gemm_bf16_setup(os_knobs()->bf16_gemm, &path) < 0) return fprintf(stderr, "FAIL bf16 setup\n"), 1;
    CHECK(g->matmul != c->matmul && g->sumsq != c->sumsq && g->rope_table != c->rope_table, "guard: every member wrapped");
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
    float *gx = g->alloc(sizeof x, "x"), *glg = g->alloc(sizeof lg, "logits");
    int32_t *gy = g->alloc(sizeof y, "labels");
    g->upload(d + 1, &want[0], sizeof(double));
    g->upload(gx, x, sizeof x), g->upload(glg, lg, sizeof lg), g->upload(gy, y, sizeof y);
    g->sumsq(gx, 7, d);
    g->xent_fwd_bwd(glg, 7, gy, 2, 7, 0.5f, d + 1, dc);
    c->sumsq(x, 7, &want[1]);
    double s = want[1];
    c->xent_fwd_bwd(&lc[0][0], 7, y, 2, 7, 0.5f, &want[0], &nc);
    g->download(got, d, sizeof got);
    g->download(&gc, dc, sizeof gc);
    g->download(lg, glg, sizeof lg);
    g->free(gx), g->free(glg), g->free(gy);
    CHECK(got[0] == s && got[1] == want[0] && gc == nc, "guard sums %.17g %.17g (%lld) vs cpu %.17g %.17g (%lld)",
          got[0], got[1], (long long)gc, s, want[0], (long long)nc);
    int same = 1;
    for (int i = 0; i < 14; i++) same &= (&lg[0][0])[i] == (&lc[0][0])[i];
    CHECK(same, "the cross-entropy's gradients in place as the CPU backend's");

    // compute members given guard memory (two arguments in one buffer, in place): the CPU's values, closed after
    float *v = g->alloc(8 * sizeof(float), "test vector"), hv[8], cv[8];
    g->upload(v, x, 7 * sizeof(float));
    g->add(v, v, v, 4), g->axpy(v + 4, 0.5f, v, 3), g->scale(v, -2.0f, 7);
    memcpy(cv, x, sizeof x);
    c->add(cv, cv, cv, 4), c->axpy(cv + 4, 0.5f, cv, 3), c->scale(cv, -2.0f, 7);
    g->download(hv, v, 7 * sizeof(float));
    CHECK(!memcmp(hv, cv, 7 * sizeof(float)), "add/axpy/scale on a guard buffer as on the CPU");
    CHECK(child_signal(host_read, v) == SEGV_END, "the buffer a member was given is closed again after the call");
    int ok = 0;
    CHECK(child_signal(bound_product, &ok) == 0, "a product reads the bf16 copy given as its operand (opened)");

    // strict: a compute member given host memory, or an upload into host memory, stops naming member and argument
    char err[512];
    CHECK(child_end(strict_add_host, v, err, sizeof err) == -1 && strstr(err, "add: argument b") &&
              strstr(err, "is host memory"), "strict: add given a host b stops naming it: %s", err);
    CHECK(child_end(strict_upload_host, v, err, sizeof err) == -1 && strstr(err, "upload: argument dst"),
          "strict: upload into host memory stops naming it: %s", err);
    os_guard_set_strict(1);   // guard memory and NULL (an optional argument) pass strict mode
    float *w = g->alloc(4 * sizeof(float), "w"), *o = g->alloc(2 * sizeof(float), "o"), ho[2], co[2];
    g->upload(w, x, 4 * sizeof(float));
    os_tensor none = os_tensor_none();   // (its data NULL: an option not taken)
    g->matmul(os_matf(o, 1, 2, 2), os_matf(v, 1, 2, 2), os_tensor_t(os_matf(w, 2, 2, 2)), 1.0f, 0.0f, none, none);
    os_guard_set_strict(0);
    c->matmul(os_matf(co, 1, 2, 2), os_matf(cv, 1, 2, 2), os_tensor_t(os_matf(x, 2, 2, 2)), 1.0f, 0.0f, none, none);
    g->download(ho, o, sizeof ho);
    CHECK(!memcmp(ho, co, sizeof ho), "strict: matmul on guard memory with no bias as on the CPU");
    queue_checks(g, v, cv);
    held_checks(g);
    g->free(d), g->free(dc), g->free(v), g->free(w), g->free(o), g->free(NULL);
    return check_report("ops_guard");
}
