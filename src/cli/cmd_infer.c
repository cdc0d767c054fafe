// omnishard infer: generate the text and audio tokens of an answer with a trained SLAM-Omni model (docs/inference.md).
#include "cli/commands.h"
#include "cli/cli_options.h"
#include "cli/infer_run.h"
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
    "usage: omnishard infer --model DIR (--question TEXT | --wav FILE | --dataset FILE [--index I] | --multi_round)\n"
    "       [options]\n"
    "       mpirun -np N omnishard infer ... [--deepspeed zero3]\n"
    "\n"
    "Generates an answer (text + G layers of audio tokens) with a trained SLAM-Omni model and prints one JSON object\n"
    "on stdout: text, text_ids, audio (raw ids per layer), codec (the de-interleaved codec stream), ... (see\n"
    "docs/inference.md). Greedy unless --do_sample true; the decoding defaults are SLAM-LLM's inference recipe's.\n"
    "\n"
    "  --model DIR            a model directory as omnishard sft writes it (OUTPUT/final_model, omnishard export)\n"
    "  --question TEXT        the user's question as text (text before its last \"<USER>:\" is history)\n"
    "  --wav FILE             the question spoken (needs --speech_encoder); with --question: its transcript, unused\n"
    "  --dataset FILE         a SLAM-Omni record file; --index I (default 0) picks the record, whose prompt and\n"
    "                         question are built as for training (its answer is not used)\n"
    "  --multi_round          a conversation: every line of stdin is a question (q: quit, c: clear the history, h:\n"
    "                         show it), answered after the history of the earlier rounds; one JSON object per round\n"
    "  --speech_encoder DIR   the Whisper encoder directory of a model trained with speech questions\n"
    "  --system_prompt TEXT   system prompt (default: the task's, as in training)\n"
    "  --task s2s|tts|asr     with --question/--wav (default s2s); tts speaks --question; asr transcribes --wav\n"
    "  --max_new_tokens N     at most N generated positions (default 3000, the reference's inference recipe)\n"
    "  --do_sample BOOL       false (default): greedy (argmax); true: sample (--temperature, --top_k, --top_p)\n"
    "  --temperature X        sampling: softmax(logits / X), X > 0 (default 1.0)\n"
    "  --top_k K              sampling among the K largest logits (default 0: all)\n"
    "  --top_p P              sampling among the smallest set of largest logits with mass >= P, 0 < P <= 1 (default 1.0)\n"
    "  --text_repetition_penalty X   penalty (> 0) on text ids generated before (default 1.2; 1: none)\n"
    "  --audio_repetition_penalty X  penalty (> 0) on each audio layer's ids generated before (default 1.2; 1: none)\n"
    "  --repetition_penalty X        both penalties at once\n"
    "  --seed S               sampling seed (default 42)\n"
    "  --kv_cache BOOL        true (default): the prompt runs once, then one position per step (keys and values of\n"
    "                         earlier positions cached); false: the whole sequence again at every step\n"
    "  --text_only            predict no audio (audio rows pad_a), as the reference's decode_text_only\n"
    "  --zero_stage N         ZeRO stage 0-3 (default 3 under mpirun, else 0); --deepspeed zeroN also works\n"
    "  --show_prompt          add the prompt's input ids [G+1][P] to the output\n";


static int parse_i64(const char *name, const char *v, int64_t lo, int64_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || end == v || errno || x < lo) return os_errf("%s: expected an integer >= %lld, got '%s'", name, (long long)lo, v);
    *out = x;
    return 0;
}

// a number > lo (>= lo when closed) and <= hi
static int parse_f64(const char *name, const char *v, double lo, int closed, double hi, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (*end || end == v || !isfinite(x) || x < lo || (!closed && x == lo) || x > hi) {
        if (hi < INFINITY) return os_errf("%s: expected a number in %s%g, %g], got '%s'", name, closed ? "[" : "(", lo, hi, v);
        return os_errf("%s: expected a number %s %g, got '%s'", name, closed ? ">=" : ">", lo, v);
    }
    *out = x;
    return 0;
}

static int parse_bool(const char *name, const char *v, int *out) {
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1")) *out = 1;
    else if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0")) *out = 0;
    else return os_errf("%s: expected true or false, got '%s'", name, v);
    return 0;
}

