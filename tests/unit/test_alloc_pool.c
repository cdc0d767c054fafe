// Unit test of the pool behind os_alloc's large blocks (src/core/alloc.h) and of the ZeRO runtime's buffers on top
// of it (src/zero/runtime.h, stage 3 on one rank: no MPI needed). Expectations come from the documented contract:
//  - a freed large block is handed to the next large allocation that fits (same address, no fresh pages), and
//    os_alloc's blocks read as zeros even when reused (a gradient buffer relies on it);
//  - the pool's pages plus the small live blocks never exceed the peak of what plain allocation holds, counted here
//    independently from the sequence of allocations (each large block in whole pages, its 64-byte header included);
//  - a step-shaped sequence (layer-sized buckets gathered and released around a head that holds two blocks four
//    times their size) maps no fresh pages from its second repetition on;
//  - os_alloc_lazy's blocks are new zero pages that neither come from nor go back to the pool;
//  - a released and regathered bucket holds its own values, not what was written into the reused buffer before;
//    a second micro-batch's gradient scope starts from zeros; zr_param after the release still stops with the
//    scope message (checked in a child process);
//  - a fresh large block's mapping asks for transparent huge pages (VmFlags "hg" in /proc/self/smaps) exactly when
//    OMNISHARD_HUGEPAGES is 1 or unset (tests/test_hugepages.py also runs this binary with 0), where THP is not off.
#include "check.h"
#include "core/alloc.h"
#include "zero/runtime.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
enum { ASAN = 1 };
#else
enum { ASAN = 0 };
#endif

static int64_t pages(size_t bytes) {   // what plain allocation maps for a large block
    int64_t ps = sysconf(_SC_PAGESIZE);
    return ((int64_t)bytes + 64 + ps - 1) / ps * ps;
}

// ---- the allocator ----
typedef struct {
    int64_t live, peak;   // plain allocation: pages of the live large blocks, their peak
} plain;

static void *get(plain *pl, size_t bytes) {
    void *p = os_alloc(bytes, "test block");

    pl->live += pages(bytes);
    if (pl->live > pl->peak) pl->peak = pl->live;
    os_pool_stats s = os_alloc_pool_stats();
    CHECK(s.held <= pl->peak,
          "after allocating %zu bytes: pool holds %lld bytes, plain allocation's peak %lld", bytes, (long long)s.held,
          (long long)pl->peak);
    return p;
}
static void put(plain *pl, void *p, size_t bytes) {
    os_free(p);
    pl->live -= pages(bytes);
    CHECK(os_alloc_pool_stats().held <= pl->peak, "after freeing %zu bytes: pool holds %lld, peak %lld", bytes,
          (long long)os_alloc_pool_stats().held, (long long)pl->peak);
}

static int all_bytes(const void *p, size_t n, unsigned char v) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != v) return 0;
    return 1;
}

static void test_reuse(void) {
    size_t n = 4 * OS_POOL_MIN;
    unsigned char *a = os_alloc(n, "a");
    memset(a, 0x5A, n);
    os_free(a);
    os_pool_stats s0 = os_alloc_pool_stats();
    unsigned char *b = os_alloc(n, "b");
    os_pool_stats s1 = os_alloc_pool_stats();
    CHECK(b == a && s1.reused == s0.reused + 1 && s1.fresh == s0.fresh, "a freed block of the same size is reused "
          "(got %p for %p, reused %lld -> %lld)", (void *)b, (void *)a, (long long)s0.reused, (long long)s1.reused);
    CHECK(all_bytes(b, n, 0), "os_alloc of a reused block reads as zeros");
    memset(b, 0x5A, n);
    os_free(b);
    size_t h = n / 2 - 64;                              // a block of n / 2 bytes with its header
    unsigned char *c = os_alloc_uninit(h, "c");         // smaller: cut from the same range
    CHECK(c == a, "a smaller block is cut from the free range (got %p, expected %p)", (void *)c, (void *)a);
    CHECK(all_bytes(c, h, ASAN ? 0xFF : 0x5A), "os_alloc_uninit leaves the contents (0xFF under ASan)");
    unsigned char *d = os_alloc(h, "d");                // the range's other half
    CHECK(d == a + n / 2 && all_bytes(d, h, 0), "the rest of the range: next, zeroed (got %p, expected %p)", (void *)d,
          (void *)(a + n / 2));
    os_free(c), os_free(d);
    unsigned char *e = os_alloc(n, "e");               // the halves merged again
    CHECK(e == a, "freed neighbours merge into one range (got %p, expected %p)", (void *)e, (void *)a);
    os_free(e);
    os_pool_stats s2 = os_alloc_pool_stats();
    unsigned char *lazy = os_alloc_lazy(n, "lazy");   // never the pool's pages: new zeros, unmapped when freed
    os_pool_stats s3 = os_alloc_pool_stats();
    CHECK(lazy != a && all_bytes(lazy, n, 0) && s3.held == s2.held && s3.free == s2.free,
          "os_alloc_lazy: new zero pages outside the pool (pool held %lld -> %lld)", (long long)s2.held, (long long)s3.held);
    os_free(lazy);
    CHECK(os_alloc_pool_stats().held == s2.held, "a freed os_alloc_lazy block does not join the pool");
    unsigned char *small = os_alloc(1000, "small");
    CHECK(small && all_bytes(small, 1000, 0), "a small block is zeroed");
    os_free(small);
}

