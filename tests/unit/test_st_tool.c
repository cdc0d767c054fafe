// Command-line driver for src/io (safetensors, HF configs, atomic files), checked against Python's
// safetensors/transformers by tests/test_safetensors.py. Without arguments: usage, exit 0.
#include "io/atomic.h"
#include "io/hfconfig.h"
#include "io/safetensors.h"
#include "core/alloc.h"
#include "core/err.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(void) {
    printf("usage: test_st_tool MODE ARGS\n"
           "  dump FILE_OR_DIR [EXTRA.safetensors...]  per tensor: name, dtype, shape, float64 sum and sum of squares\n"
           "  values FILE_OR_DIR NAME                  every element of one tensor as fp32 (%%.9g)\n"
           "  meta FILE KEY                            __metadata__[KEY]\n"
           "  write OUT | write-short OUT | write-over OUT   streaming writer (the last two must fail)\n"
           "  config FILE | config-write SRC DST VOCAB | config-rewrite SRC DST VOCAB\n"
           "  whisper FILE\n"
           "  atomic DIR                               mkdir_p, atomic write/read, atomic dir replace, rm_rf\n");
}

// the tensors of a file or a model directory (+ extra files), behind one interface
typedef struct {
    os_st_file *f;
    os_st_dir *d;
} source;

static source open_source(int argc, char **argv) {
    source s = {0};
    struct stat st;
    if (stat(argv[0], &st) == 0 && S_ISDIR(st.st_mode)) {
        if (!(s.d = os_st_dir_open(argv[0]))) os_die_err();
        for (int i = 1; i < argc; i++)
            if (os_st_dir_add_file(s.d, argv[i]) != 0) os_die_err();
    } else if (!(s.f = os_st_open(argv[0])))
        os_die_err();
    return s;
}
static int src_count(source s) { return s.d ? os_st_dir_count(s.d) : os_st_count(s.f); }
static const os_st_tensor *src_at(source s, int i) { return s.d ? os_st_dir_at(s.d, i) : os_st_at(s.f, i); }
static const os_st_tensor *src_find(source s, const char *n) { return s.d ? os_st_dir_find(s.d, n) : os_st_find(s.f, n); }
static void src_close(source s) {
    os_st_dir_close(s.d);
    os_st_close(s.f);
}

static int is_float(int dt) { return dt == OS_DT_F32 || dt == OS_DT_F16 || dt == OS_DT_BF16 || dt == OS_DT_F64; }

static int dump(int argc, char **argv) {
    source s = open_source(argc, argv);
    enum { CHUNK = 1000 };   // read in pieces to exercise start/n
    float *buf = os_alloc(CHUNK * sizeof(float), "chunk");
    int64_t *ibuf = os_alloc(CHUNK * sizeof(int64_t), "chunk");
    for (int i = 0; i < src_count(s); i++) {
        const os_st_tensor *t = src_at(s, i);
        if (src_find(s, t->name) != t) os_die("tensor '%s': lookup by name does not return the tensor", t->name);
        double sum = 0, sq = 0;
        for (int64_t at = 0; at < t->numel; at += CHUNK) {
            int64_t n = t->numel - at < CHUNK ? t->numel - at : CHUNK;
            for (int64_t k = 0; k < n; k++) {
                double v;
                if (is_float(t->dtype)) {
                    if (k == 0 && os_st_read_f32(t, at, n, buf) != 0) os_die_err();
                    v = buf[k];
                } else {
                    if (k == 0 && os_st_read_i64(t, at, n, ibuf) != 0) os_die_err();
                    v = (double)ibuf[k];
                }
                sum += v;
                sq += v * v;
            }
        }
        printf("%s\t%s\t[", t->name, os_st_dtype_name(t->dtype));
        for (int k = 0; k < t->ndim; k++) printf("%s%lld", k ? "," : "", (long long)t->shape[k]);
        printf("]\t%.17g\t%.17g\n", sum, sq);
    }
    // reading past the end and non-float reads must fail (with a message), not crash
    for (int i = 0; i < src_count(s); i++) {
        const os_st_tensor *t = src_at(s, i);
        if (os_st_read_f32(t, t->numel, 1, buf) == 0 || os_st_read_f32(t, -1, 1, buf) == 0)
            os_die("tensor '%s': out-of-range read was accepted", t->name);
    }
    if (src_find(s, "no such tensor, surely")) os_die("lookup of a missing name returned a tensor");
    os_free(buf);
    os_free(ibuf);
    src_close(s);
    return 0;
}

