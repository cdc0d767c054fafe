// ms-swift's sft options omnishard does not have: the rejected ones with the reason for the error line, the ones with
// no effect here accepted with a note (docs/training.md "ms-swift's sft options" lists both).
#pragma once
#include "core/opts.h"

#define OS_SFT_KNOWN_MAX 96   // room for the table's flags of what was given (os_sft_args.known_given)

const os_opt_known *os_sft_swift_known(int *n);
// a note (os_info: rank 0) for each no-effect option given[i] flags: "omnishard COMMAND: --x accepted, no effect here: WHY"
void os_sft_swift_notes(const unsigned char *given, const char *command);
