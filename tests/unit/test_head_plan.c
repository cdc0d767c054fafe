// Unit test of the head's balancing plan (src/model/head_balance.c, os_head_plan) on random row counts and costs,
// 1 to 9 ranks: every move takes rows its sender has, no rank both sends and receives, the rows of each class are
// conserved, and afterwards no rank's work is more than half a row's cost (the dearest class) above the mean with
// two ranks, two rows' with more; the slowest rank's work never grows; ranks already equal move nothing.
#include "model/head_balance.h"
#include "check.h"
#include <math.h>
#include <stdint.h>

static uint64_t g_rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next_u64(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return g_rng;
}

static void check_plan(int S, const int64_t *counts, const double *cost, int trial) {
    os_head_move mv[OS_HEAD_MAX_MOVES(16)];
    int64_t left[16 * OS_HEAD_NCLS], moved_in[OS_HEAD_NCLS] = {0}, moved_out[OS_HEAD_NCLS] = {0};
    int sends[16] = {0}, recvs[16] = {0};
    double load[16], mean = 0, before_max = 0, dear = 0;
    for (int c = 0; c < OS_HEAD_NCLS; c++) dear = cost[c] > dear ? cost[c] : dear;
    for (int r = 0; r < S; r++) {
        load[r] = 0;
        for (int c = 0; c < OS_HEAD_NCLS; c++)
            left[r * OS_HEAD_NCLS + c] = counts[r * OS_HEAD_NCLS + c], load[r] += (double)counts[r * OS_HEAD_NCLS + c] * cost[c];
        mean += load[r] / S, before_max = load[r] > before_max ? load[r] : before_max;
    }
    int nm = os_head_plan(counts, cost, S, mv);
    CHECK(nm >= 0 && nm <= OS_HEAD_MAX_MOVES(S), "trial %d: %d moves", trial, nm);
    for (int q = 0; q < nm; q++) {
        const os_head_move *v = &mv[q];
        CHECK(v->from >= 0 && v->from < S && v->to >= 0 && v->to < S && v->from != v->to && v->cls >= 0 &&
              v->cls < OS_HEAD_NCLS && v->rows > 0, "trial %d move %d: %d -> %d class %d rows %lld", trial, q, v->from,
              v->to, v->cls, (long long)v->rows);
        if (!(v->from >= 0 && v->from < S && v->to >= 0 && v->to < S && v->cls >= 0 && v->cls < OS_HEAD_NCLS)) return;
        left[v->from * OS_HEAD_NCLS + v->cls] -= v->rows;
        CHECK(left[v->from * OS_HEAD_NCLS + v->cls] >= 0, "trial %d move %d: rank %d sends more rows of class %d than "
              "it has", trial, q, v->from, v->cls);
        load[v->from] -= (double)v->rows * cost[v->cls], load[v->to] += (double)v->rows * cost[v->cls];
        sends[v->from] = 1, recvs[v->to] = 1, moved_out[v->cls] += v->rows, moved_in[v->cls] += v->rows;
    }
    double after_max = 0;
    for (int r = 0; r < S; r++) {
        CHECK(!(sends[r] && recvs[r]), "trial %d: rank %d both sends and receives", trial, r);
        // two ranks: one pair, rounded to the nearest row; more: the pairs' roundings add up before the last pass
        double bound = S == 2 ? dear / 2 : 2 * dear;
        CHECK(load[r] - mean <= bound * (1 + 1e-9), "trial %d (%d ranks): rank %d's work %g is %g above the mean %g, "
              "over %g", trial, S, r, load[r], load[r] - mean, mean, bound);
        after_max = load[r] > after_max ? load[r] : after_max;
    }
    for (int c = 0; c < OS_HEAD_NCLS; c++) CHECK(moved_in[c] == moved_out[c], "trial %d: class %d not conserved", trial, c);
    CHECK(after_max <= before_max * (1 + 1e-12), "trial %d: the slowest rank's work grew, %g -> %g", trial,
          before_max, after_max);
}

int main(void) {
    // ranks already equal: nothing moves
    int64_t same[4 * OS_HEAD_NCLS] = {5, 7, 9, 5, 7, 9, 5, 7, 9, 5, 7, 9};
    double cost3[OS_HEAD_NCLS] = {575, 408, 167};
    os_head_move mv[OS_HEAD_MAX_MOVES(4)];
    CHECK(os_head_plan(same, cost3, 4, mv) == 0, "equal ranks: rows move");
    // two ranks, one with all the work: about half of it moves, dearest rows first
    int64_t lop[2 * OS_HEAD_NCLS] = {100, 0, 0, 0, 0, 0};
    int n = os_head_plan(lop, cost3, 2, mv);
    CHECK(n == 1 && mv[0].from == 0 && mv[0].to == 1 && mv[0].cls == 0 && mv[0].rows == 50, "100 rows on rank 0 of 2: "
          "%d moves, the first %lld rows", n, n ? (long long)mv[0].rows : -1LL);
    for (int trial = 0; trial < 20000; trial++) {
        int S = 1 + (int)(next_u64() % 9);
        int64_t counts[16 * OS_HEAD_NCLS];
        double cost[OS_HEAD_NCLS];
        int64_t most = 1 + (int64_t)(next_u64() % 600);
        for (int i = 0; i < S * OS_HEAD_NCLS; i++) counts[i] = (int64_t)(next_u64() % (uint64_t)(most + 1)) * (next_u64() % 4 != 0);
        for (int c = 0; c < OS_HEAD_NCLS; c++) cost[c] = 1 + (double)(next_u64() % 1000000) / 1000.0;
        check_plan(S, counts, cost, trial);
    }
    return check_report("test_head_plan");
}