// the decoding options (the reference's inference recipe defaults: greedy, temperature 1, top_k 0, top_p 1,
// both repetition penalties 1.2); a sampling option off its default without --do_sample true is refused
static int settle_choice(const infer_args *a, os_gen_opts *g) {
    os_choice_opts *c = &g->choice;
    c->temperature = 1.0, c->top_p = 1.0, g->text_penalty = g->audio_penalty = 1.2;
    if (a->penalty && (a->text_penalty || a->audio_penalty))
        return os_errf("--repetition_penalty sets both penalties: give it, or --text_repetition_penalty/--audio_repetition_penalty");
    if ((a->do_sample && parse_bool("--do_sample", a->do_sample, &c->do_sample) < 0) ||
        (a->temperature && parse_f64("--temperature", a->temperature, 0, 0, INFINITY, &c->temperature) < 0) ||
        (a->top_k && parse_i64("--top_k", a->top_k, 0, &c->top_k) < 0) ||
        (a->top_p && parse_f64("--top_p", a->top_p, 0, 0, 1, &c->top_p) < 0) ||
        (a->penalty && parse_f64("--repetition_penalty", a->penalty, 0, 0, INFINITY, &g->text_penalty) < 0) ||
        (a->text_penalty && parse_f64("--text_repetition_penalty", a->text_penalty, 0, 0, INFINITY, &g->text_penalty) < 0) ||
        (a->audio_penalty && parse_f64("--audio_repetition_penalty", a->audio_penalty, 0, 0, INFINITY, &g->audio_penalty) < 0))
        return -1;
    if (a->penalty) g->audio_penalty = g->text_penalty;
    if (!c->do_sample) {
        const char *off = c->temperature != 1.0 ? "--temperature" : c->top_k ? "--top_k" : c->top_p != 1.0 ? "--top_p" : NULL;
        if (off) return os_errf("%s: only with --do_sample true (greedy takes the argmax)", off);
    }
    return 0;
}

// the options into the generation settings and the session's arguments; -1 + message
static int settle(const infer_args *a, os_gen_opts *g, os_sft_args *sa, int64_t *index, int nranks) {
    memset(g, 0, sizeof *g);
    memset(sa, 0, sizeof *sa);
    g->max_new_tokens = 3000, g->seed = 42, g->text_only = a->text_only, g->kv_cache = 1;
    if (!a->model) return os_errf("--model DIR is required (omnishard infer --help)");
    if (a->multi_round && (a->question || a->wav || a->dataset))
        return os_errf("--multi_round: the questions come from stdin, one per line (no --question/--wav/--dataset)");
    if (a->multi_round && a->task && strcmp(a->task, "s2s"))
        return os_errf("--multi_round: only with --task s2s (the reference keeps history for s2s only), got '%s'", a->task);
    if (!a->question && !a->wav && !a->dataset && !a->multi_round)
        return os_errf("give the question: --question TEXT, --wav FILE, --dataset FILE or --multi_round");
    if (a->dataset && (a->question || a->wav || a->task || a->system))
        return os_errf("--dataset: the record gives the question, task and system prompt (no --question/--wav/--task/--system_prompt)");
    if (a->index && !a->dataset) return os_errf("--index: only with --dataset");
    *index = 0;
    int64_t seed = 42, zero = nranks > 1 ? 3 : 0;
    if ((a->index && parse_i64("--index", a->index, 0, index) < 0) ||
        (a->max_new && parse_i64("--max_new_tokens", a->max_new, 1, &g->max_new_tokens) < 0) ||
        (a->seed && parse_i64("--seed", a->seed, 0, &seed) < 0) ||
        (a->kv_cache && parse_bool("--kv_cache", a->kv_cache, &g->kv_cache) < 0) ||
        (a->zero && parse_i64("--zero_stage", a->zero, 0, &zero) < 0))
        return -1;
    g->seed = (uint64_t)seed;
    if (a->deepspeed) {
        const char *v = a->deepspeed;
        if (strncmp(v, "zero", 4) || v[4] < '0' || v[4] > '3' || v[5]) return os_errf("--deepspeed: expected zero0..zero3, got '%s'", v);
        zero = v[4] - '0';
    }
    if (zero > 3) return os_errf("--zero_stage: expected 0-3, got %lld", (long long)zero);
    if (settle_choice(a, g) < 0) return -1;
    sa->model = a->model, sa->model_type = "slam_omni", sa->code_layer = -1, sa->num_latency_tokens = sa->do_layershift = -1,
        sa->zero_stage = (int)zero, sa->seed = 42, sa->no_grads = 1;
    sa->speech_encoder = a->speech_encoder, sa->max_length = 2048, sa->truncation_strategy = "right";
    return 0;
}

