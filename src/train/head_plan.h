// The plan that evens out the head's work across ranks (train/head_balance.h executes it): which rows of which
// class move from which rank to which, from every rank's rows per class and a class's cost per row. Arithmetic
// only: every rank computes the same plan from the same counts.
#pragma once
#include "model/loss.h"

#define OS_HEAD_NCLS OS_LOSS_NCLS   // the loss's row classes (model/loss.h)

// `rows` rows of class cls move from rank `from` (the last rows of that class in its order) to rank `to`
typedef struct {
    int from, to, cls;
    int64_t rows;
} os_head_move;

// at most this many moves for `size` ranks
#define OS_HEAD_MAX_MOVES(size) ((size) * ((size) + 8) * OS_HEAD_NCLS)

// A class of rows a rank has none of costs it a run of its own over that class's lm_head columns, whatever its rows:
// the logits product and dh read all of them, the weight gradient reads and writes them (tens of rows' work at
// V = 156160). So a receiver takes rows of a class it has none of only this many at least.
#define OS_HEAD_NEW_CLASS_ROWS 32

// The moves that even out the ranks' work: counts[size * OS_HEAD_NCLS] each rank's rows per class, room[r] the rows
// rank r may receive in all (NULL: no limit), cost[c] the work of one row of class c (> 0). A rank above the mean
// sends, one below receives, never both. Each pair of a
// sender and a receiver moves whole rows, dearest class first, to the nearest row (a class the receiver has none
// of: OS_HEAD_NEW_CLASS_ROWS rows at least, or none); then single rows of classes the receiver has go from the
// busiest sender to the least busy receiver while that lowers the busier of the two. Where every rank has rows of
// every class, with two ranks neither ends more than half a row's cost above the mean; with more, the pairs'
// roundings add up to at most about two rows' (tests/unit/test_head_plan.c). Returns the
// number of moves written to moves[OS_HEAD_MAX_MOVES(size)]: one per sender, receiver and class, ordered by them.
int os_head_plan(const int64_t *counts, const int64_t *room, const double *cost, int size, os_head_move *moves);
