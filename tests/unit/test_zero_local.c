// Unit test of where a rank's part of a bucket lives (zr_local, zr_fill; src/zero/runtime.h), of the stages' policies
// (zr_policy_of, src/zero/policy.h) and of the runtime's registry layout (src/zero/registry.h), for N in {1, 2, 3}
// ranks and stages 0-3 (no MPI: nothing here communicates). Expected values follow the definitions in docs/zero.md,
// computed here independently: tensors back to back in declaration order, buckets padded to a multiple of 16*N, slice
// S = padded / N; parameters whole at stage 0-2 and the slice at 3; gradients whole at 0 and the slice at 1-3, none when
// frozen; moments = the gradient part within the trained range; the slices of all ranks cover the bucket exactly once.
#include "check.h"
#include "zero/runtime.h"
#include <string.h>

enum { NB = 3 };
static const int64_t SHAPES[][2] = {{5, 7}, {2, 1}, {9, 1}, {50, 1}, {3, 11}};   // tensors: 2 + 1 + 2
static const int BUCKET_OF[] = {0, 0, 1, 2, 2};
static const int TRAINABLE[NB] = {1, 0, 1};
static const int64_t TRAIN[NB][2] = {{0, 37}, {0, 0}, {20, 70}};   // bucket 2: a trained element range

static void build(zr_registry *r) {
    zr_reg_init(r, NB, 5);
    const char *names[] = {"a.w", "a.b", "b.w", "c.x", "c.y"}, *bn[] = {"a", "b", "c"};
    for (int b = 0, i = 0; b < NB; b++) {
        zr_reg_bucket(r, bn[b], TRAINABLE[b], TRAIN[b][0], TRAIN[b][1]);
        for (; i < 5 && BUCKET_OF[i] == b; i++) zr_reg_tensor(r, names[i], SHAPES[i][1] > 1 ? 2 : 1, SHAPES[i]);
    }
}

static int64_t numel_of(int i) { return SHAPES[i][0] * SHAPES[i][1]; }

static int fill_ids(void *ctx, int tensor, int64_t start, int64_t n, float *dst) {
    (void)ctx;
    for (int64_t j = 0; j < n; j++) dst[j] = (float)(tensor * 1000 + start + j);
    return 0;
}

// the value fill_ids puts at element e of bucket b (0 in the padding), from the declared shapes alone
static float expected_fill(int b, int64_t e) {
    int64_t at = 0;
    for (int i = 0; i < 5; i++) {
        if (BUCKET_OF[i] != b) continue;
        if (e < at + numel_of(i)) return (float)(i * 1000 + (e - at));
        at += numel_of(i);
    }
    return 0.0f;
}

static void check_layout(const zr_registry *r) {
    int64_t at[NB] = {0};
    for (int i = 0; i < 5; i++) {
        int b = BUCKET_OF[i];
        CHECK(r->p[i].bucket == b && r->p[i].offset == at[b], "tensor %d: bucket %d offset %lld, expected %d %lld", i,
              r->p[i].bucket, (long long)r->p[i].offset, b, (long long)at[b]);
        int tr = TRAINABLE[b] && at[b] < TRAIN[b][1] && at[b] + numel_of(i) > TRAIN[b][0];
        CHECK(r->p[i].trainable == tr, "tensor %d: trainable %d, expected %d", i, r->p[i].trainable, tr);
        at[b] += numel_of(i);
    }
    for (int b = 0; b < NB; b++) CHECK(r->b[b].numel == at[b], "bucket %d: numel %lld, expected %lld", b, (long long)r->b[b].numel, (long long)at[b]);
}

