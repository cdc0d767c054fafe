#include "model/load_audit.h"
#include "core/err.h"
#include <stdio.h>
#include <string.h>

static const char *const MODULES[] = {"group_decode_adapter.", "encoder_projector."};   // may be initialised

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

static int ends(const char *s, const char *e) {
    size_t n = strlen(s), k = strlen(e);
    return n >= k && !strcmp(s + n - k, e);
}

// how init kind k fills a parameter (for the report line)
static const char *how(os_init_kind k) {
    switch (k) {
    case OS_INIT_LINEAR_W:
    case OS_INIT_LINEAR_B: return "uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) as torch.nn.Linear";
    case OS_INIT_NORMAL: return "normal(0, 0.02)";
    case OS_INIT_MEAN_ROWS: return "mean_resizing";
    case OS_INIT_ONES: return "ones";
    case OS_INIT_ZEROS: return "zeros";
    case OS_INIT_REQUIRED: break;
    }
    return "?";
}

// append to a report line (cut with "..." when long)
static void add(char *buf, size_t n, const char *fmt, const char *a, const char *b) {
    size_t k = strlen(buf);
    if (k + 4 >= n) return;
    int w = snprintf(buf + k, n - k, fmt, a, b);
    if (w < 0 || (size_t)w >= n - k) snprintf(buf + n - 4, 4, "...");
}

static int is_lora(const char *name) { return strstr(name, ".lora_A.") || strstr(name, ".lora_B."); }

static int may_init(const os_st_dir *d, const char *name, const os_audit_rules *ru) {
    if (is_lora(name)) {   // --train_type lora: a new adapter, unless the directory has LoRA tensors already
        for (int i = 0; i < os_st_dir_count(d); i++)
            if (is_lora(os_st_dir_at(d, i)->name)) return 0;
        return 1;
    }
    for (size_t m = 0; m < sizeof MODULES / sizeof MODULES[0]; m++) {
        if (!starts(name, MODULES[m])) continue;
        for (int i = 0; i < os_st_dir_count(d); i++)   // a module partly present is not initialised
            if (starts(os_st_dir_at(d, i)->name, MODULES[m])) return 0;
        return ru->first_slam || (m == 1 && ru->first_speech);
    }
    return 0;
}

int os_params_audit(const os_registry *r, const os_st_dir *d, const char *dir, int nb, const os_audit_rules *ru) {
    int np = nb < r->nb ? r->b[nb].first : r->np, unused = 0, lora = 0;
    char bad[1024] = "", ignored[512] = "", init[2048] = "", desc[160];
    for (int i = 0; i < os_st_dir_count(d); i++) {
        const char *name = os_st_dir_at(d, i)->name;
        int j = os_reg_find(r, name);
        if (j >= 0 && j < np) continue;
        if ((ru->tied && !strcmp(name, "lm_head.weight")) || ends(name, ".rotary_emb.inv_freq")) {
            add(ignored, sizeof ignored, "%s%s", ignored[0] ? ", " : "", name);
            continue;
        }
        if (unused++ < 8) add(bad, sizeof bad, "%s'%s'", unused > 1 ? ", " : "", name);
    }
    if (unused)
        return os_errf("%s: %d tensor(s) that no parameter of the model reads: %s%s (renamed, e.g. with a 'model.' "
                       "prefix, or from another model? names as docs/model-directory.md lists them)", dir, unused, bad,
                       unused > 8 ? ", ..." : "");
    for (int i = 0; i < np; i++) {
        const os_param *p = &r->p[i];
        const os_st_tensor *t = os_st_dir_find(d, p->name);
        char shape[96];
        snprintf(desc, sizeof desc, "%s %s", p->name, os_shape_str(p->shape, p->ndim, shape, sizeof shape));
        if (t && p->resizable && t->shape[0] < p->shape[0]) {
            char rows[64];
            snprintf(rows, sizeof rows, "rows %lld-%lld", (long long)t->shape[0], (long long)p->shape[0] - 1);
            add(init, sizeof init, "%s%s ", init[0] ? "; " : "", p->name);
            add(init, sizeof init, "%s by %s", rows, how(p->init));
        }
        if (t || p->init == OS_INIT_REQUIRED || p->resizable) continue;   // (missing required ones: os_params_check)
        if (!may_init(d, p->name, ru))
            return os_errf("%s: tensor '%s' is missing: it is trained and is initialised only in a first SLAM-Omni run "
                           "(a Qwen2 directory without slam_omni.safetensors) or, for the projector, a first run with "
                           "--speech_encoder (docs/model-directory.md)", dir, desc);
        if (is_lora(p->name)) {   // counted, not listed (7 per layer)
            lora++;
            continue;
        }
        add(init, sizeof init, "%s%s ", init[0] ? "; " : "", desc);
        add(init, sizeof init, "%s%s", how(p->init), "");
    }
    if (lora) {
        char text[160];
        snprintf(text, sizeof text, "%d LoRA matrices: *.lora_A.weight %s, *.lora_B.weight zeros (as PEFT)", lora,
                 how(OS_INIT_LINEAR_W));
        add(init, sizeof init, "%s%s", init[0] ? "; " : "", text);
    }
    if (ignored[0]) os_info("note: %s: ignored (tie_word_embeddings / a recomputed buffer, as transformers does): %s", dir, ignored);
    if (init[0])
        os_info("note: %s: initialised (not in the directory%s; --seed keys the values): %s", dir,
                ru->first_slam ? ": no slam_omni.safetensors, a first SLAM-Omni run" : lora ? ": a new LoRA adapter" : "", init);
    return 0;
}
