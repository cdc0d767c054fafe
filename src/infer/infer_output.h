// omnishard infer --output_file: the file is written only when omnishard can prove what it replaces or continues
// (docs/inference.md "The output file"). Rank 0 only:
// - refused: the dataset itself (the same inode), a path inside a model or checkpoint directory (--model, the speech
//   encoder, or any directory that holds a model's files), something other than a regular file;
// - an existing file is continued only with --resume true and replaced only with --overwrite true, and only when it
//   is an omnishard infer output (every complete line one record's line, in order); otherwise refused, naming what
//   it holds;
// - locked (fcntl) while the run writes it: a second run is refused with the first one's PID;
// - described by a settings file beside it, OUT.run.json (written to a temporary file and renamed into place): the
//   model, speech encoder and dataset with their content fingerprints, and the decoding options. --resume true
//   refuses a file begun with other ones, naming every difference.
#pragma once
#include "dataset/dataset.h"
#include "infer/infer.h"
#include "infer/infer_args.h"
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *path;
    char begun_with[4200];   // --resume: the dataset the file was begun with, when its content differs ("": same)
    int fd;            // the output file, open and locked until os_infer_output_close; -1: none (ranks > 0)
    int64_t done;      // complete lines already there (--resume true) and their bytes
    int64_t kept;
    int64_t bytes;     // bytes of complete lines in the file now (a failed write is cut back to them)
    int created;       // this run created it (removed again when the run is refused before writing)
    void *settings;    // this run's settings, written by os_infer_output_start once every check passed
} os_infer_out;

// The checks above and the lock, before the model loads (nothing is changed on disk yet). speech_encoder: the
// encoder the run uses (NULL: none). 0, or -1 + message (a file this run created removed again).
int os_infer_output_open(os_infer_out *o, const infer_args *a, const os_gen_opts *g, const char *speech_encoder);
// Once the dataset is open: --resume true keeps the complete lines (at most ds->n), cutting off a partial last line,
// when each kept line is the line of the dataset's record at its place (its key, source_text and target_text; an
// error line is not compared): a dataset fixed after the records already decoded continues, another one is
// refused. Then the settings file is written. 0, or -1 + message (the file and its settings file as they were).
int os_infer_output_start(os_infer_out *o, os_dataset *ds);
// append one or more whole lines; a failed write (a full disk) is cut back to the last complete line and named
// with how many records the file holds. 0, or -1 + message.
int os_infer_output_write(os_infer_out *o, const char *buf, size_t n, int64_t records);
// close (and unlock); 0, or -1 + message
int os_infer_output_close(os_infer_out *o);
// the settings file of output path `out` into buf[cap]
void os_infer_output_settings_path(const char *out, char *buf, size_t cap);
