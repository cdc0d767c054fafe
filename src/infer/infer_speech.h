// The spoken questions of many records' prompts through the session's speech front end (session/speech.h) at once:
// the WAVs log-mel'd, the Whisper encoder and the projector (omnishard infer --output_file, --speech_batch_size:
// docs/inference.md "A whole test set"); a single answer runs them at its first forward (infer.c).
#pragma once
#include "infer/infer.h"

// The encoder and the projector over prompts p[0..n) at once (each encoder layer gathered once for all): each prompt
// with a spoken question gets its projector output p[i]->proj [T_s, C], exactly what its own first forward computes
// (the products run record by record). A prompt whose speech input cannot be used (an unreadable WAV, speech for a
// model without an encoder) gets its message in why[i] (malloc'd, naming it "sample index[i]"; NULL for the others)
// and no projector output. Collective unless local (the encoder's and the projector's gathers: every rank calls it,
// n may be 0; local and no speech: nothing runs). Returns the count of failures.
int64_t os_infer_speech_batch(os_session *s, os_infer_prompt *const *p, int64_t n, const int64_t *index, int local,
                              char **why);