static int values(int argc, char **argv) {
    if (argc < 2) os_die("values: expected FILE_OR_DIR NAME");
    source s = open_source(1, argv);
    const os_st_tensor *t = src_find(s, argv[1]);
    if (!t) os_die("%s: no tensor '%s'", argv[0], argv[1]);
    float *v = os_alloc((size_t)(t->numel + 1) * sizeof(float), "values");
    if (os_st_read_f32(t, 0, t->numel, v) != 0) os_die_err();
    for (int64_t i = 0; i < t->numel; i++) printf("%.9g\n", v[i]);
    os_free(v);
    src_close(s);
    return 0;
}

static int meta(int argc, char **argv) {
    if (argc < 2) os_die("meta: expected FILE KEY");
    os_st_file *f = os_st_open(argv[0]);
    if (!f) os_die_err();
    const char *v = os_st_metadata(f, argv[1]);
    printf("%s\n", v ? v : "(none)");
    os_st_close(f);
    return 0;
}

// Written values: element i of the whole data section is (i % 97) * 0.25 - 7 + i / 1024 (exact in fp32).
static int write_mode(const char *mode, const char *out) {
    const char *names[] = {"model.embed_tokens.weight", "a \"quoted\" \\ name \xc3\xa9", "scalar", "empty", "layers.0.w"};
    const int ndims[] = {2, 3, 0, 2, 1};
    const int64_t shapes[][8] = {{7, 3}, {2, 3, 4}, {0}, {0, 5}, {13}};
    const char *meta_kv[] = {"format", "pt", "note", "tab\there \"q\"", NULL};
    int64_t total = 21 + 24 + 1 + 0 + 13;
    if (!strcmp(mode, "write-short")) total -= 1;
    if (!strcmp(mode, "write-over")) total += 1;
    os_st_writer *w = os_st_writer_begin(out, 5, names, ndims, shapes, meta_kv);
    if (!w) os_die_err();
    float chunk[5];
    for (int64_t at = 0; at < total; at += 5) {   // 5 does not divide 21, 24: puts span tensor boundaries
        int64_t n = total - at < 5 ? total - at : 5;
        for (int64_t k = 0; k < n; k++) chunk[k] = (float)((double)((at + k) % 97) * 0.25 - 7 + (double)(at + k) / 1024);
        if (os_st_writer_put(w, chunk, n) != 0) {
            os_st_writer_abort(w);
            os_die_err();
        }
    }
    if (os_st_writer_finish(w) != 0) os_die_err();
    return 0;
}

static void print_qwen2(const os_qwen2_config *c) {
    printf("model_type %s\nhidden_size %d\nintermediate_size %d\nnum_hidden_layers %d\nnum_attention_heads %d\n"
           "num_key_value_heads %d\nhead_dim %d\nvocab_size %d\nmax_position_embeddings %d\ntie_word_embeddings %d\n"
           "rms_norm_eps %.17g\nrope_theta %.17g\ntorch_dtype %s\nbos_token_id %d\neos_token_id %d\n",
           c->model_type, c->hidden_size, c->intermediate_size, c->num_hidden_layers, c->num_attention_heads,
           c->num_key_value_heads, c->head_dim, c->vocab_size, c->max_position_embeddings, c->tie_word_embeddings,
           c->rms_norm_eps, c->rope_theta, c->torch_dtype, c->bos_token_id, c->eos_token_id);
}

