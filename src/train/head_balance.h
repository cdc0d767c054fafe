// Balancing the head's work across ranks (docs/training.md "Balancing the head across ranks"). Since the head skips
// the rows without a target and computes only the lm_head columns a row's targets need (model/loss.h, row classes),
// its work on a rank depends on that rank's samples: in SLAM-Omni, on how much of each answer is text and how much
// is audio. The ranks wait for the slowest at the next collective. With several ranks and --head_balance the step
// (train/step.c) moves rows from the ranks with more work to the ranks with less, in two exchanges around the loss's
// compute, each a call of its own:
//   os_head_out   every rank's row counts per class are all-gathered, every rank computes the same plan from them and
//                 the costs the step got from the loss (train/head_plan.h); the moved rows go to their receivers;
//                 returns the rows this rank computes: its kept rows and, as rows of one more owner each, those moved
//                 to it
//   (the step computes them: os_loss_compute, their losses, their weight gradients into the receiver's own gradient
//    buffers, summed over the ranks anyway by the reduce-scatter, and their input gradients)
//   os_head_back  the loss sums and input gradients of the moved rows back to their owners.
// This file calls nothing of the loss, and the loss (model/loss.h) knows nothing of ranks: it computes whichever
// rows it is given.
// Messages, per pair of ranks (one all-to-all each way; each message's size rounded up to 8 bytes):
//   rows, owner -> receiver, K rows: hn [K, C] float, targets [G+1][K] int32 (term-major), the owner's gradient
//     scales [G+1] float;
//   back, receiver -> owner: loss sums [G+1] double, correct [G+1] int64, then with dh the rows' dL/dhn [K, C].
// The K rows are the owner's moves to that receiver in plan order, each the next rows from the end of its class.
#pragma once
#include "model/loss.h"

// one micro-batch's exchange, from os_head_out to os_head_back
typedef struct os_head_exch os_head_exch;

// The rows out: the plan from every rank's r (the micro-batch's rows, one owner), cost (os_loss_row_costs), cap
// (the rows a rank's loss can compute: its micro-batch's rows) and the rows' width C; r's rows moved to other ranks
// sent, theirs received. *here: the rows this rank computes (r itself when nothing moves), with dh their dL/dhn.
// Every rank calls it at the same point, in the same order; r and *here stay until os_head_back.
os_head_exch *os_head_out(const os_loss_rows *r, const double cost[OS_LOSS_NCLS], int64_t cap, int64_t C, int dh,
                          os_loss_rows *here);
// The answers back, once *here is computed: r's losses in r->sums and its dL/dhn in r->dhn as os_loss_compute(r)
// would give them; the exchange freed. Every rank calls it. Returns the rows of r computed by other ranks.
int64_t os_head_back(os_head_exch *e);
