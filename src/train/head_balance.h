// Balancing the head's work across ranks (docs/training.md "Balancing the head across ranks"). Since the head skips
// the rows without a target and computes only the lm_head columns a row's targets need (model/loss.h, row classes),
// its work on a rank depends on that rank's samples: in SLAM-Omni, on how much of each answer is text and how much
// is audio. The ranks wait for the slowest at the next collective. The step (train/step.c) computes the loss's rows
// through os_head_balance instead of os_loss_compute when there are several ranks and --head_balance: the rows move
// from the ranks with more work to the ranks with less: every rank's row counts per class are all-gathered, every
// rank computes the same plan from them (train/head_plan.h), the moved rows go to their receivers, which compute
// them beside their own as rows of one more owner (os_loss_compute: their losses, their weight gradients into the
// receiver's own gradient buffers, summed over the ranks anyway by the reduce-scatter, and their input gradients),
// and the loss sums and input gradients go back to their owner. The model knows nothing of this: the loss
// (model/loss.h) computes whichever rows it is given.
// Messages, per pair of ranks (one all-to-all each way; each message's size rounded up to 8 bytes):
//   rows, owner -> receiver, K rows: hn [K, C] float, targets [G+1][K] int32 (term-major), the owner's gradient
//     scales [G+1] float;
//   back, receiver -> owner: loss sums [G+1] double, correct [G+1] int64, then with dh the rows' dL/dhn [K, C].
// The K rows are the owner's moves to that receiver in plan order, each the next rows from the end of its class.
#pragma once
#include "model/loss.h"

// os_loss_compute(L, r) over every rank: r's losses into r->sums and its dL/dhn into r->dhn as os_loss_compute gives
// them, some of r's rows computed by other ranks, some of theirs here. Every rank calls it at the same point, in
// the same order. Returns the rows of r computed by other ranks.
int64_t os_head_balance(os_loss *L, const os_loss_rows *r);
