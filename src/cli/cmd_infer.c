// omnishard infer: generate the text and audio tokens of an answer with a trained SLAM-Omni model (docs/inference.md).
#include "cli/cli_options.h"
#include "cli/json_text.h"
#include "core/alloc.h"
#include "core/err.h"
#include "tokenizer/tokenizer.h"
#include "train/agree.h"
#include "infer/infer.h"
#include "zero/comm.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: omnishard infer --model DIR (--question TEXT | --wav FILE | --dataset FILE [--index I]) [options]\n"
    "       mpirun -np N omnishard infer ... [--deepspeed zero3]\n"
    "\n"
    "Generates an answer (text + G layers of audio tokens) with a trained SLAM-Omni model and prints one JSON object\n"
    "on stdout: text, text_ids, audio (raw ids per layer), codec (the de-interleaved codec stream), ... (see\n"
    "docs/inference.md). Greedy unless --temperature > 0. No KV cache: every new position reruns the forward over the\n"
    "whole sequence (cost grows with the square of the length).\n"
    "\n"
    "  --model DIR            a model directory as omnishard sft writes it (OUTPUT/final_model, omnishard export)\n"
    "  --question TEXT        the user's question as text (text before its last \"<USER>:\" is history)\n"
    "  --wav FILE             the question spoken (needs --speech_encoder); with --question: its transcript, unused\n"
    "  --dataset FILE         a SLAM-Omni record file; --index I (default 0) picks the record, whose prompt and\n"
    "                         question are built as for training (its answer is not used)\n"
    "  --speech_encoder DIR   the Whisper encoder directory of a model trained with speech questions\n"
    "  --system_prompt TEXT   system prompt (default: the task's, as in training)\n"
    "  --task s2s|tts|asr     with --question/--wav (default s2s); tts speaks --question; asr transcribes --wav\n"
    "  --max_new_tokens N     at most N generated positions (default 360)\n"
    "  --temperature X        0 (default): greedy; > 0: sample from softmax(logits / X)\n"
    "  --top_k K              sample among the K largest logits (default 0: all)\n"
    "  --seed S               sampling seed (default 42)\n"
    "  --text_only            predict no audio (audio rows pad_a), as the reference's decode_text_only\n"
    "  --zero_stage N         ZeRO stage 0-3 (default 3 under mpirun, else 0); --deepspeed zeroN also works\n"
    "  --show_prompt          add the prompt's input ids [G+1][P] to the output\n";

typedef struct {
    const char *model, *question, *wav, *dataset, *index, *speech_encoder, *system, *task, *max_new, *temperature,
        *top_k, *seed, *zero, *deepspeed;
    int text_only, show_prompt;
} infer_args;

static int parse_i64(const char *name, const char *v, int64_t lo, int64_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || end == v || errno || x < lo) return os_errf("%s: expected an integer >= %lld, got '%s'", name, (long long)lo, v);
    *out = x;
    return 0;
}

// the options into the generation settings and the session's arguments; -1 + message
static int settle(const infer_args *a, os_gen_opts *g, os_sft_args *sa, int64_t *index, int nranks) {
    memset(g, 0, sizeof *g);
    memset(sa, 0, sizeof *sa);
    g->max_new_tokens = 360, g->seed = 42, g->text_only = a->text_only;
    if (!a->model) return os_errf("--model DIR is required (omnishard infer --help)");
    if (!a->question && !a->wav && !a->dataset) return os_errf("give the question: --question TEXT, --wav FILE or --dataset FILE");
    if (a->dataset && (a->question || a->wav || a->task || a->system))
        return os_errf("--dataset: the record gives the question, task and system prompt (no --question/--wav/--task/--system_prompt)");
    if (a->index && !a->dataset) return os_errf("--index: only with --dataset");
    *index = 0;
    int64_t seed = 42, zero = nranks > 1 ? 3 : 0;
    if ((a->index && parse_i64("--index", a->index, 0, index) < 0) ||
        (a->max_new && parse_i64("--max_new_tokens", a->max_new, 1, &g->max_new_tokens) < 0) ||
        (a->top_k && parse_i64("--top_k", a->top_k, 0, &g->top_k) < 0) || (a->seed && parse_i64("--seed", a->seed, 0, &seed) < 0) ||
        (a->zero && parse_i64("--zero_stage", a->zero, 0, &zero) < 0))
        return -1;
    g->seed = (uint64_t)seed;
    if (a->deepspeed) {
        const char *v = a->deepspeed;
        if (strncmp(v, "zero", 4) || v[4] < '0' || v[4] > '3' || v[5]) return os_errf("--deepspeed: expected zero0..zero3, got '%s'", v);
        zero = v[4] - '0';
    }
    if (zero > 3) return os_errf("--zero_stage: expected 0-3, got %lld", (long long)zero);
    if (a->temperature) {
        char *end;
        g->temperature = strtod(a->temperature, &end);
        if (*end || end == a->temperature || !isfinite(g->temperature) || g->temperature < 0)
            return os_errf("--temperature: expected a number >= 0, got '%s'", a->temperature);
    }
    if (g->top_k && g->temperature == 0) return os_errf("--top_k: only with --temperature > 0 (greedy takes the argmax)");
    sa->model = a->model, sa->model_type = "slam_omni", sa->code_layer = -1, sa->num_latency_tokens = sa->do_layershift = -1,
        sa->zero_stage = (int)zero, sa->seed = 42;
    sa->speech_encoder = a->speech_encoder, sa->max_length = 2048, sa->truncation_strategy = "right";
    return 0;
}

