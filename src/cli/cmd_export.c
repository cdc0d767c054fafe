// omnishard export --checkpoint DIR --output_dir OUT: a transformers-loadable directory from a sharded
// checkpoint (any world size; run it on 1 rank, or under mpirun to keep each rank's memory to a slice).
#include "cli/commands.h"
#include "core/err.h"
#include "io/hfconfig.h"
#include "model/omni.h"
#include "persist/checkpoint.h"
#include "persist/export.h"
#include "zero/comm.h"
#include "train/model_runtime.h"
#include "zero/runtime.h"
#include <stdio.h>
#include <string.h>

static int export_checkpoint(const char *ckpt, const char *out, int merge_lora) {
    char path[4200];
    os_qwen2_config cfg;
    os_omni_config oc;
    snprintf(path, sizeof path, "%s/config.json", ckpt);
    if (os_qwen2_config_load(path, &cfg) < 0) return -1;
    os_omni_config_default(&oc, 0);
    snprintf(path, sizeof path, "%s/slam_omni.json", ckpt);
    int slam = os_omni_config_load(path, &oc);
    if (slam < 0) return -1;
    os_model m;
    if (os_model_build(&m, &cfg, &oc) < 0) return -1;
    for (int b = 0; b < m.reg.nb; b++) os_reg_freeze(&m.reg, b);   // parameters only: no gradients, no moments
    zr_runtime rt;
    int N = comm_size();
    os_runtime_init(&rt, &m.reg, N > 1 ? 3 : 0, comm_rank(), N);
    int64_t step;
    int rc = os_checkpoint_load(&m, &rt, ckpt, &step);
    if (rc == 0) rc = os_export(&m, &rt, ckpt, out, merge_lora);
    if (rc == 0 && comm_rank() == 0) os_info("omnishard export: step %lld of %s written to %s", (long long)step, ckpt, out);
    zr_free(&rt);
    os_model_free(&m);
    return rc;
}

int cmd_export(int argc, char **argv) {
    const char *ckpt = NULL, *out = NULL;
    int merge = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: omnishard export --checkpoint OUTPUT_DIR/checkpoint-STEP --output_dir OUT [--merge_lora true|false]\n"
                   "  --merge_lora  LoRA checkpoints: true (default) merges the adapters into the weights; false writes the\n"
                   "                base weights and OUT/lora_adapter/ for PeftModel.from_pretrained (docs/training.md)\n");
            return 0;
        }
        if (i + 1 < argc && !strcmp(argv[i], "--checkpoint")) ckpt = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--output_dir")) out = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--merge_lora") && (!strcmp(argv[i + 1], "true") || !strcmp(argv[i + 1], "false")))
            merge = !strcmp(argv[++i], "true");
        else {
            fprintf(stderr, "omnishard export: unexpected argument '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (!ckpt || !out) {
        fprintf(stderr, "omnishard export: --checkpoint and --output_dir are required\n");
        return 2;
    }
    comm_init(&argc, &argv);
    int rc = export_checkpoint(ckpt, out, merge);
    if (comm_any_failed(rc < 0)) {
        if (rc < 0) os_info("omnishard export: %s", os_errmsg());
        comm_finalize();
        return 1;
    }
    comm_finalize();
    return 0;
}
