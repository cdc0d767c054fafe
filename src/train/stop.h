// Ending a run on purpose, on every rank at the same point, with a message that says what happened and how to go
// on: a signal (Ctrl-C, SIGTERM from mpirun, Slurm or kill), a failed write of an output, an error on any rank.
// Signals and rank-local write failures only set a flag; os_stop_boundary (a collective, once per step) turns the
// flags into the same decision on every rank. Every ending prints the cause on every rank, then on rank 0 the
// step reached and the last complete checkpoint with the --resume_from_checkpoint hint (docs/operations.md).
#pragma once
#include <stdint.h>

// install the SIGINT / SIGTERM handlers: the first signal sets a flag and writes one line (async-signal-safe),
// a second one ends the process at once with the default action
void os_stop_install(void);
// the step now running of `total` (named by the signal handler and the stop message)
void os_stop_step(int64_t step, int64_t total);
// the newest complete checkpoint directory and its step (named when the run stops)
void os_stop_checkpoint(const char *dir, int64_t step);
// the final save (the last checkpoint, final_model) begins (done 0): a signal then says it completes first; ends
// (done 1): a rank that got a signal during it says that the run completed
void os_stop_final(int done);
// record os_errmsg() as this rank's failed write; rank-local: the run ends at the next os_stop_boundary
void os_stop_write_failed(void);
// collective at a step boundary, `done` steps completed: returns when nothing happened, otherwise ends every rank
// (exit 1 after a failed write, 128 + the signal number after a signal)
void os_stop_boundary(int64_t done);
// a note every stop before the first step adds to its cause (the resumed checkpoint's differing settings, checked
// in full once the data is open: a failure before that names them too); NULL clears it
void os_stop_note(const char *text);
// collective: when rc < 0 on any rank, every rank prints the first failing rank's message and ends (exit 1)
void os_stop_if_failed(int rc);
