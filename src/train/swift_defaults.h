// The sft defaults that differ from ms-swift's, with the reason for each: printed by `omnishard sft --help` after
// the options and listed in docs/training.md "Defaults that differ from ms-swift" (a test keeps the two equal and
// checks each value against what a run without the option resolves to, args.json).
#pragma once
#include <stdio.h>

void os_sft_swift_defaults_usage(FILE *f);
