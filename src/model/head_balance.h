// Balancing the head's work across ranks (docs/training.md "Balancing the head across ranks"). Since the head skips
// the rows without a target and computes only the lm_head columns a row's targets need (head.c, row classes), its
// work on a rank depends on that rank's samples: in SLAM-Omni, on how much of each answer is text and how much is
// audio. The ranks wait for the slowest at the next collective. With the transport below (the trainer gives it
// when there are several ranks), the head moves rows from the ranks with more work to the ranks with less: a
// receiver computes their losses, their weight gradients into its own gradient buffers (summed over the ranks
// anyway by the reduce-scatter) and their input gradients, which go back to their owner with the loss sums.
// The plan depends only on every rank's row counts per class, so every rank computes the same plan.
#pragma once
#include <stdint.h>

// the row classes: targets in the text and the audio terms, the text term only, the audio terms only
enum { OS_HEAD_CLS_TA, OS_HEAD_CLS_T, OS_HEAD_CLS_A, OS_HEAD_NCLS };

// The transport: two collectives that every rank calls at the same point, in the same order.
typedef struct {
    void *ctx;
    int rank, size;
    // every rank's `bytes` bytes from in into out[size * bytes]
    void (*allgather)(void *ctx, const void *in, void *out, int64_t bytes);
    // to each rank p sbytes[p] bytes from send + soff[p]; from each rank p rbytes[p] bytes into recv + roff[p]
    void (*alltoallv)(void *ctx, const void *send, const int64_t *sbytes, const int64_t *soff, void *recv,
                      const int64_t *rbytes, const int64_t *roff);
} os_head_peers;

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
