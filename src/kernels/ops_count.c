// The counting backend of the device seam (kernels/ops.h; OMNISHARD_COUNT_OPS, a test hook): every member runs on
// the backend it wraps and counts its calls, and the bytes of the members that take a byte count (alloc*, upload,
// download: the (B, ...) arguments of kernels/ops_list.h). Made from the seam's list, so it wraps every member.
#include "kernels/ops.h"
#include "core/err.h"
#include <pthread.h>
#include <stdio.h>

enum {
#define CNT_INDEX(name, ...) CNT_##name,
    OS_OPS_LIST(CNT_INDEX)
#undef CNT_INDEX
};

static const os_ops *g_inner;
static os_ops g_count;
static int64_t g_calls[OS_OPS_MEMBERS], g_bytes[OS_OPS_MEMBERS], g_phase_calls[OS_PHASES][OS_OPS_MEMBERS];
static int g_phase;   // the current phase (os_ops_count_phase)
static const char *const g_phases[OS_PHASES] = {"other", "forward", "loss", "backward"};

void os_ops_count_phase(int phase) {
    OS_ASSERT(phase >= 0 && phase < OS_PHASES);
    __atomic_store_n(&g_phase, phase, __ATOMIC_RELAXED);
}

static void count(int i, int64_t bytes) {
    __atomic_fetch_add(&g_calls[i], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_phase_calls[__atomic_load_n(&g_phase, __ATOMIC_RELAXED)][i], 1, __ATOMIC_RELAXED);
    if (bytes) __atomic_fetch_add(&g_bytes[i], bytes, __ATOMIC_RELAXED);
}

// cnt_<member>: counted, then the wrapped backend's member
#define CNT_BYTES(k, t, n) CNT_BYTES_##k(n)
#define CNT_BYTES_B(n) +(n)
#define CNT_BYTES_P(n)
#define CNT_BYTES_H(n)
#define CNT_BYTES_V(n)
#define CNT_BYTES_T(n)
#define CNT_BYTES_N(n)
#define CNT_WRAP(name, R, GUARD, CPU, ...)                                                                            \
    static OS_T(R) cnt_##name(OS_PARAMS(__VA_ARGS__)) {                                                               \
        count(CNT_##name, 0 OS_MAP(CNT_BYTES, OS_NONE, __VA_ARGS__));                                                 \
        OS_RETURN(R, g_inner->name(OS_ARGS(__VA_ARGS__)))                                                             \
    }
OS_OPS_LIST(CNT_WRAP)
#undef CNT_WRAP

static const char *const g_names[OS_OPS_MEMBERS] = {
#define CNT_NAME(name, ...) #name,
    OS_OPS_LIST(CNT_NAME)
#undef CNT_NAME
};

const os_ops *os_ops_count(const os_ops *inner) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    // (--device cuda wraps its table after main wrapped the CPU's: the counts go on)
    g_inner = inner;
    g_count = (os_ops){
        .name = inner->name,
        .bf16 = inner->bf16,   // the precision the backend was opened in (the session checks it)
        .host_memory = inner->host_memory,
        .held_bytes = inner->held_bytes,
#define CNT_FILL(name, ...) .name = cnt_##name,
        OS_OPS_LIST(CNT_FILL)
#undef CNT_FILL
    };
    pthread_mutex_unlock(&mu);
    return &g_count;
}

const char *os_ops_member_name(int i) { return i >= 0 && i < OS_OPS_MEMBERS ? g_names[i] : NULL; }

os_op_count os_ops_count_of(int i) {
    os_op_count c = {0, 0};
    if (i < 0 || i >= OS_OPS_MEMBERS) return c;
    c.calls = __atomic_load_n(&g_calls[i], __ATOMIC_RELAXED);
    c.bytes = __atomic_load_n(&g_bytes[i], __ATOMIC_RELAXED);
    return c;
}

int os_ops_count_write(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return os_errf("cannot write the seam's call counts to %s", path);
    fprintf(f, "{\"backend\": \"%s\", \"members\": {", g_inner ? g_inner->name : "");
    for (int i = 0; i < OS_OPS_MEMBERS; i++) {
        os_op_count c = os_ops_count_of(i);
        fprintf(f, "%s\n  \"%s\": {\"calls\": %lld, \"bytes\": %lld}", i ? "," : "", g_names[i], (long long)c.calls,
                (long long)c.bytes);
    }
    fprintf(f, "\n}, \"phases\": {");
    for (int p = 0; p < OS_PHASES; p++) {
        fprintf(f, "%s\n  \"%s\": {", p ? "," : "", g_phases[p]);
        for (int i = 0, any = 0; i < OS_OPS_MEMBERS; i++) {
            int64_t n = __atomic_load_n(&g_phase_calls[p][i], __ATOMIC_RELAXED);
            if (n) fprintf(f, "%s\"%s\": %lld", any++ ? ", " : "", g_names[i], (long long)n);
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n}}\n");
    if (ferror(f) | fclose(f)) return os_errf("writing the seam's call counts to %s failed", path);
    return 0;
}
