// The guard backend's stream (docs/design.md "The guard backend"): a GPU runs kernels after the host issued them,
// so the guard runs none when it is called. Every compute member (and zero, copy)
// records its call — values by value, pointers as pointers, host pointers too — and the recorded calls run in the
// order made only at the synchronisation points: download (it returns when the bytes are on the host) and free
// (the CUDA backend's free is stream-ordered: work issued before it still runs on the buffer, so the queue runs
// first). upload copies the host's bytes when called (a copy from pageable memory is done with the host buffer
// when it returns) and writes them in queue order. So a result read by the host without a download, or a host
// array a kernel was given and the host changed before the next synchronisation, gives other numbers than the CPU
// backend's (tests/test_guard_backend.py compares them bit for bit). Members that answer the host
// (attention_stats_floats) run at once: they read no buffer.
#include "kernels/ops_guard_mem.h"
#include "kernels/ops_guard_queue.h"
#include "core/err.h"
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

// ---- the queue: records laid end to end in one growing buffer ----
typedef struct {
    void (*run)(const void *args);
    size_t size;   // of the record, header included (a multiple of ALIGN)
} record;
#define ALIGN alignof(max_align_t)
#define ROUND(n) (((n) + ALIGN - 1) / ALIGN * ALIGN)

static char *g_q;
static size_t g_len, g_cap;
static pthread_mutex_t g_qmu = PTHREAD_MUTEX_INITIALIZER;

void gd_enqueue(void (*run)(const void *), const void *args, size_t bytes, const void *extra, size_t nextra) {
    size_t head = ROUND(sizeof(record)), size = head + ROUND(bytes) + ROUND(nextra);
    pthread_mutex_lock(&g_qmu);
    if (g_len + size > g_cap) {
        size_t cap = 2 * (g_len + size) + 4096;
        char *more = realloc(g_q, cap);
        if (!more) os_die("guard backend: out of memory for its queue of %zu bytes", cap);
        g_q = more, g_cap = cap;
    }
    char *r = g_q + g_len;
    *(record *)r = (record){run, size};
    memcpy(r + head, args, bytes);
    if (nextra) memcpy(r + head + ROUND(bytes), extra, nextra);
    g_len += size;
    pthread_mutex_unlock(&g_qmu);
}

int gd_idle(void) {
    pthread_mutex_lock(&g_qmu);
    int idle = g_len == 0;
    pthread_mutex_unlock(&g_qmu);
    return idle;
}

const void *gd_extra(const void *args, size_t bytes) { return (const char *)args + ROUND(bytes); }

// A device keeps no host copy of an upload once it is written: a queue that a burst of uploads (the parameters
// at start-up, a bucket staged from the host) grew past this is given back when it has run, so the process holds
// what a device's host side holds, plus at most this (the planned memory stays comparable: test_plan_memory.py)
#define QUEUE_KEEP ((size_t)8 << 20)

void gd_flush(void) {
    pthread_mutex_lock(&g_qmu);
    for (size_t at = 0; at < g_len; at += ((record *)(g_q + at))->size)
        ((record *)(g_q + at))->run(g_q + at + ROUND(sizeof(record)));
    g_len = 0;
    if (g_cap > QUEUE_KEEP) free(g_q), g_q = NULL, g_cap = 0;
    pthread_mutex_unlock(&g_qmu);
}

