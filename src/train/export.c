#include "train/export.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/atomic.h"
#include "io/hfconfig.h"
#include "io/safetensors.h"
#include "zero/comm.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int os_is_slam_param(const char *name) {
    return !strncmp(name, "group_decode_adapter.", 21) || !strncmp(name, "encoder_projector.", 18);
}

// the first two are written by export itself
static const char *model_files[] = {"config.json", "slam_omni.json", "tokenizer.json", "tokenizer_config.json", "vocab.json",
                                    "merges.txt", "special_tokens_map.json", "generation_config.json", "added_tokens.json"};

int os_copy_model_files(const char *src_dir, const char *dst_dir, int with_configs) {
    for (size_t k = with_configs ? 0 : 2; k < sizeof model_files / sizeof model_files[0]; k++) {
        char src[4200], dst[4200];
        snprintf(src, sizeof src, "%s/%s", src_dir, model_files[k]);
        snprintf(dst, sizeof dst, "%s/%s", dst_dir, model_files[k]);
        if (access(src, R_OK)) continue;
        size_t n;
        char *d = os_read_file(src, &n);
        int rc = d ? os_write_file_atomic(dst, d, n) : -1;
        os_free(d);
        if (rc < 0) return -1;
    }
    return 0;
}

// the frozen speech encoder is not part of the exported model (it stays in its own --speech_encoder directory)
static int exported(const os_model *m, int b) { return b < os_model_own_buckets(m); }

// open a writer for the parameters p with (slam == os_is_slam_param(name)); NULL writer when there are none
static int open_writer(const os_model *m, const char *path, int slam, os_st_writer **w) {
    const os_registry *r = &m->reg;
    int n = 0;
    const char **names = os_alloc(sizeof(char *) * (size_t)r->np, "export names");
    int *nd = os_alloc(sizeof(int) * (size_t)r->np, "export ndims");
    int64_t(*sh)[8] = os_alloc(sizeof(int64_t[8]) * (size_t)r->np, "export shapes");
    for (int i = 0; i < r->np; i++) {
        if (os_is_slam_param(r->p[i].name) != slam || !exported(m, r->p[i].bucket)) continue;
        names[n] = r->p[i].name, nd[n] = r->p[i].ndim;
        memcpy(sh[n], r->p[i].shape, sizeof(int64_t) * 4);
        n++;
    }
    const char *meta[] = {"format", "pt", NULL};
    *w = n ? os_st_writer_begin(path, n, names, nd, (const int64_t(*)[8])sh, meta) : NULL;
    os_free(names), os_free(nd), os_free(sh);
    return n && !*w ? -1 : 0;
}

int os_export(const os_model *m, zr_runtime *rt, const char *src_dir, const char *out_dir) {
    int root = comm_rank() == 0, rc = 0;
    char tmp[4096], path[4200], src[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", out_dir, (int)getpid());
    os_st_writer *wl = NULL, *ws = NULL;
    if (root) {
        os_rm_rf(tmp);
        rc = os_mkdir_p(tmp);
        snprintf(path, sizeof path, "%s/model.safetensors", tmp);
        if (rc == 0) rc = open_writer(m, path, 0, &wl);
        snprintf(path, sizeof path, "%s/slam_omni.safetensors", tmp);
        if (rc == 0 && m->oc.G > 0) rc = open_writer(m, path, 1, &ws);
    }
    const os_registry *r = &m->reg;
    for (int b = 0; b < r->nb; b++) {   // every rank takes part in the gathers, whatever rank 0's state
        if (!exported(m, b)) continue;
        float *full = zr_gather(rt, b);
        for (int i = r->b[b].first; root && rc == 0 && i < r->b[b].first + r->b[b].count; i++) {
            os_st_writer *w = os_is_slam_param(r->p[i].name) ? ws : wl;
            if (w) rc = os_st_writer_put(w, full + r->p[i].offset, r->p[i].numel);
        }
        zr_release(rt, b);
    }
    if (root) {
        if (rc == 0 && wl) rc = os_st_writer_finish(wl), wl = NULL;
        if (rc == 0 && ws) rc = os_st_writer_finish(ws), ws = NULL;
        os_st_writer_abort(wl), os_st_writer_abort(ws);
        snprintf(src, sizeof src, "%s/config.json", src_dir);
        snprintf(path, sizeof path, "%s/config.json", tmp);
        if (rc == 0) rc = os_qwen2_config_rewrite(src, path, (int)m->V);
        snprintf(path, sizeof path, "%s/slam_omni.json", tmp);
        if (rc == 0 && m->oc.G > 0) rc = os_omni_config_write(path, &m->oc);
        if (rc == 0) rc = os_copy_model_files(src_dir, tmp, 0);
        if (rc == 0) rc = os_rename_dir_atomic(tmp, out_dir);
        if (rc < 0) {
            os_err_ctx("export to %s", out_dir);
            os_rm_rf(tmp);
        }
    }
    if (comm_any_failed(rc < 0)) {
        if (!root) os_errf("export to %s failed on rank 0", out_dir);
        return -1;
    }
    return 0;
}
