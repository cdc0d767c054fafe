// Unit test of the head's balancing plan (src/train/head_plan.c, os_head_plan) on random row counts and costs,
// 1 to 9 ranks: every move takes rows its sender has, no rank both sends and receives, the rows of each class are
// conserved, a rank gets rows of a class it had none of only OS_HEAD_NEW_CLASS_ROWS at least, and the slowest
// rank's work never grows. Where every rank has rows of every class, no rank's work ends more than half a row's
// cost (the dearest class) above the mean with two ranks, two rows' with more. Ranks already equal move nothing; a
// rank without rows takes half of the other's; a class the receiver lacks moves only in bulk; no rank receives
// more rows than its room.
#include "train/head_plan.h"
#include "check.h"
#include <math.h>
#include <stdint.h>

static uint64_t g_rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next_u64(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return g_rng;
}

static void check_plan(int S, const int64_t *counts, const int64_t *room, const double *cost, int trial) {
    os_head_move mv[OS_HEAD_MAX_MOVES(16)];
    int64_t left[16 * OS_HEAD_NCLS], moved_in[OS_HEAD_NCLS] = {0}, moved_out[OS_HEAD_NCLS] = {0};
    int sends[16] = {0}, recvs[16] = {0}, every = 1;
    int64_t got[16 * OS_HEAD_NCLS] = {0};
    double load[16], mean = 0, before_max = 0, dear = 0;
    for (int c = 0; c < OS_HEAD_NCLS; c++) dear = cost[c] > dear ? cost[c] : dear;
    for (int r = 0; r < S; r++) {
        load[r] = 0;
        for (int c = 0; c < OS_HEAD_NCLS; c++) {
            left[r * OS_HEAD_NCLS + c] = counts[r * OS_HEAD_NCLS + c];
            load[r] += (double)counts[r * OS_HEAD_NCLS + c] * cost[c];
        }
        mean += load[r] / S, before_max = load[r] > before_max ? load[r] : before_max;
        for (int c = 0; c < OS_HEAD_NCLS; c++) every &= counts[r * OS_HEAD_NCLS + c] > 0;
    }
    int nm = os_head_plan(counts, room, cost, S, mv);
    CHECK(nm >= 0 && nm <= OS_HEAD_MAX_MOVES(S), "trial %d: %d moves", trial, nm);
    for (int q = 0; q < nm; q++) {
        const os_head_move *v = &mv[q];
        if (q > 0) {
            const os_head_move *u = &mv[q - 1];
            CHECK(u->from < v->from || (u->from == v->from && (u->to < v->to || (u->to == v->to && u->cls < v->cls))),
                  "trial %d: moves %d and %d not in (sender, receiver, class) order or not merged", trial, q - 1, q);
        }
        CHECK(v->from >= 0 && v->from < S && v->to >= 0 && v->to < S && v->from != v->to && v->cls >= 0 &&
              v->cls < OS_HEAD_NCLS && v->rows > 0, "trial %d move %d: %d -> %d class %d rows %lld", trial, q, v->from,
              v->to, v->cls, (long long)v->rows);
        if (!(v->from >= 0 && v->from < S && v->to >= 0 && v->to < S && v->cls >= 0 && v->cls < OS_HEAD_NCLS)) return;
        left[v->from * OS_HEAD_NCLS + v->cls] -= v->rows;
        CHECK(left[v->from * OS_HEAD_NCLS + v->cls] >= 0, "trial %d move %d: rank %d sends more rows of class %d than "
              "it has", trial, q, v->from, v->cls);
        load[v->from] -= (double)v->rows * cost[v->cls], load[v->to] += (double)v->rows * cost[v->cls];
        sends[v->from] = 1, recvs[v->to] = 1, moved_out[v->cls] += v->rows, moved_in[v->cls] += v->rows;
        got[v->to * OS_HEAD_NCLS + v->cls] += v->rows;
    }
    for (int r = 0; r < S && room; r++) {
        int64_t in = 0;
        for (int c = 0; c < OS_HEAD_NCLS; c++) in += got[r * OS_HEAD_NCLS + c];
        CHECK(in <= room[r], "trial %d: rank %d receives %lld rows, room for %lld", trial, r, (long long)in,
              (long long)room[r]);
    }
    for (int i = 0; i < S * OS_HEAD_NCLS; i++)
        CHECK(counts[i] > 0 || got[i] == 0 || got[i] >= OS_HEAD_NEW_CLASS_ROWS, "trial %d: rank %d gets %lld rows of "
              "class %d, which it had none of", trial, i / OS_HEAD_NCLS, (long long)got[i], i % OS_HEAD_NCLS);
    double after_max = 0;
    for (int r = 0; r < S; r++) {
        CHECK(!(sends[r] && recvs[r]), "trial %d: rank %d both sends and receives", trial, r);
        // two ranks: one pair, rounded to the nearest row; more: the pairs' roundings add up before the last pass
        double bound = S == 2 ? dear / 2 : 2 * dear;
        CHECK(!every || room || load[r] - mean <= bound * (1 + 1e-9), "trial %d (%d ranks): rank %d's work %g is %g "
              "above the mean %g, over %g", trial, S, r, load[r], load[r] - mean, mean, bound);
        after_max = load[r] > after_max ? load[r] : after_max;
    }
    for (int c = 0; c < OS_HEAD_NCLS; c++)
        CHECK(moved_in[c] == moved_out[c], "trial %d: class %d not conserved", trial, c);
    CHECK(after_max <= before_max * (1 + 1e-12), "trial %d: the slowest rank's work grew, %g -> %g", trial,
          before_max, after_max);
}