// every rank stops when any failed: 1 after printing the reason (the failing rank's message, else a note)
static int failed(int rc) {
    int n = comm_any_failed(rc < 0);
    if (!n) return 0;
    if (rc < 0 && os_rank >= 0) fprintf(stderr, "omnishard infer: rank %d: %s\n", os_rank, os_errmsg());
    else if (rc < 0) fprintf(stderr, "omnishard infer: %s\n", os_errmsg());
    else if (comm_rank() == 0) fprintf(stderr, "omnishard infer: stopping: %d other rank(s) reported an error\n", n);
    return 1;
}

static void put_ids(const int32_t *v, int64_t n) {
    putchar('[');
    for (int64_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", v[i]);
    putchar(']');
}

// the text of ids the tokenizer knows (SLAM-Omni special ids and ids without a token are left out)
static void put_text(const char *model_dir, const int32_t *ids, int64_t n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", model_dir);
    os_tokenizer *tok = os_tok_load(path);
    int32_t *keep = os_alloc(sizeof(int32_t) * (size_t)(n + 1), "text ids");
    int64_t k = 0;
    for (int64_t i = 0; tok && i < n; i++)
        if (ids[i] < os_tok_vocab_size(tok)) keep[k++] = ids[i];
    size_t len = 0;
    char *s = tok ? os_tok_decode_n(tok, keep, k, &len) : NULL;
    if (tok && !s) {   // an id inside the vocabulary without a token: decode one id at a time
        k = 0;
        for (int64_t i = 0; i < n; i++) {
            char *one = ids[i] < os_tok_vocab_size(tok) ? os_tok_decode(tok, ids + i, 1) : NULL;
            if (one) keep[k++] = ids[i];
            os_free(one);
        }
        s = os_tok_decode_n(tok, keep, k, &len);
    }
    if (!tok) fprintf(stderr, "omnishard infer: warning: no text decoding: %s\n", os_errmsg());
    os_json_string_write(stdout, s ? s : "", s ? len : 0);
    os_free(s), os_free(keep);
    os_tok_free(tok);
}

static void print_result(const infer_args *a, const os_model *m, const os_infer_prompt *p, const os_gen_result *r,
                         const os_gen_opts *g) {
    int64_t G = m->oc.G;
    printf("{\"text\": ");
    put_text(a->model, r->text, r->ntext);
    printf(", \"text_ids\": ");
    put_ids(r->text, r->ntext);
    printf(", \"audio\": [");
    for (int64_t k = 0; k < G; k++) {
        if (k) printf(", ");
        put_ids(r->audio + k * r->naudio, r->naudio);
    }
    printf("], \"codec\": ");
    put_ids(r->codec, r->ncodec);
    printf(", \"text_end\": %s, \"audio_end\": %s, \"text_only\": %s, \"steps\": %lld, \"prompt_positions\": %lld",
           r->text_end ? "true" : "false", r->audio_end ? "true" : "false", g->text_only || p->asr ? "true" : "false",
           (long long)r->steps, (long long)p->L);
    printf(", \"code_layer\": %lld, \"text_vocab\": %lld, \"audio_vocab\": %lld, \"num_latency_tokens\": %d, "
           "\"do_layershift\": %s", (long long)G, (long long)m->oc.text_vocab, (long long)m->oc.audio_vocab, m->oc.latency,
           m->oc.layershift ? "true" : "false");
    if (a->show_prompt) {
        printf(", \"prompt_input_ids\": [");
        for (int64_t k = 0; k < p->R; k++) {
            if (k) printf(", ");
            put_ids(p->ids + k * p->L, p->L);
        }
        printf("]");
    }
    printf("}\n");
    fflush(stdout);
}

// the options every rank must have alike (ranks otherwise run different forwards and wait on each other)
static int check_same(const infer_args *a, const os_gen_opts *g, const os_sft_args *sa, int64_t index) {
    const char *f[] = {"--model", "--question", "--wav", "--dataset", "--index", "--speech_encoder", "--system_prompt",
                       "--task", "--max_new_tokens", "--temperature", "--top_k", "--seed", "--zero_stage", "--text_only"};
    char v[14][256];
    const char *s[] = {a->model, a->question, a->wav, a->dataset, NULL, a->speech_encoder, a->system, a->task};
    for (int i = 0; i < 8; i++) snprintf(v[i], 256, "%s", s[i] ? s[i] : "(none)");
    snprintf(v[4], 256, "%lld", (long long)index);
    snprintf(v[8], 256, "%lld", (long long)g->max_new_tokens);
    snprintf(v[9], 256, "%.17g", g->temperature);
    snprintf(v[10], 256, "%lld", (long long)g->top_k);
    snprintf(v[11], 256, "%llu", (unsigned long long)g->seed);
    snprintf(v[12], 256, "%d", sa->zero_stage);
    snprintf(v[13], 256, "%d", g->text_only);
    const char *vals[14];
    for (int i = 0; i < 14; i++) vals[i] = v[i];
    return os_agree_values(f, vals, 14);
}

static int run(const infer_args *a, const os_gen_opts *g, const os_sft_args *sa, int64_t index) {
    if (failed(check_same(a, g, sa, index))) return 1;
    os_session s;
    if (failed(os_session_open(&s, sa, comm_rank(), comm_size()))) return 1;
    const os_model *m = &s.model;
    const os_st_tensor *emb = os_st_dir_find(s.ckpt, "model.embed_tokens.weight");
    if (emb && emb->ndim == 2 && emb->shape[0] < m->V)
        os_info("omnishard infer: note: %s has %lld vocabulary rows, the model %lld (T + A): the rows beyond are random "
                "(not a trained SLAM-Omni model?)", a->model, (long long)emb->shape[0], (long long)m->V);
    os_infer_prompt p;
    int64_t T_s = os_speech_positions(m);
    int rc = a->dataset ? os_infer_prompt_dataset(&p, m, a->model, a->dataset, index, T_s)
                        : os_infer_prompt_question(&p, m, a->model, a->question, a->wav, a->system, a->task, T_s);
    int code = 1;
    if (!failed(rc)) {
        os_gen_result r;
        if (!failed(os_generate(&s, &p, g, &r))) {
            if (comm_rank() == 0) print_result(a, m, &p, &r, g);
            os_gen_result_free(&r);
            code = 0;
        }
    }
    os_infer_prompt_free(&p);
    os_session_close(&s);
    return code;
}

int cmd_infer(int argc, char **argv) {
    infer_args a;
    memset(&a, 0, sizeof a);
    const os_opt opts[] = {
        {"--model", OS_OPT_STR, &a.model}, {"--question", OS_OPT_STR, &a.question}, {"--wav", OS_OPT_STR, &a.wav},
        {"--dataset", OS_OPT_STR, &a.dataset}, {"--index", OS_OPT_STR, &a.index},
        {"--speech_encoder", OS_OPT_STR, &a.speech_encoder}, {"--system_prompt", OS_OPT_STR, &a.system},
        {"--task", OS_OPT_STR, &a.task}, {"--max_new_tokens", OS_OPT_STR, &a.max_new},
        {"--temperature", OS_OPT_STR, &a.temperature}, {"--top_k", OS_OPT_STR, &a.top_k}, {"--seed", OS_OPT_STR, &a.seed},
        {"--zero_stage", OS_OPT_STR, &a.zero}, {"--deepspeed", OS_OPT_STR, &a.deepspeed},
        {"--text_only", OS_OPT_FLAG, &a.text_only}, {"--show_prompt", OS_OPT_FLAG, &a.show_prompt},
    };
    int rc = os_cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), USAGE);
    if (rc >= 0) return rc;
    comm_init(&argc, &argv);
    os_gen_opts g;
    os_sft_args sa;
    int64_t index = 0;
    if (failed(settle(&a, &g, &sa, &index, comm_size()))) {
        comm_finalize();
        return 2;
    }
    rc = run(&a, &g, &sa, index);
    comm_finalize();
    return rc;
}