// ---- the members, generated from the seam's list (kernels/ops_list.h): every RUN and OWN line ----
// an argument is (P, type, name): a pointer (opened for the call; strict: the backend's memory or NULL),
// (V, type, name) / (B, type, name): a value (int, int64_t, float, uint64_t), (T, os_tensor, name): a tensor
// view (core/tensor.h), recorded by value, its data a pointer as P's, or (N, void, ): none
#define GD_FIELD(k, t, n) GD_FIELD_##k(t, n)           // its field in the record
#define GD_FIELD_P(t, n) t n;
#define GD_FIELD_V(t, n) t n;
#define GD_FIELD_B(t, n) t n;
#define GD_FIELD_T(t, n) t n;
#define GD_FIELD_N(t, n) char none_;
#define GD_ARG(k, t, n) GD_ARG_##k(n)                  // the recorded value, passed on
#define GD_ARG_P(n) q_->n
#define GD_ARG_V(n) q_->n
#define GD_ARG_B(n) q_->n
#define GD_ARG_T(n) q_->n
#define GD_ARG_N(n)
#define GD_PTR(k, t, n) GD_PTR_##k(n)                  // the pointers, into p_[]
#define GD_PTR_P(n) p_[n_++] = q_->n;
#define GD_PTR_V(n)
#define GD_PTR_B(n)
#define GD_PTR_T(n) p_[n_++] = q_->n.data;
#define GD_PTR_N(n)
#define GD_PNAME(k, t, n) GD_PNAME_##k(n)              // their names, "a, b, c"
#define GD_PNAME_P(n) #n ", "
#define GD_PNAME_V(n)
#define GD_PNAME_B(n)
#define GD_PNAME_T(n) #n ", "
#define GD_PNAME_N(n)

// a queued member gq_NAME: its record (NAME_q), the pointers in it (NAME_ptrs), its run when the queue reaches it
// (IMPL on the recorded arguments, their buffers open), and the member itself (strict check, record)
#define GD_QUEUED(NAME, IMPL, ...)                                                                          \
    typedef struct {                                                                                                  \
        OS_MAP(GD_FIELD, OS_NONE, __VA_ARGS__)                                                                        \
    } NAME##_q;                                                                                                       \
    static int NAME##_ptrs(const NAME##_q *q_, const void **p_) {                                                     \
        int n_ = 0;                                                                                                   \
        (void)q_, (void)p_;                                                                                           \
        OS_MAP(GD_PTR, OS_NONE, __VA_ARGS__)                                                                          \
        return n_;                                                                                                    \
    }                                                                                                                 \
    static void NAME##_run(const void *v_) {                                                                          \
        const NAME##_q *q_ = v_;                                                                                      \
        (void)q_;                                                                                                     \
        const void *p_[GD_MAXPTR] = {0};                                                                              \
        gd_opened o_ = gd_enter(p_, NAME##_ptrs(q_, p_));                                                    \
        IMPL(OS_MAP(GD_ARG, OS_COMMA, __VA_ARGS__));                                                                  \
        gd_leave(&o_);                                                                                                \
    }                                                                                                                 \
    static void gq_##NAME(OS_PARAMS(__VA_ARGS__)) {                                                                   \
        NAME##_q r_ = {OS_ARGS(__VA_ARGS__)};                                                                         \
        const void *p_[GD_MAXPTR] = {0};                                                                              \
        gd_strict(#NAME, "" OS_MAP(GD_PNAME, OS_NONE, __VA_ARGS__), p_, NAME##_ptrs(&r_, p_));                           \
        gd_enqueue(NAME##_run, &r_, sizeof r_, NULL, 0);                                                              \
    }
static const os_ops *g_cpu = &os_ops_cpu;   // the CPU backend the recorded calls run on (gd_set_cpu)
void gd_set_cpu(const os_ops *cpu) { g_cpu = cpu; }

#define GD_MEMBER(name, R, GUARD, CPU, ...) GD_MEMBER_##GUARD(name, __VA_ARGS__)
#define GD_MEMBER_RUN(name, ...) GD_QUEUED(name, g_cpu->name, __VA_ARGS__)
#define GD_MEMBER_OWN(name, ...) GD_QUEUED(name, own_##name, __VA_ARGS__)
#define GD_MEMBER_MEM(name, ...)   // ops_guard.c's
#define GD_MEMBER_ASK(name, ...)   // the CPU's member, at once

OS_OPS_LIST(GD_MEMBER)

// every queued member (RUN, OWN) into the table; a missing gq_<member> does not compile
#define GD_FILL(name, R, GUARD, CPU, ...) GD_FILL_##GUARD(name)
#define GD_FILL_RUN(name) t->name = gq_##name;
#define GD_FILL_OWN(name) t->name = gq_##name;
#define GD_FILL_MEM(name)
#define GD_FILL_ASK(name)
void gd_fill_queued(os_ops *t) { OS_OPS_LIST(GD_FILL) }