static void check_rank(int N, int stage, int rank, int64_t *covered) {
    zr_registry reg;
    build(&reg);
    if (N == 1 && stage == 0 && rank == 0) check_layout(&reg);
    zr_runtime rt;
    zr_init(&rt, &reg, stage, rank, N);
    for (int b = 0; b < NB; b++) {
        int64_t numel = rt.reg->b[b].numel, P = (numel + 16 * N - 1) / (16 * N) * (16 * N), S = P / N;
        CHECK(rt.bk[b].padded == P && rt.bk[b].slice == S, "N %d bucket %d: padded %lld slice %lld", N, b, (long long)rt.bk[b].padded, (long long)rt.bk[b].slice);
        zr_span p = zr_local(&rt, b, ZR_PARAMETERS), g = zr_local(&rt, b, ZR_GRADIENTS);
        zr_span m = zr_local(&rt, b, ZR_EXP_AVG), v = zr_local(&rt, b, ZR_EXP_AVG_SQ);
        int64_t poff = stage == 3 ? rank * S : 0, pn = stage == 3 ? S : P;
        CHECK(p.off == poff && p.n == pn && p.p, "N %d stage %d rank %d bucket %d: parameters at %lld+%lld, expected %lld+%lld",
              N, stage, rank, b, (long long)p.off, (long long)p.n, (long long)poff, (long long)pn);
        int64_t goff = stage == 0 ? 0 : rank * S, gn = !TRAINABLE[b] ? 0 : stage == 0 ? P : S;
        // stage 2/3: the slice exists only within a step (from its first reduction until AdamW): none yet here
        CHECK(g.n == gn && (gn == 0 || (g.off == goff && (stage >= 2 ? !g.p : !!g.p))),
              "N %d stage %d rank %d bucket %d: gradients at %lld+%lld, expected %lld+%lld",
              N, stage, rank, b, (long long)g.off, (long long)g.n, (long long)goff, (long long)gn);
        int64_t lo = goff > TRAIN[b][0] ? goff : TRAIN[b][0], hi = goff + gn < TRAIN[b][1] ? goff + gn : TRAIN[b][1];
        if (hi < lo) hi = lo;
        CHECK(m.n == hi - lo && v.n == hi - lo && (m.n == 0 || (m.off == lo && v.off == lo && m.p && v.p && m.p != v.p)),
              "N %d stage %d rank %d bucket %d: moments at %lld+%lld, expected %lld+%lld", N, stage, rank, b,
              (long long)m.off, (long long)m.n, (long long)lo, (long long)(hi - lo));
        if (stage >= 1 && g.n) covered[b] += g.n;
        if (stage == 3) {   // the parameter slices: disjoint and in rank order
            CHECK(p.off == covered[NB + b], "N %d rank %d bucket %d: slice starts at %lld, expected %lld", N, rank, b,
                  (long long)p.off, (long long)covered[NB + b]);
            covered[NB + b] += p.n;
        }
        CHECK(zr_fill(&rt, b, fill_ids, NULL) == 0, "zr_fill");
        int bad = 0;
        for (int64_t e = p.off; e < p.off + p.n; e++) bad += *zr_at(p, e) != expected_fill(b, e);
        CHECK(!bad, "N %d stage %d rank %d bucket %d: %d elements filled wrongly", N, stage, rank, b, bad);
    }
    zr_free(&rt);
}

// the stages' policies (zero/policy.h), as docs/zero.md "Policies" tabulates them
static void check_policies(void) {
    static const int SHARDED[4] = {0, 0, 0, 1}, SCATTERED[4] = {0, 0, 1, 1}, BY_SLICE[4] = {0, 1, 1, 1};
    static const int GATHER_AFTER[4] = {0, 1, 1, 0};
    for (int s = 0; s < 4; s++) {
        zr_policy p = zr_policy_of(s);
        CHECK((p.params == ZR_PARAMS_SHARDED) == SHARDED[s] && (p.grads == ZR_GRADS_REDUCE_SCATTER) == SCATTERED[s] &&
                  (p.update == ZR_UPDATE_SLICE) == BY_SLICE[s] && p.gather_after_update == GATHER_AFTER[s],
              "stage %d: policies %d %d %d %d", s, p.params, p.grads, p.update, p.gather_after_update);
    }
}

int main(void) {
    check_policies();
    for (int N = 1; N <= 3; N++)
        for (int stage = 0; stage <= 3; stage++) {
            int64_t covered[2 * NB] = {0};
            for (int rank = 0; rank < N; rank++) check_rank(N, stage, rank, covered);
            for (int b = 0; b < NB; b++) {
                int64_t P, numel = 0;
                for (int i = 0; i < 5; i++) numel += BUCKET_OF[i] == b ? numel_of(i) : 0;
                P = (numel + 16 * N - 1) / (16 * N) * (16 * N);
                if (stage >= 1 && TRAINABLE[b]) CHECK(covered[b] == P, "N %d stage %d bucket %d: gradient parts cover %lld of %lld", N, stage, b, (long long)covered[b], (long long)P);
                if (stage == 3) CHECK(covered[NB + b] == P, "N %d bucket %d: slices cover %lld of %lld", N, b, (long long)covered[NB + b], (long long)P);
            }
        }
    return check_report("test_zero_local");
}
