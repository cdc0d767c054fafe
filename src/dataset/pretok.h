// Speech inputs of pretokenized samples (os_pretok_open is declared in dataset/dataset.h). A record may carry
// "speech_wav": PATH and "speech_start": P: the positions [P, P+T_s) are the sample's speech span (their audio
// rows are replaced by the projector output; every label there must be -100), T_s = the model's speech
// positions per input (max_source_positions / 5 of the encoder). See docs/dataset.md.
#pragma once
#include "dataset/dataset.h"

// Tell a pretokenized dataset T_s (0: the model has no speech encoder) once after opening it: builds each speech
// sample's position mask and checks the spans. 0, or -1 + message naming file:line. Other datasets: no-op.
int os_pretok_speech_len(os_dataset *d, int64_t T_s);
