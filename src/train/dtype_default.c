// The default training precision: the model's own (dtype_default.h).
#include "train/dtype_default.h"
#include "io/hfconfig.h"
#include <stdio.h>
#include <string.h>

void os_model_torch_dtype(const char *model_dir, char *out, size_t n) {
    char path[4200];
    os_qwen2_config c;
    out[0] = 0;
    snprintf(path, sizeof path, "%s/config.json", model_dir ? model_dir : "");
    FILE *f = model_dir ? fopen(path, "r") : NULL;
    if (!f) return;
    fclose(f);
    if (os_qwen2_config_load(path, &c) == 0) snprintf(out, n, "%s", c.torch_dtype);
}

void os_sft_dtype_settle(os_sft_training_opts *t, int tf32, const char *model_dtype, const char *source,
                         const char *command, char *line, size_t n) {
    line[0] = 0;
    if (strcmp(t->torch_dtype, "auto")) return;   // --torch_dtype given
    int bf = !strcmp(model_dtype, "bfloat16") || !strcmp(model_dtype, "bf16");
    t->torch_dtype = bf && !tf32 ? "bfloat16" : "float32";
    if (!model_dtype[0]) return;   // the model cannot be read: its load stops the run, naming why
    const char *pre = "omnishard";
    if (bf && tf32)
        snprintf(line, n, "%s %s: precision: fp32 with TF32 products (--tf32 true), although the model's torch_dtype is "
                 "bfloat16 (%s); --torch_dtype bfloat16 without --tf32 trains in bf16 mixed precision", pre, command, source);
    else if (bf)
        snprintf(line, n, "%s %s: precision: bf16 mixed precision, the model's own torch_dtype (bfloat16 in %s), as "
                 "ms-swift's default; --torch_dtype float32 trains in fp32", pre, command, source);
    else if (!strcmp(model_dtype, "float16") || !strcmp(model_dtype, "fp16"))
        snprintf(line, n, "%s %s: precision: fp32: the model's torch_dtype is float16 (%s) and omnishard has no fp16 "
                 "training (it needs loss scaling); --torch_dtype bfloat16 trains in bf16 mixed precision", pre, command, source);
    else
        snprintf(line, n, "%s %s: precision: fp32, the model's own torch_dtype (%s in %s); --torch_dtype bfloat16 "
                 "trains in bf16 mixed precision", pre, command, model_dtype[0] ? model_dtype : "float32", source);
}
