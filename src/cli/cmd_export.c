// omnishard export --checkpoint DIR --output_dir OUT: a transformers-loadable directory from a sharded
// checkpoint (any world size; run it on 1 rank, or under mpirun to keep each rank's memory to a slice).
#include "cli/commands.h"
#include "cli/device.h"
#include "core/device.h"
#include "core/err.h"
#include "core/opts.h"
#include "persist/export.h"
#include "session/session.h"
#include "zero/comm.h"
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// the checkpoint opened as a session (session/session.h: every bucket frozen, its slices re-cut for these ranks),
// then written as a model directory
static int export_checkpoint(const char *ckpt, const char *out, const char *save_dtype, os_export_opts *eo) {
    char path[4200];
    snprintf(path, sizeof path, "%s/slam_omni.json", ckpt);   // written by sft for a SLAM-Omni or a LoRA model
    int N = comm_size();
    os_session_opts o = {.model = ckpt, .slam = access(path, F_OK) == 0, .code_layer = -1, .num_latency_tokens = -1,
                         .do_layershift = -1, .zero_stage = N > 1 ? 3 : 0, .seed = 42, .frozen = 1, .checkpoint = 1};
    os_session s;
    if (os_session_open(&s, &o, comm_rank(), N) < 0) return -1;   // (the process ends after the message)
    int rc = os_export_dtype(save_dtype, ckpt, &eo->dtype);   // the same file, the same answer on every rank
    if (rc == 0) rc = os_export(&s.model, &s.rt, ckpt, out, eo);
    if (rc == 0 && comm_rank() == 0)
        os_info("omnishard export: step %lld of %s written to %s", (long long)s.ckpt_step, ckpt, out);
    os_session_close(&s);
    return rc;
}

typedef struct {
    const char *checkpoint, *output_dir, *save_dtype, *device;
    int merge_lora, overwrite_output_dir;
    int64_t max_shard_size;
} export_args;

static int parse_max_shard_size(void *obj, const char *v) { return os_export_shard_size(v, &((export_args *)obj)->max_shard_size); }
static void show_max_shard_size(const void *obj, char *buf, size_t n) {
    snprintf(buf, n, "%lld", (long long)((const export_args *)obj)->max_shard_size);
}

#define F(n) .name = #n, .off = offsetof(export_args, n)
static const os_opt OPTS[] = {
    {F(checkpoint), .type = OS_OPT_STR, .alias = "--adapters", .metavar = "DIR",
     .help = "OUTPUT_DIR/checkpoint-STEP of omnishard sft (required; ms-swift's --adapters is the same option: the "
             "checkpoint holds its base model)"},
    {F(output_dir), .type = OS_OPT_STR, .metavar = "DIR",
     .help = "the directory to write (default with --merge_lora true: CHECKPOINT-merged beside the checkpoint, as "
             "ms-swift's export)"},
    {F(merge_lora), .type = OS_OPT_BOOL, .help = "LoRA checkpoints: true (default) merges the adapters into the weights; "
                                                 "false writes the base weights and OUT/lora_adapter/ for "
                                                 "PeftModel.from_pretrained (docs/training.md)"},
    {F(save_dtype), .type = OS_OPT_CHOICE, .choices = "auto|float32|fp32|bfloat16|bf16|float16|fp16",
     .help = "dtype of the written tensors: auto (default) the checkpoint's config.json torch_dtype (the dtype sft "
             "saved with); the fp32 weights rounded to nearest even (docs/training.md \"Saved models\")"},
    {F(max_shard_size), .type = OS_OPT_CUSTOM, .parse = parse_max_shard_size, .show = show_max_shard_size,
     .help = "model.safetensors above this size is split into model-0000K-of-0000N.safetensors with its index, as "
             "transformers (default 5GB; 500MB, 2GiB, or bytes)"},
    {F(overwrite_output_dir), .type = OS_OPT_BOOL, .help = "replace a non-empty --output_dir (default false: an error); "
                                                           "never one that holds a checkpoint"},
    {F(device), .type = OS_OPT_STR, .metavar = OS_DEVICE_VALUES,
     .help = "the backend the checkpoint is opened on (default cpu; guard: the test backend, docs/design.md)"},
};
#undef F