// two repetitions of a step's shape: per "layer" a gathered bucket (L) with the next one prefetched, then the head
// with a gathered bucket and a gradient buffer of 4L each, then the layers backward (gathered + gradient + slice)
static void one_step(plain *pl, size_t L, int64_t *fresh_during) {
    int64_t f0 = os_alloc_pool_stats().fresh;
    enum { NL = 4 };
    void *g[NL] = {0};
    g[0] = get(pl, L);
    for (int l = 0; l < NL; l++) {
        if (l + 1 < NL) g[l + 1] = get(pl, L);
        put(pl, g[l], L);
    }
    void *hg = get(pl, 4 * L), *hd = get(pl, 4 * L);
    put(pl, hg, 4 * L);
    void *slices[NL + 1];
    for (int l = NL - 1; l >= 0; l--) {
        void *w = get(pl, L), *d = get(pl, L);
        slices[l] = get(pl, L / 2);
        put(pl, d, L), put(pl, w, L);
    }
    slices[NL] = get(pl, 2 * L);
    put(pl, hd, 4 * L);
    for (int l = 0; l <= NL; l++) put(pl, slices[l], l < NL ? L / 2 : 2 * L);
    *fresh_during = os_alloc_pool_stats().fresh - f0;
}

static void test_bound_and_steady_state(void) {
    os_pool_stats s = os_alloc_pool_stats();
    plain pl = {0, s.held};   // after test_reuse: nothing live, its one free range was also its peak
    size_t L = 3 * OS_POOL_MIN + 12345;
    int64_t f1, f2, f3;
    one_step(&pl, L, &f1);
    one_step(&pl, L, &f2);
    one_step(&pl, L, &f3);
    CHECK(f1 > 0 && f2 == 0 && f3 == 0, "fresh mappings per step: %lld, %lld, %lld (expected some, then none)",
          (long long)f1, (long long)f2, (long long)f3);
    s = os_alloc_pool_stats();
    CHECK(s.held <= pl.peak && s.held >= 8 * (int64_t)L, "the pool keeps the head's two blocks (%lld bytes) and "
          "no more than the peak (%lld)", (long long)s.held, (long long)pl.peak);
}

// ---- the runtime on top of it ----
enum { NBK = 3 };
static const int64_t NUMEL[NBK] = {300000, 300000, 700001};   // two equal "layers", a bigger "head" bucket

static void build(zr_registry *r) {
    zr_reg_init(r, NBK, NBK);
    const char *bn[NBK] = {"layer0", "layer1", "head"}, *tn[NBK] = {"layer0.w", "layer1.w", "head.w"};
    for (int b = 0; b < NBK; b++) {
        zr_reg_bucket(r, bn[b], 1, 0, NUMEL[b]);
        int64_t shape[1] = {NUMEL[b]};
        zr_reg_tensor(r, tn[b], 1, shape);
    }
}

static float value(int b, int64_t i) { return (float)(b + 1) * 0.5f + (float)(i % 9973); }

static int fill(void *ctx, int tensor, int64_t start, int64_t n, float *dst) {
    (void)ctx;
    for (int64_t j = 0; j < n; j++) dst[j] = value(tensor, start + j);
    return 0;
}

static int64_t mismatches(const float *full, int b, int64_t padded) {
    int64_t bad = 0;
    for (int64_t i = 0; i < padded; i++) bad += full[i] != (i < NUMEL[b] ? value(b, i) : 0.0f);
    return bad;
}

