// The sub-commands of omnishard, one per src/cli/cmd_NAME.c: int cmd_NAME(int argc, char **argv), argv[0] the
// command's name; returns the process exit status (0 done or --help, 1 failed, 2 bad options). main.c lists them.
#pragma once

int cmd_sft(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_infer(int argc, char **argv);
int cmd_mel(int argc, char **argv);
int cmd_mel_encoder(int argc, char **argv);   // omnishard mel --encoder (cmd_mel_encoder.c)
int cmd_convert(int argc, char **argv);

// at the end of omnishard sft (rank 0; train/sft.h's after): RUN_DIR/images/ (PNG + SVG per metric) from its
// logging.jsonl, read through log_fd, as omnishard plot draws them (cmd_plot.c); 0, or -1 + message
int cli_plot_run(const char *run_dir, int log_fd);
