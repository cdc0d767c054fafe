// The parts of generation shared by one sequence (os_generate, infer.c) and many at once (os_generate_batch,
// infer_batch.c): the settings every sequence shares (the adapter's weights, the token choice's work space) and
// each sequence's own state (its result so far, its audio ids by step). Internal to src/infer/.
#pragma once
#include "infer/infer.h"

// what every sequence of a generation shares
typedef struct {
    const os_model *m;
    const os_gen_opts *o;
    int64_t G, T, A;
    int chooser;                // this rank picks the tokens (rank 0, or every rank decoding alone)
    float *ad;                  // the adapter bucket on the chooser (NULL: none, or another rank)
    const float *Wa, *ba;       //   its weight [G*A, A] and bias [G*A]
    int64_t rows;               // sequences whose audio logits one call computes at most
    float *za, *al;             // [rows, A] their z[T:T+A], [rows, G*A] their audio logits (the chooser)
    os_choice_work cw;          // the chooser
    uint64_t key;               // sampling stream (the seed's; each sequence draws by its own step and stream)
} gen_ctx;

// one sequence
typedef struct {
    os_gen_result r;            // so far
    int32_t *gen;               // [N, G] audio ids by step
    int audio_end;
} gen_seq;

// Collective (unless o->local): the adapter is gathered once. rows: sequences decoded at once (>= 1).
void gen_ctx_init(gen_ctx *c, os_session *s, const os_gen_opts *o, int64_t rows);
void gen_ctx_free(gen_ctx *c);
void gen_seq_init(gen_seq *q, const gen_ctx *c, const os_infer_prompt *p);
// local: rc as it is (-1 or 0); else every rank learns whether any failed (-1 on every rank then; the ranks that
// did not fail get a message too)
int gen_agree(int rc, int local);
// the speech front end of p's spoken question (before its first forward); 0, or -1 + message (every rank unless
// local)
int gen_prepare_speech(os_session *s, const os_infer_prompt *p, int local);
// the prompt of a lockstep rank without one of its own: one position of pad ids, no speech (q->ids, returned, is
// the caller's to free)
int32_t *gen_idle_prompt(os_infer_prompt *q, const os_model *m);
// the prompt's rows [R, cap] (positions [0, P) filled), allocated
int32_t *gen_prompt_rows(const os_infer_prompt *p, int64_t cap);
// The chooser: the audio logits of n sequences (z[i] their lm_head logits [V]; predict[i] 0: not wanted) into
// xa[i] ([G, A] each, NULL where not wanted), from one product with the adapter over the n rows.
void gen_audio_logits(gen_ctx *c, const float *const *z, int64_t n, const int *predict, const float **xa);
// whether sequence q predicts audio at `step` (not ended, after the latency steps)
int gen_predicts(const gen_ctx *c, const gen_seq *q, int64_t step);
// the chooser: the tokens of `step` from the lm_head logits z[V] and audio logits xa (gen_audio_logits):
// tok[0, G) raw audio ids, tok[G] the text id
void gen_choose(gen_ctx *c, const gen_seq *q, const float *z, const float *xa, int64_t step, int32_t *tok);
// every rank: the step's tokens into q; 1 when both streams have ended
int gen_record(const gen_ctx *c, gen_seq *q, const int32_t *tok, int64_t step);
// the rows of the position tok appends (audio ids shifted as the model reads them, then the text id) into
// rows[k * stride] for row k
void gen_append_rows(const gen_ctx *c, const int32_t *tok, int32_t *rows, int64_t stride);
// the result: audio by layer and the codec stream; q's buffers freed (r owns its own)
void gen_seq_finish(const gen_ctx *c, gen_seq *q, os_gen_result *r);
void gen_seq_free(gen_seq *q);
