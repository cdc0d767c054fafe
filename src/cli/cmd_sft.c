// omnishard sft: parse the ms-swift style flags, start MPI, agree on them across ranks, run the training loop.
#include "cli/commands.h"
#include "cli/device.h"
#include "core/alloc.h"
#include "core/device.h"
#include "core/err.h"
#include "core/knobs.h"
#include "dataset/mix.h"
#include "io/hfconfig.h"
#include "persist/checkpoint_limit.h"
#include "train/agree.h"
#include "train/args.h"
#include "train/ds_config.h"
#include "train/dtype_default.h"
#include "train/sft.h"
#include "train/sft_open.h"
#include "zero/comm.h"
#include <string.h>

// what the options name, looked at before the run: a --deepspeed JSON file applied; a Hub id instead of a directory (nothing is downloaded);
// --resume_from_checkpoint true (or a run directory): its latest complete checkpoint; false: no resume
// --torch_dtype auto: the model's own precision (a DeepSpeed file's bf16.enabled true or false overrides it); line: the
// start-up line saying which and why
static int settle(os_sft_args *a, int argc, char **argv, char *line, size_t nline) {
    char dtype[16], source[4200];
    os_model_torch_dtype(a->model.model, dtype, sizeof dtype);
    snprintf(source, sizeof source, "%s/config.json", a->model.model);
    os_sft_dtype_settle(&a->training, a->device.tf32, dtype, source, "sft", line, nline);
    const char *settled = a->training.torch_dtype;
    if (a->parallelism.deepspeed_file && os_ds_config_apply(&a->parallelism, &a->training, &a->checkpoint, argc, argv) < 0)
        return -1;   // a DeepSpeed JSON config
    if (strcmp(settled, a->training.torch_dtype)) line[0] = 0;   // its bf16.enabled chose (its note says so)
    if (os_tf32_check(a->device.tf32, a->device.device, os_sft_args_bf16(&a->training)) < 0) return -1;    // its bf16.enabled counts too
    if (os_hub_id_check("--model", a->model.model) < 0 || os_hub_id_check("--speech_encoder", a->model.speech_encoder) < 0) return -1;
    for (int i = 0; i < a->data.ndatasets + a->data.nval_datasets; i++) {   // a Hub dataset id: how to get the files
        int val = i >= a->data.ndatasets;
        const char *spec = val ? a->data.val_datasets[i - a->data.ndatasets] : a->data.datasets[i];
        char *path;
        int64_t n;
        if (os_data_source_parse(spec, &path, &n) < 0) return -1;
        int rc = os_dataset_hub_id_check(val ? "--val_dataset" : "--dataset", spec, path);
        os_free(path);
        if (rc < 0) return -1;
    }
    static char resume[4300];
    int found = os_checkpoint_resolve(a->checkpoint.resume_from_checkpoint, a->checkpoint.output_dir, resume, sizeof resume);
    if (found == 2) a->checkpoint.resume_from_checkpoint = NULL;
    if (found == 1) a->checkpoint.resume_from_checkpoint = resume;   // named by the "resumed from" line
    if (found >= 0 && a->checkpoint.resume_only_model && !a->checkpoint.resume_from_checkpoint)
        return os_errf("--resume_only_model true needs --resume_from_checkpoint (the checkpoint whose parameters it "
                       "loads; this run resumes none)");
    return found < 0 ? -1 : 0;
}

int cmd_sft(int argc, char **argv) {
    os_sft_args a;
    // a rank with invalid options still takes part in the agreement, so that every rank can say why the job stops;
    // the options are read before MPI starts so that --ddp_timeout bounds MPI_Init (and MPI_Finalize) as well
    int rc = os_sft_args_parse(&a, argc, argv);
    a.debug.log_samples = os_knobs()->log_samples;   // a test hook (core/knobs.h)
    static char dtype_line[4600];
    if (rc == 0) rc = settle(&a, argc, argv, dtype_line, sizeof dtype_line);
    // the device before MPI starts (each rank its GPU by the launcher's local rank); a rank that cannot open it
    // says why in the agreement below
    if (rc == 0) rc = os_cli_device_open(a.device.device, a.device.tf32, os_sft_args_bf16(&a.training));
    comm_set_timeout(rc == 0 ? a.parallelism.ddp_timeout : OS_DDP_TIMEOUT_DEFAULT);   // the agreement has a deadline too
    comm_init(&argc, &argv);
    rc = os_agree_parse(rc);
    if (rc == 1) {
        if (comm_rank() == 0) os_sft_args_usage(stdout);
        comm_finalize();
        return 0;
    }
    if (rc == 0) {   // the model's defaults filled in: a default agrees with the same value given (docs/training.md)
        os_sft_args resolved = a;
        if (comm_size() > 1) os_sft_resolve_model_defaults(&resolved.model);
        rc = os_agree_options(&resolved);
    }
    if (rc < 0) {   // every rank prints the reason (os_die would end the others before they print)
        if (comm_size() > 1) fprintf(stderr, "omnishard: rank %d: %s\n", comm_rank(), os_errmsg());
        else fprintf(stderr, "omnishard sft: %s\n", os_errmsg());
        comm_finalize();
        return 2;
    }
    if (comm_rank() == 0 && dtype_line[0]) os_info("%s", dtype_line);
    rc = os_sft_run(&a, cli_plot_run);   // + the charts of the run, as ms-swift's images/ (docs/dataset.md "Plot")
    os_cli_device_report();
    comm_finalize();
    return rc;
}