// ms-swift's `swift export` options omnishard's export does not have: refused with the reason, or noted when they
// change nothing here (docs/operations.md "Where omnishard export writes")
#define QUANT "no quantized export: the weights are written in --save_dtype"
#define UPLOAD "nothing is uploaded: upload the written directory yourself (`huggingface-cli upload`)"
static const os_opt_known KNOWN[] = {
    {"model", "the checkpoint (--checkpoint, or --adapters) holds its base model: leave --model out", 0},
    {"quant_method", QUANT, 0},
    {"quant_bits", QUANT, 0},
    {"push_to_hub", UPLOAD, 0},
    {"hub_model_id", UPLOAD, 0},
    {"to_ollama", "no Ollama export: the written directory is a transformers model", 0},
    {"safe_serialization", "the model is always written as safetensors", 1},
    {"merge_device_map", "the merge runs on each rank's slice of the weights (--device)", 1},
};
#undef QUANT
#undef UPLOAD

// --output_dir not given: CHECKPOINT-merged beside the checkpoint under --merge_lora true, as ms-swift's
// `swift export --adapters DIR --merge_lora true` writes DIR-merged; --checkpoint is required
static int default_output_dir(export_args *a) {
    static char merged[4200];
    if (!a->checkpoint) return os_errf("--checkpoint (or ms-swift's --adapters) is required: the OUTPUT_DIR/checkpoint-STEP to export");
    if (a->output_dir) return 0;
    if (!a->merge_lora)
        return os_errf("--output_dir is required with --merge_lora false (with --merge_lora true it defaults to "
                       "CHECKPOINT-merged)");
    size_t n = strlen(a->checkpoint);
    while (n > 1 && a->checkpoint[n - 1] == '/') n--;
    if (n + 8 >= sizeof merged) return os_errf("--checkpoint: path too long");
    snprintf(merged, sizeof merged, "%.*s-merged", (int)n, a->checkpoint);
    a->output_dir = merged;
    return 0;
}

int cmd_export(int argc, char **argv) {
    export_args a = {.merge_lora = 1, .save_dtype = "auto", .max_shard_size = OS_SHARD_DEFAULT, .device = "cpu"};
    const os_opt_group g = {.title = "options", .opts = OPTS, .n = (int)(sizeof OPTS / sizeof OPTS[0]), .obj = &a};
    unsigned char noted[sizeof KNOWN / sizeof KNOWN[0]] = {0};
    const os_opt_cmd c = {.command = "export", .groups = &g, .ngroups = 1, .known = KNOWN,
                          .nknown = (int)(sizeof KNOWN / sizeof KNOWN[0]), .known_given = noted,
                          .usage = "usage: omnishard export --checkpoint OUTPUT_DIR/checkpoint-STEP [--output_dir OUT] "
                                   "[--merge_lora true|false] [--save_dtype auto|float32|bfloat16|float16]\n"
                                   "       [--max_shard_size 5GB] [--overwrite_output_dir true|false] [--device D]\n"
                                   "       mpirun -np N omnishard export ... (each rank holds a slice)\n"};
    int rc = os_opts_parse(&c, argc, argv);
    if (rc == 1) return os_opts_usage(&c, stdout), 0;
    if (rc == 0) rc = default_output_dir(&a);
    if (rc == 0) rc = os_cli_device_open(a.device, 0, 0);
    os_export_opts eo = {.merge_lora = a.merge_lora, .max_shard_bytes = a.max_shard_size};
    if (rc < 0) return fprintf(stderr, "omnishard export: %s\n", os_errmsg()), 2;
    char out[4096];   // without trailing slashes: OUT.tmp.PID is a sibling of OUT, never inside it
    snprintf(out, sizeof out, "%s", a.output_dir);
    for (size_t n = strlen(out); n > 1 && out[n - 1] == '/';) out[--n] = 0;
    comm_init(&argc, &argv);
    if (comm_rank() == 0) {
        os_opts_known_notes(KNOWN, c.nknown, noted, "export");   // ms-swift's options that change nothing here
        os_export_cleanup(out, 0);
        rc = os_export_check_dest(a.checkpoint, out, a.overwrite_output_dir);
    }
    if (!comm_any_failed(rc < 0)) rc = export_checkpoint(a.checkpoint, out, a.save_dtype, &eo);
    else if (rc == 0) rc = os_err_echo("rank 0 refused --output_dir %s", out);
    if (comm_any_failed(rc < 0)) {
        if (rc < 0) os_info("omnishard export: %s", os_errmsg());
        comm_finalize();
        return 1;
    }
    comm_finalize();
    return 0;
}