// in a child: zr_param of a released bucket must stop with the scope message
static void check_scope_stop(zr_runtime *rt) {
    int fd[2];
    if (pipe(fd)) return;
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        float *p = zr_param(rt, 0);
        printf("zr_param outside the scope returned %p\n", (void *)p);
        _exit(0);
    }
    close(fd[1]);
    char msg[1024] = {0};
    size_t got = 0;
    ssize_t k;
    while (got < sizeof msg - 1 && (k = read(fd[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)k;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0 && strstr(msg, "outside its data scope") && strstr(msg, "layer0.w"),
          "zr_param of a released bucket stops with the scope message (status %d, message '%s')", st, msg);
}

static void test_runtime(void) {
    zr_registry reg;
    build(&reg);
    zr_runtime rt;
    zr_init(&rt, &reg, 3, 0, 1);
    for (int b = 0; b < NBK; b++) CHECK(zr_fill(&rt, b, fill, NULL) == 0, "fill bucket %d", b);
    float *g0 = zr_gather(&rt, 0);
    CHECK(mismatches(g0, 0, rt.bk[0].padded) == 0, "bucket 0 gathered with its values");
    for (int64_t i = 0; i < rt.bk[0].padded; i++) g0[i] = -1e30f;   // a kernel scribbling into its gathered buffer
    zr_release(&rt, 0);
    check_scope_stop(&rt);
    float *g1 = zr_gather(&rt, 1);
    CHECK(g1 == g0, "bucket 1's gather reuses bucket 0's released buffer (%p, %p)", (void *)g1, (void *)g0);
    CHECK(mismatches(g1, 1, rt.bk[1].padded) == 0, "bucket 1 in the reused buffer: its own values, nothing stale");
    zr_release(&rt, 1);
    float *h = zr_gather(&rt, 2), *again = zr_gather(&rt, 0);
    CHECK(mismatches(h, 2, rt.bk[2].padded) == 0 && mismatches(again, 0, rt.bk[0].padded) == 0,
          "regathered: bucket 0 and the head bucket hold their values");
    // two micro-batches of gradients into bucket 0: each scope starts from zeros even in a reused buffer
    for (int mb = 0; mb < 2; mb++) {
        float *gr = zr_grad_open(&rt, 0);
        int64_t nonzero = 0;
        for (int64_t i = 0; i < rt.bk[0].padded; i++) nonzero += gr[i] != 0.0f;
        CHECK(nonzero == 0, "micro-batch %d: the gradient buffer starts zeroed (%lld non-zero)", mb, (long long)nonzero);
        for (int64_t i = 0; i < NUMEL[0]; i++) gr[i] += (float)(mb + 1);
        zr_grad_close(&rt, 0);
        if (mb == 0) {   // the closed gradient buffer goes back to the pool: the head's gradient may reuse it
            float *hg = zr_grad_open(&rt, 2);
            for (int64_t i = 0; i < rt.bk[2].padded; i++) hg[i] = 7.0f;
            zr_grad_close(&rt, 2);
        }
    }
    zr_span g = zr_local(&rt, 0, ZR_GRADIENTS);
    int64_t bad = 0;
    for (int64_t i = 0; i < g.n; i++) bad += g.p[i] != (i < NUMEL[0] ? 3.0f : 0.0f);
    CHECK(g.p && bad == 0, "bucket 0's reduced gradient is 1 + 2 (padding 0): %lld wrong", (long long)bad);
    zr_release(&rt, 0), zr_release(&rt, 2);
    zr_free(&rt);
}

// the VmFlags of the mapping that holds p: 1 with "hg" (MADV_HUGEPAGE), 0 without, -1 when not found
static int huge_flag(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int inside = 0, flag = -1;
    uintptr_t at = (uintptr_t)p;
    while (flag < 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) inside = at >= lo && at < hi;
        else if (inside && !strncmp(line, "VmFlags:", 8)) flag = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return flag;
}

static void test_huge_pages(void) {
    char mode[64] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f && !fgets(mode, sizeof mode, f)) mode[0] = 0;
    if (f) fclose(f);
    int want = os_alloc_huge_pages();
    size_t n = (size_t)24 << 20;   // larger than any free range left by the tests before: fresh pages
    char *p = os_alloc(n, "test huge");
    int flag = huge_flag(p + n / 2);
    if (!mode[0] || strstr(mode, "[never]"))
        printf("test_alloc_pool: transparent huge pages are off here; the advice is not checked\n");
    else
        CHECK(flag == want, "a fresh 24 MiB block's mapping: huge-page advice %d, OMNISHARD_HUGEPAGES asks for %d", flag,
              want);
    os_free(p);
}

int main(void) {
    test_huge_pages();
    test_reuse();
    test_bound_and_steady_state();
    test_runtime();
    os_pool_stats s = os_alloc_pool_stats();
    CHECK(s.held == s.free && os_alloc_live_bytes() == 0, "all freed: the pool holds only free ranges (%lld of %lld), "
          "%lld bytes live", (long long)s.free, (long long)s.held, (long long)os_alloc_live_bytes());
    return check_report("test_alloc_pool");
}
