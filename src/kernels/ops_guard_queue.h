// The guard backend's stream (ops_guard_queue.c): every compute member's call recorded, run in order at the
// synchronisation points (the backend's download and free call gd_flush).
#pragma once
#include "kernels/ops.h"
#include <stddef.h>

// records a call: run(args) later (args and extra copied; extra's bytes follow args: gd_extra)
void gd_enqueue(void (*run)(const void *args), const void *args, size_t bytes, const void *extra, size_t nextra);
const void *gd_extra(const void *args, size_t bytes);   // a record's extra bytes (args: its bytes long)
void gd_flush(void);   // runs the recorded calls in the order made
int gd_idle(void);     // 1: nothing is recorded (a write now is in the order made)
// puts the queued members (every compute member, zero, copy, the bf16 pin and bindings) into the table
void gd_fill_queued(os_ops *t);
// the CPU backend the recorded calls run on (os_ops_cpu until set: os_ops_guard_open sets the one of its precision)
void gd_set_cpu(const os_ops *cpu);
