// omnishard: entry point and sub-command dispatch. Each sub-command lives in its own cmd_*.c file.
#include "cli/commands.h"
#include "core/cpu.h"
#include "core/err.h"
#include "core/knobs.h"
#include "core/version.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "model/omni.h"
#include "tokenizer/tokenizer.h"
#include "zero/comm.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The commands: a plain table (a new command: its cmd_NAME.c, its line in cli/commands.h and here)
static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} cmds[] = {
    {"sft", cmd_sft, "fine-tune a (SLAM-Omni) Qwen2 model; run under mpirun for ZeRO sharding"},
    {"export", cmd_export, "write a transformers-loadable directory from a checkpoint"},
    {"plan", cmd_plan, "per-rank memory of a config for a world size and ZeRO stage"},
    {"tokenize", cmd_tokenize, "Qwen2 tokenizer: text lines on stdin -> JSON id arrays (--decode: reverse)"},
    {"plot", cmd_plot, "draw the charts of a logging.jsonl (images/: PNG and SVG; the loss curves as SVG)"},
    {"infer", cmd_infer, "generate text and audio tokens from a trained model"},
    {"mel", cmd_mel, "Whisper log-mel spectrogram of a WAV file"},
    {"convert", cmd_convert, "SLAM-Omni Parquet shards (HF datasets) -> audio files + JSONL records for sft"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: omnishard <command> [options]   (omnishard <command> --help for its options)\n"
               "       omnishard --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(f, "  %-9s %s\n", cmds[i].name, cmds[i].help);
}

// what a command wrote to standard output (tokenize, infer, help) and could not be written is an error, not a loss
static int check_stdout(int rc) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    fprintf(stderr, "omnishard: writing standard output failed: %s\n", strerror(errno));
    return rc ? rc : 1;
}

// OMNISHARD_COUNT_OPS=PATH: rank 0 writes PATH, rank r PATH.r
static void write_op_counts(void) {
    char path[4096];
    const char *base = os_knobs()->count_ops;
    if (os_rank > 0) snprintf(path, sizeof path, "%s.%d", base, os_rank);
    else snprintf(path, sizeof path, "%s", base);
    if (os_ops_count_write(path) < 0) fprintf(stderr, "omnishard: %s\n", os_errmsg());
}

int main(int argc, char **argv) {
    os_cpu_setup(argc, argv);   // may start the program again (OpenBLAS's core type): the check below runs once
    if (os_knobs_check() < 0) {   // the OMNISHARD_* variables, read once, checked before any command starts
        fprintf(stderr, "omnishard: %s\n", os_errmsg());
        return 2;
    }
    // the settings the variables make, handed once to the modules they set (only cli/ and core/ read os_knobs)
    const os_knobs_t *kn = os_knobs();
    if (kn->gemm_times) k_gemm_times_enable();
    k_gemm_bf16_force(kn->bf16_gemm);
    os_model_force_logits_rows(kn->logits_rows);
    os_tok_force_ranges(kn->tok_ranges);
    comm_force_way(kn->comm);
    if (kn->count_ops) atexit(write_op_counts);   // the seam's calls counted (cli/device.c), written at exit
    if (argc == 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
        printf("omnishard %s (git %s)\n", os_version(), os_git_commit());
        return check_stdout(0);
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return check_stdout(argc < 2 ? 2 : 0);
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) return check_stdout(cmds[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "omnishard: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
