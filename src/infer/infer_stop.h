// SIGINT / SIGTERM during omnishard infer --output_file (docs/inference.md "Stopping and faults"), installed once the
// output file is checked: the first signal sets os_stop_signal (core/err.h) and says on stderr what happens next;
// the model's loading or the records being decoded are finished (their lines written), then every rank stops at the
// same round (infer_dataset.c) and rank 0 says how many records the file holds. A second signal ends the process at once (the default action).
#pragma once

void os_infer_stop_install(void);
