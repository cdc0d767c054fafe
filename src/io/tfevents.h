// TensorBoard event files (the format TensorFlow's and PyTorch's SummaryWriter write; docs/training.md
// "TensorBoard"). A file is a sequence of records:
//   uint64 length (little-endian) | uint32 masked CRC32C of those 8 bytes | length bytes of data | uint32 masked
//   CRC32C of the data
// masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. Each record's data is a serialized tensorflow.Event proto:
//   wall_time (1, double), step (2, int64), file_version (3, string: the first event, "brain.Event:2"),
//   summary (5, Summary: repeated value (1, Summary.Value: tag (1, string), simple_value (2, float))),
//   session_log (7, SessionLog: status (1, enum: START = 1)).
// A writer makes a new file DIR/events.out.tfevents.SECONDS.HOST.PID.N (a resumed run adds a file beside the
// earlier ones; TensorBoard reads every file of the folder in order). Every write is checked and flushed.
#pragma once
#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *f;
    char path[4400];
    int failed;
    int64_t bytes;   // written so far, and their FNV-1a 64 (core/rng.h), for the run's manifest (io/runfiles.h)
    uint64_t sum;
} os_tfevents;

// create DIR (and its parents) and a new event file in it, holding the file_version event; 0, or -1 + message
int os_tfevents_open(os_tfevents *w, const char *dir);
// one event at `step` holding the scalar tag = value (as float32); 0, or -1 + message naming the file
int os_tfevents_scalar(os_tfevents *w, int64_t step, double wall_time, const char *tag, double value);
// a SessionLog START at `step` (Event field 7, SessionLog {status (1) = START}): TensorBoard (its EventAccumulator,
// file_version 2) then drops the points of every tag at `step` and later read before it; a resumed run writes it at
// its first step, so the steps the earlier run logged after its checkpoint are dropped as logging.jsonl drops them
int os_tfevents_session_start(os_tfevents *w, int64_t step);
// flush, fsync and close; 0, or -1 + message
int os_tfevents_close(os_tfevents *w);
// CRC32C (Castagnoli) of n bytes, as the record framing uses it (before masking)
uint32_t os_crc32c(const void *data, size_t n);
