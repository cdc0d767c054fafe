// omnishard infer's run (infer_run.h): one answer, or the multi-round conversation read from stdin.
#include "infer/infer_run.h"
#include "infer/infer_dataset.h"
#include "infer/infer_json.h"
#include "infer/infer_output.h"
#include "infer/infer_progress.h"
#include "infer/infer_stop.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/timer.h"
#include "dataset/slam_dataset.h"
#include "kernels/ops.h"
#include "infer/infer_text.h"
#include "zero/comm.h"
#include "zero/watchdog.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const infer_args *a;
    const os_gen_opts *g;
    os_session s;
    os_tokenizer *tok;   // NULL: no text decoding (single answer only; the reason was printed)
} run_ctx;

// the reference's multi-round loop strips the question when its generated ids have max_new_tokens positions
// (generate_s2s_online_multi_round.py:223-225): no break before the limit, and (layer shift) no eoa in the last
// layer, before which its generate cuts every layer (slam_model_s2s.py:444-448)
static int ran_out(const os_model *m, const os_gen_result *r, const os_gen_opts *g) {
    int64_t G = m->oc.G, last = (G - 1) * r->naudio;
    if (r->steps < g->max_new_tokens) return 0;
    for (int64_t t = 0; m->oc.layershift && t < r->naudio; t++)
        if (r->audio[last + t] == os_eoa(m->oc.audio_vocab)) return 0;
    return 1;
}

// One answer to question (NULL: --wav/--dataset) after history; round > 0: multi-round, *next gets the history
// after it (every rank alike). 0, or 1 after the message.
static int answer(run_ctx *c, const char *question, const char *history, int64_t index, int64_t round, char **next) {
    const infer_args *a = c->a;
    const os_model *m = &c->s.model;
    os_infer_prompt p;
    int64_t T_s = os_speech_positions(m);
    int rc = a->dataset ? os_infer_prompt_dataset(&p, m, a->model, a->dataset, index, T_s)
                        : os_infer_prompt_question(&p, m, a->model, question, a->wav, a->system, a->task, history, T_s);
    int code = 1;
    os_gen_result r;
    os_gen_opts g = *c->g;   // rank 0 shows the progress (infer_progress.h)
    os_infer_progress pr;
    os_infer_progress_start(&pr, c->tok, g.max_new_tokens);
    if (comm_rank() == 0) g.progress = os_infer_progress_step, g.progress_ctx = &pr;
    double t0 = os_now();
    if (!os_infer_failed(rc) && !os_infer_failed(os_generate(&c->s, &p, &g, &r))) {
        double sec = os_now() - t0;
        int text_only = c->g->text_only || p.asr;
        if (comm_rank() == 0) os_infer_progress_end(&pr, &r, text_only);
        if (comm_rank() == 0)   // bench/bench_infer.py reads this line
            os_info("omnishard infer: generation: %lld steps, %lld decoder positions, %.3f s (%.2f steps/s)",
                    (long long)r.steps, (long long)r.positions, sec, sec > 0 ? (double)r.steps / sec : 0.0);
        os_infer_print_opts po = {a->show_prompt, round, history ? history : ""};
        if (comm_rank() == 0) os_infer_print(c->tok, m, &p, &r, text_only, &po);
        code = 0;
        if (next) {   // the answer as the reference decodes it for the history: special tokens skipped
            size_t len = 0;
            char *text = os_infer_text(c->tok, r.text, r.ntext, 1, &len);
            *next = text ? os_infer_history_next(history, question, text, len, text_only || ran_out(m, &r, c->g)) : NULL;
            os_free(text);
            code = os_infer_failed(*next ? 0 : -1);
        }
        os_gen_result_free(&r);
    }
    os_infer_prompt_free(&p);
    return code;
}

// the next line of stdin (rank 0 reads, every rank gets it; no deadline while waiting); NULL at the end
static char *next_line(void) {
    char *line = NULL;
    size_t cap = 0;
    int64_t n = -1;
    if (comm_rank() == 0) {
        ssize_t k = getline(&line, &cap, stdin);
        n = k;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
    }
    double timeout = wd_timeout();
    comm_set_timeout(0);
    comm_bcast(&n, sizeof n, 0);
    char *out = n < 0 ? NULL : os_alloc((size_t)n + 1, "input line");
    if (out && comm_rank() == 0) memcpy(out, line, (size_t)n);
    if (n > 0) comm_bcast(out, n, 0);
    comm_set_timeout(timeout);
    if (out) out[n] = 0;
    free(line);
    return out;
}