// the options every rank must have alike (ranks otherwise run different forwards and wait on each other)
static int check_same(const infer_args *a, const os_gen_opts *g, const os_sft_args *sa, int64_t index) {
    enum { NV = 20 };
    const char *f[NV] = {"--model", "--question", "--wav", "--dataset", "--speech_encoder", "--system_prompt", "--task",
                         "--index", "--max_new_tokens", "--do_sample", "--temperature", "--top_k", "--top_p",
                         "--text_repetition_penalty", "--audio_repetition_penalty", "--seed", "--zero_stage",
                         "--text_only", "--multi_round", "--kv_cache"};
    char v[NV][256];
    const char *s[] = {a->model, a->question, a->wav, a->dataset, a->speech_encoder, a->system, a->task};
    for (int i = 0; i < 7; i++) snprintf(v[i], 256, "%s", s[i] ? s[i] : "(none)");
    const os_choice_opts *c = &g->choice;
    snprintf(v[7], 256, "%lld", (long long)index);
    snprintf(v[8], 256, "%lld", (long long)g->max_new_tokens);
    snprintf(v[9], 256, "%d", c->do_sample);
    snprintf(v[10], 256, "%.17g", c->temperature);
    snprintf(v[11], 256, "%lld", (long long)c->top_k);
    snprintf(v[12], 256, "%.17g", c->top_p);
    snprintf(v[13], 256, "%.17g", g->text_penalty);
    snprintf(v[14], 256, "%.17g", g->audio_penalty);
    snprintf(v[15], 256, "%llu", (unsigned long long)g->seed);
    snprintf(v[16], 256, "%d", sa->zero_stage);
    snprintf(v[17], 256, "%d", g->text_only);
    snprintf(v[18], 256, "%d", a->multi_round);
    snprintf(v[19], 256, "%d", g->kv_cache);
    const char *vals[NV];
    for (int i = 0; i < NV; i++) vals[i] = v[i];
    return os_agree_values(f, vals, NV);
}

int cmd_infer(int argc, char **argv) {
    infer_args a;
    memset(&a, 0, sizeof a);
    const os_opt opts[] = {
        {"--model", OS_OPT_STR, &a.model}, {"--question", OS_OPT_STR, &a.question}, {"--wav", OS_OPT_STR, &a.wav},
        {"--dataset", OS_OPT_STR, &a.dataset}, {"--index", OS_OPT_STR, &a.index},
        {"--speech_encoder", OS_OPT_STR, &a.speech_encoder}, {"--system_prompt", OS_OPT_STR, &a.system},
        {"--task", OS_OPT_STR, &a.task}, {"--max_new_tokens", OS_OPT_STR, &a.max_new},
        {"--do_sample", OS_OPT_STR, &a.do_sample}, {"--temperature", OS_OPT_STR, &a.temperature},
        {"--top_k", OS_OPT_STR, &a.top_k}, {"--top_p", OS_OPT_STR, &a.top_p}, {"--repetition_penalty", OS_OPT_STR, &a.penalty},
        {"--text_repetition_penalty", OS_OPT_STR, &a.text_penalty},
        {"--audio_repetition_penalty", OS_OPT_STR, &a.audio_penalty}, {"--seed", OS_OPT_STR, &a.seed},
        {"--zero_stage", OS_OPT_STR, &a.zero}, {"--deepspeed", OS_OPT_STR, &a.deepspeed},
        {"--text_only", OS_OPT_FLAG, &a.text_only}, {"--show_prompt", OS_OPT_FLAG, &a.show_prompt},
        {"--multi_round", OS_OPT_FLAG, &a.multi_round}, {"--kv_cache", OS_OPT_STR, &a.kv_cache},
    };
    int rc = os_cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), USAGE);
    if (rc >= 0) return rc;
    comm_init(&argc, &argv);
    os_gen_opts g;
    os_sft_args sa;
    int64_t index = 0;
    if (os_infer_failed(settle(&a, &g, &sa, &index, comm_size()))) {
        comm_finalize();
        return 2;
    }
    rc = os_infer_failed(check_same(&a, &g, &sa, index)) ? 1 : os_infer_run(&a, &g, &sa, index);
    comm_finalize();
    return rc;
}