static int config(const char *mode, int argc, char **argv) {
    os_qwen2_config c;
    if (!strcmp(mode, "config")) {
        if (os_qwen2_config_load(argv[0], &c) != 0) os_die_err();
        print_qwen2(&c);
        return 0;
    }
    if (argc < 3) os_die("%s: expected SRC DST VOCAB", mode);
    int vocab = atoi(argv[2]);
    if (!strcmp(mode, "config-write")) {
        if (os_qwen2_config_load(argv[0], &c) != 0 || os_qwen2_config_write(argv[1], &c, vocab) != 0) os_die_err();
    } else if (os_qwen2_config_rewrite(argv[0], argv[1], vocab, NULL) != 0)
        os_die_err();
    return 0;
}

static int whisper(const char *path) {
    os_whisper_config c;
    if (os_whisper_config_load(path, &c) != 0) os_die_err();
    printf("d_model %d\nencoder_layers %d\nencoder_attention_heads %d\nencoder_ffn_dim %d\nnum_mel_bins %d\n"
           "max_source_positions %d\n", c.d_model, c.encoder_layers, c.encoder_attention_heads, c.encoder_ffn_dim,
           c.num_mel_bins, c.max_source_positions);
    return 0;
}

// DIR/a/b/c is created, DIR/final is written twice (the second replaces the first atomically), DIR/gone removed
static int atomic_mode(const char *dir) {
    char p[4096], q[4096];
    snprintf(p, sizeof p, "%s/a/b/c", dir);
    if (os_mkdir_p(p) != 0 || os_mkdir_p(p) != 0) os_die_err();
    snprintf(p, sizeof p, "%s/a/b/c/file.txt", dir);
    if (os_write_file_atomic(p, "hello\n", 6) != 0) os_die_err();
    size_t n;
    char *s = os_read_file(p, &n);
    if (!s) os_die_err();
    if (n != 6 || strcmp(s, "hello\n")) os_die("%s: read back %zu bytes '%s'", p, n, s);
    os_free(s);
    snprintf(p, sizeof p, "%s/a/b/c/missing.txt", dir);
    if (os_read_file(p, &n)) os_die("%s: read of a missing file succeeded", p);
    printf("missing: %s\n", os_errmsg());
    for (int round = 1; round <= 2; round++) {   // round 2 replaces an existing final directory
        snprintf(p, sizeof p, "%s/tmp.%d/sub", dir, round);
        if (os_mkdir_p(p) != 0) os_die_err();
        snprintf(p, sizeof p, "%s/tmp.%d/sub/round.txt", dir, round);
        snprintf(q, sizeof q, "round %d\n", round);
        if (os_write_file_atomic(p, q, strlen(q)) != 0) os_die_err();
        snprintf(p, sizeof p, "%s/tmp.%d", dir, round);
        snprintf(q, sizeof q, "%s/final", dir);
        if (os_rename_dir_atomic(p, q) != 0) os_die_err();
    }
    snprintf(p, sizeof p, "%s/a", dir);
    if (os_rm_rf(p) != 0) os_die_err();
    snprintf(p, sizeof p, "%s/never-existed", dir);
    if (os_rm_rf(p) != 0) os_die_err();
    printf("ok\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage();
        return 0;
    }
    const char *mode = argv[1];
    if (argc < 3) os_die("%s: missing argument", mode);
    if (!strcmp(mode, "dump")) return dump(argc - 2, argv + 2);
    if (!strcmp(mode, "values")) return values(argc - 2, argv + 2);
    if (!strcmp(mode, "meta")) return meta(argc - 2, argv + 2);
    if (!strncmp(mode, "write", 5)) return write_mode(mode, argv[2]);
    if (!strncmp(mode, "config", 6)) return config(mode, argc - 2, argv + 2);
    if (!strcmp(mode, "whisper")) return whisper(argv[2]);
    if (!strcmp(mode, "atomic")) return atomic_mode(argv[2]);
    usage();
    return 2;
}
