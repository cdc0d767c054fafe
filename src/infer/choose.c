// Token choice of one stream (choose.h): repetition penalty, then greedy or temperature / top-k / top-p sampling.
#include "infer/choose.h"
#include "core/alloc.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void os_choice_work_init(os_choice_work *w, int64_t n) {
    w->n = n;
    w->x = os_alloc(sizeof(float) * (size_t)n, "token choice logits");
    w->idx = os_alloc(sizeof(int32_t) * (size_t)n, "token choice order");
    w->seen = os_alloc((size_t)n, "token choice marks");
    memset(w->seen, 0, (size_t)n);
}

void os_choice_work_free(os_choice_work *w) {
    os_free(w->x), os_free(w->idx), os_free(w->seen);
    memset(w, 0, sizeof *w);
}

// x[id] of every distinct id of the history: * penalty when negative, / penalty otherwise (float, as the
// reference's fp32 torch.where)
static void penalize(float *x, const int32_t *hist, int64_t nhist, int64_t stride, double penalty, uint8_t *seen) {
    float p = (float)penalty;
    for (int64_t i = 0; i < nhist; i++) {
        int32_t id = hist[i * stride];
        if (seen[id]) continue;
        seen[id] = 1;
        x[id] = x[id] < 0 ? x[id] * p : x[id] / p;
    }
    for (int64_t i = 0; i < nhist; i++) seen[hist[i * stride]] = 0;
}

static int32_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static _Thread_local const float *g_order_x;

// larger logit first, then the smaller id (the order of a stable descending sort)
static int by_logit(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    float x = g_order_x[i], y = g_order_x[j];
    if (x != y) return x > y ? -1 : 1;
    return (i > j) - (i < j);
}

// how many of the sorted ids the top-p filter keeps: id j (descending) stays while the mass before it is <= top_p
static int64_t nucleus(const float *x, const int32_t *idx, int64_t k, double top_p) {
    if (top_p >= 1.0) return k;
    double xmax = x[idx[0]], sum = 0.0, c = 0.0;
    for (int64_t i = 0; i < k; i++) sum += exp((double)x[idx[i]] - xmax);
    for (int64_t j = 0; j < k; j++) {
        if (j > 0 && c / sum > top_p) return j;
        c += exp((double)x[idx[j]] - xmax);
    }
    return k;
}

static int32_t sample(float *x, int64_t n, const os_choice_opts *o, double u, int32_t *idx) {
    float t = (float)o->temperature;
    for (int64_t i = 0; i < n; i++) x[i] /= t, idx[i] = (int32_t)i;
    g_order_x = x;
    qsort(idx, (size_t)n, sizeof(int32_t), by_logit);
    int64_t k = n;
    if (o->top_k > 0 && o->top_k < n) {   // every logit >= the k-th largest stays (torch: logits < kth removed)
        k = o->top_k;
        while (k < n && x[idx[k]] >= x[idx[o->top_k - 1]]) k++;
    }
    k = nucleus(x, idx, k, o->top_p);
    double xmax = x[idx[0]], sum = 0.0, c = 0.0;
    for (int64_t i = 0; i < k; i++) sum += exp((double)x[idx[i]] - xmax);
    double target = u * sum;
    for (int64_t i = 0; i < k; i++) {
        c += exp((double)x[idx[i]] - xmax);
        if (target < c) return idx[i];
    }
    return idx[k - 1];
}

int32_t os_choose(const float *z, int64_t n, const int32_t *hist, int64_t nhist, int64_t stride, double penalty,
                  const os_choice_opts *o, double u, os_choice_work *w) {
    memcpy(w->x, z, sizeof(float) * (size_t)n);
    if (penalty != 1.0) penalize(w->x, hist, nhist, stride, penalty, w->seen);
    return o->do_sample ? sample(w->x, n, o, u, w->idx) : argmax(w->x, n);
}
