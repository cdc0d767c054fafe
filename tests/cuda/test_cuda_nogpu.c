// The CUDA backend's checks that need no GPU (make CUDA=1 builds it; tests/test_device_flag.py runs it): the
// caching allocator's size classes, the table's members, and the open on a machine without a driver or device.
// Usage: test_cuda_nogpu [nogpu]   (nogpu: also check that os_cuda_open fails with the CUDA error string)
#include "cuda/cuda.h"
#include "cuda/cu_alloc.h"
#include "core/err.h"
#include "../unit/check.h"
#include <string.h>

static void size_classes(void) {
    int64_t prev = 0, nclasses = 0;
    for (int64_t b = 1; b < ((int64_t)1 << 34); b += b / 7 + 1) {
        int64_t c = cu_alloc_class(b);
        CHECK(c >= b && c >= 512, "class of %lld bytes: %lld", (long long)b, (long long)c);
        CHECK(b <= 512 || (double)c <= 1.125 * (double)b, "class of %lld bytes: %lld, over 12.5%% more",
              (long long)b, (long long)c);
        CHECK(cu_alloc_class(c) == c, "a class is its own class (%lld -> %lld)", (long long)c, (long long)cu_alloc_class(c));
        CHECK(c >= prev, "classes grow with the request (%lld after %lld)", (long long)c, (long long)prev);
        CHECK(c % 64 == 0, "class %lld not a multiple of 64 bytes", (long long)c);
        nclasses += c != prev, prev = c;
    }
    // 8 classes per power of two: between 1 MiB and 2 MiB exactly 8 (1 MiB itself is the last of the octave below)
    int64_t seen = 0, last = 0;
    for (int64_t b = (1 << 20) + 1; b <= (2 << 20); b += 4096)
        if (cu_alloc_class(b) != last) seen++, last = cu_alloc_class(b);
    CHECK(seen == 8, "classes in (1 MiB, 2 MiB]: %lld, expected 8", (long long)seen);
    CHECK(nclasses > 100, "%lld classes seen", (long long)nclasses);
}

static void table(void) {
    const os_ops *t = os_ops_cuda();
    CHECK(t && !strcmp(t->name, "cuda"), "os_ops_cuda: the table named cuda");
    if (!t) return;
    // every member is there (the table is made from the seam's list: a member without its cu_<member> does not link)
    int n = 0;
#define NONNULL(name, R, GUARD, CPU, ...) {CHECK(t->name != NULL, "member " #name " is NULL"); n++;}
    OS_OPS_LIST(NONNULL)
#undef NONNULL
    CHECK(n == OS_OPS_MEMBERS, "%d members checked of %d", n, OS_OPS_MEMBERS);
    CHECK(t->host_memory == 0, "host_memory 0: the collectives staged through the host or NCCL");
}

int main(int argc, char **argv) {
    size_classes();
    table();
    if (argc > 1 && !strcmp(argv[1], "nogpu")) {
        const os_ops *t = os_cuda_open(-1, 0, 0);
        CHECK(!t, "os_cuda_open without a GPU returned a table");
        CHECK(strstr(os_errmsg(), "--device cuda: no usable CUDA device: ") != NULL, "message: %s", os_errmsg());
        printf("open without a GPU: %s\n", os_errmsg());
    }
    return check_report("test_cuda_nogpu");
}