static int blank(const char *s) {
    while (isspace((unsigned char)*s)) s++;
    return !*s;
}

// a one-letter command of the reference's online loop (q: quit, c: clear the history, h: show it), else 0
static int command(const char *s) {
    return s[0] && !s[1] && strchr("qch", tolower((unsigned char)s[0])) ? tolower((unsigned char)s[0]) : 0;
}

// the multi-round conversation (docs/inference.md "Multi-round"): every line of stdin is a question
static int rounds(run_ctx *c) {
    char *history = os_alloc(1, "conversation history"), *line;
    history[0] = 0;
    int64_t round = 0;
    int code = 0;
    while (!code && (line = next_line())) {
        int cmd = command(line);
        if (cmd == 'c') history[0] = 0;
        else if (cmd == 'h' && comm_rank() == 0) fprintf(stderr, "omnishard infer: history: %s\n", history);
        else if (!cmd && !blank(line)) {
            char *next = NULL;
            code = answer(c, line, history, 0, ++round, &next);
            if (next) os_free(history), history = next;
        }
        os_free(line);
        if (cmd == 'q') break;
    }
    os_free(history);
    return code;
}

static os_tokenizer *load_tokenizer(const char *model_dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", model_dir);
    return os_tok_load(path);
}

int os_infer_run(const infer_args *a, const os_gen_opts *g, const os_session_opts *so, int64_t index) {
    run_ctx c = {.a = a, .g = g};
    // the output file checked, locked and described before the model loads (infer_output.h)
    os_infer_out out = {.path = a->output_file, .fd = -1};
    if (a->output_file && os_infer_failed(comm_rank() == 0 ? os_infer_output_open(&out, a, g, so->speech_encoder) : 0))
        return 1;
    if (a->output_file) os_infer_stop_install();   // a signal from here on stops at a round's end (infer_dataset.c)
    // the session's memory: the host's (os_alloc) and, on a backend with memory of its own, what its buffers hold
    int64_t live0 = os_alloc_live_bytes(), held0 = os_k->held_bytes ? os_k->held_bytes() : 0;
    if (os_infer_failed(os_session_open(&c.s, so, comm_rank(), comm_size()))) return os_infer_output_close(&out), 1;
    int64_t session = os_alloc_live_bytes() - live0 + (os_k->held_bytes ? os_k->held_bytes() - held0 : 0);
    const os_model *m = &c.s.model;
    const os_st_tensor *emb = os_st_dir_find(c.s.ckpt, "model.embed_tokens.weight");
    if (emb && emb->ndim == 2 && emb->shape[0] < m->V)
        os_info("omnishard infer: note: %s has %lld vocabulary rows, the model %lld (T + A): the rows beyond are random "
                "(not a trained SLAM-Omni model?)", a->model, (long long)emb->shape[0], (long long)m->V);
    int code = 1;
    if (a->multi_round) {   // every rank decodes the answers for the history
        c.tok = load_tokenizer(a->model);
        if (!os_infer_failed(c.tok ? 0 : -1)) code = rounds(&c);
    } else {
        if ((comm_rank() == 0 || g->local || g->lockstep) && !(c.tok = load_tokenizer(a->model)) && comm_rank() == 0)
            fprintf(stderr, "omnishard infer: warning: no text decoding: %s\n", os_errmsg());
        code = a->output_file ? os_infer_dataset(&c.s, c.tok, a, g, &out) : answer(&c, a->question, NULL, index, 0, NULL);
    }
    if (code == 0 && comm_rank() == 0) {   // what inference holds (docs/inference.md "Memory")
        int64_t params = 0;
        for (int b = 0; b < c.s.rt.nb; b++) params += 4 * zr_local(&c.s.rt, b, ZR_PARAMETERS).n;
        os_info("omnishard infer: memory (rank 0): parameters %lld bytes, session %lld bytes, allocated peak %lld bytes, "
                "peak RSS %lld bytes", (long long)params, (long long)session, (long long)os_alloc_peak_bytes(),
                (long long)os_peak_rss_bytes());
    }
    if (os_infer_output_close(&out) < 0 && code == 0) code = 1, fprintf(stderr, "omnishard infer: %s\n", os_errmsg());
    os_tok_free(c.tok);
    os_session_close(&c.s);
    return code;
}