int main(void) {
    // ranks already equal: nothing moves
    int64_t same[4 * OS_HEAD_NCLS] = {5, 7, 9, 5, 7, 9, 5, 7, 9, 5, 7, 9};
    double cost3[OS_HEAD_NCLS] = {575, 408, 167};
    os_head_move mv[OS_HEAD_MAX_MOVES(4)];
    CHECK(os_head_plan(same, NULL, cost3, 4, mv) == 0, "equal ranks: rows move");
    // two ranks, one with all the work: about half of it moves, dearest rows first
    int64_t lop[2 * OS_HEAD_NCLS] = {100, 0, 0, 0, 0, 0};
    int n = os_head_plan(lop, NULL, cost3, 2, mv);
    CHECK(n == 1 && mv[0].from == 0 && mv[0].to == 1 && mv[0].cls == 0 && mv[0].rows == 50, "100 rows on rank 0 of 2: "
          "%d moves, the first %lld rows", n, n ? (long long)mv[0].rows : -1LL);
    // a rank without rows: half of the other's work
    int64_t empty[2 * OS_HEAD_NCLS] = {40, 0, 300, 0, 0, 0};
    n = os_head_plan(empty, NULL, cost3, 2, mv);
    double half = 0;
    for (int q = 0; q < n; q++) half += (double)mv[q].rows * cost3[mv[q].cls];
    CHECK(n > 0 && fabs(half - (40 * 575 + 300 * 167) / 2.0) <= 575, "a rank without rows gets %g of %g", half,
          (40 * 575 + 300 * 167) / 2.0);
    // the other rank lacks the dear class: a few of its rows stay (fewer than OS_HEAD_NEW_CLASS_ROWS would be worth
    // their class's run there), cheaper rows it has move instead
    int64_t lack[2 * OS_HEAD_NCLS] = {20, 0, 300, 0, 0, 300};
    n = os_head_plan(lack, NULL, cost3, 2, mv);
    CHECK(n >= 1, "lacking class: no move");
    for (int q = 0; q < n; q++)
        CHECK(mv[q].from == 0 && mv[q].to == 1 && mv[q].cls == 2 && mv[q].rows >= 34 && mv[q].rows <= 35,
              "lacking class: move %d is %d -> %d class %d x %lld, expected 34-35 audio rows", q, mv[q].from, mv[q].to,
              mv[q].cls, (long long)mv[q].rows);
    // the other rank has room for 10 rows (its micro-batch is short): 10 move, not 49
    int64_t small[2] = {0, 10}, lop1[2 * OS_HEAD_NCLS] = {100, 0, 0, 1, 0, 0};
    n = os_head_plan(lop1, small, cost3, 2, mv);
    CHECK(n == 1 && mv[0].rows == 10, "room for 10 rows: %d moves, %lld rows", n, n ? (long long)mv[0].rows : -1LL);
    for (int trial = 0; trial < 20000; trial++) {
        int S = 1 + (int)(next_u64() % 9);
        int64_t counts[16 * OS_HEAD_NCLS];
        double cost[OS_HEAD_NCLS];
        int64_t most = 1 + (int64_t)(next_u64() % 600);
        for (int i = 0; i < S * OS_HEAD_NCLS; i++)   // a quarter of them 0
            counts[i] = (int64_t)(next_u64() % (uint64_t)(most + 1)) * (next_u64() % 4 != 0);
        for (int c = 0; c < OS_HEAD_NCLS; c++) cost[c] = 1 + (double)(next_u64() % 1000000) / 1000.0;
        int64_t room[16];   // every other trial: a limit on the rows each rank may receive, some 0
        for (int r = 0; r < S; r++) room[r] = (int64_t)(next_u64() % (uint64_t)(2 * most + 1)) * (next_u64() % 3 != 0);
        check_plan(S, counts, trial % 2 ? room : NULL, cost, trial);
    }
    return check_report("test_head_plan");
}
