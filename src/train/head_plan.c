#include "train/head_plan.h"
#include "core/alloc.h"
#include <stdint.h>

// move up to `x` of work from rank i to rank j: the most rows of each class, the dearest class first, not above x;
// then one row more of the cheapest class i still has if that leaves less than half a row's cost; returns the work
// moved. A class j has no rows of (has) takes at least OS_HEAD_NEW_CLASS_ROWS rows or none; j takes at most
// room[j] rows in all.
static double pair_up(int64_t *left, int64_t *room, char *has, const double *cost, int i, int j, double x,
                      os_head_move *mv, int *nm) {
    double moved = 0;
    int cheap = -1;
    for (int c = 0; c < OS_HEAD_NCLS; c++) {
        int64_t *have = &left[i * OS_HEAD_NCLS + c], k = (int64_t)((x - moved) / cost[c]);
        if (k > *have) k = *have;
        if (k > room[j]) k = room[j];
        if (!has[j * OS_HEAD_NCLS + c] && k < OS_HEAD_NEW_CLASS_ROWS) k = 0;
        if (k > 0) mv[(*nm)++] = (os_head_move){.from = i, .to = j, .cls = c, .rows = k}, has[j * OS_HEAD_NCLS + c] = 1;
        *have -= k, room[j] -= k, moved += (double)k * cost[c];
        if (*have > 0 && has[j * OS_HEAD_NCLS + c] && (cheap < 0 || cost[c] < cost[cheap])) cheap = c;
    }
    if (cheap >= 0 && room[j] > 0 && x - moved > cost[cheap] / 2) {
        int n = *nm;
        if (n > 0 && mv[n - 1].from == i && mv[n - 1].to == j && mv[n - 1].cls == cheap) mv[n - 1].rows++;
        else mv[(*nm)++] = (os_head_move){.from = i, .to = j, .cls = cheap, .rows = 1};
        left[i * OS_HEAD_NCLS + cheap]--, room[j]--, moved += cost[cheap];
    }
    return moved;
}

static int64_t key(const os_head_move *v) { return ((int64_t)v->from * 65536 + v->to) * OS_HEAD_NCLS + v->cls; }

int os_head_plan(const int64_t *counts, const int64_t *room_in, const double *cost, int size, os_head_move *moves) {
    double *load = os_alloc(sizeof(double) * (size_t)size, "head balance loads"), mean = 0;
    int64_t *left = os_alloc(sizeof(int64_t) * (size_t)(size * OS_HEAD_NCLS), "head balance rows");
    int64_t *room = os_alloc(sizeof(int64_t) * (size_t)size, "head balance room");
    char *has = os_alloc((size_t)(size * OS_HEAD_NCLS), "head balance classes");
    for (int r = 0; r < size; r++) {
        load[r] = 0, room[r] = room_in ? room_in[r] : INT64_MAX;
        for (int c = 0; c < OS_HEAD_NCLS; c++) {
            int64_t n = counts[r * OS_HEAD_NCLS + c];
            left[r * OS_HEAD_NCLS + c] = n, load[r] += (double)n * cost[c], has[r * OS_HEAD_NCLS + c] = n > 0;
        }
        mean += load[r] / size;
    }
    // the senders start above the mean and the receivers below it: the roles stay (a sender that moved half a row
    // too many is not a receiver afterwards)
    int *role = os_alloc(sizeof(int) * (size_t)size, "head balance roles"), nm = 0, i = 0, j = 0;
    for (int r = 0; r < size; r++) role[r] = load[r] > mean ? 1 : load[r] < mean ? -1 : 0;
    for (;;) {   // the next sender i and receiver j with work left to move
        while (i < size && (role[i] != 1 || load[i] <= mean)) i++;
        while (j < size && (role[j] != -1 || load[j] >= mean || room[j] <= 0)) j++;
        if (i >= size || j >= size) break;
        double ex = load[i] - mean, de = mean - load[j];
        double x = pair_up(left, room, has, cost, i, j, ex < de ? ex : de, moves, &nm);
        load[i] -= x, load[j] += x;
        if (room[j] > 0 && ex < de) i++;   // i is done (within a row of the mean), else j is (or full)
        else j++;
    }
    // the rounding left over, one row at a time: from the busiest sender to the least busy receiver while that
    // lowers the busier of the two
    for (;;) {
        int hi = -1, lo = -1, best = -1;
        for (int r = 0; r < size; r++) {
            if (role[r] == 1 && (hi < 0 || load[r] > load[hi])) hi = r;
            if (role[r] == -1 && room[r] > 0 && (lo < 0 || load[r] < load[lo])) lo = r;
        }
        if (hi < 0 || lo < 0) break;
        double top = load[hi];
        for (int c = 0; c < OS_HEAD_NCLS; c++) {
            double a = load[hi] - cost[c], b = load[lo] + cost[c], m = a > b ? a : b;
            if (left[hi * OS_HEAD_NCLS + c] > 0 && has[lo * OS_HEAD_NCLS + c] && m < top) top = m, best = c;
        }
        if (best < 0) break;
        int q = 0;
        while (q < nm && !(moves[q].from == hi && moves[q].to == lo && moves[q].cls == best)) q++;
        if (q == nm && nm == OS_HEAD_MAX_MOVES(size)) break;
        if (q == nm) moves[nm++] = (os_head_move){.from = hi, .to = lo, .cls = best, .rows = 0};
        moves[q].rows++, left[hi * OS_HEAD_NCLS + best]--, room[lo]--, load[hi] -= cost[best], load[lo] += cost[best];
    }
    os_free(load), os_free(left), os_free(role), os_free(has), os_free(room);
    // one move per sender, receiver and class, in that order
    for (int a = 1; a < nm; a++)
        for (int b = a; b > 0 && key(&moves[b]) < key(&moves[b - 1]); b--) {
            os_head_move t = moves[b];
            moves[b] = moves[b - 1], moves[b - 1] = t;
        }
    int k = 0;
    for (int q = 0; q < nm; q++) {
        if (k > 0 && key(&moves[k - 1]) == key(&moves[q])) moves[k - 1].rows += moves[q].rows;
        else moves[k++] = moves[q];
    }
    return k;
}
