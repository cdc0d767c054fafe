#include "train/loader.h"
#include "core/alloc.h"
#include "core/err.h"
#include "train/agree.h"
#include "zero/comm.h"

void os_loader_open(os_loader *l, os_dataset *ds, const os_model *m, os_speech *speech, int32_t pad_id,
                    int64_t batch, int shuffle, uint64_t seed) {
    *l = (os_loader){.ds = ds, .m = m, .speech = speech, .pad_id = pad_id, .batch = batch, .rank = comm_rank(),
                     .ranks = comm_size(), .shuffle = shuffle, .seed = seed, .order_epoch = -1};
    l->order = os_alloc(sizeof(int64_t) * (size_t)ds->n, "sample order");
    l->smp = os_alloc(sizeof(os_sample) * (size_t)batch, "micro-batch samples");
    for (int i = 0; i < 2 * (OS_MAX_G + 1); i++) l->empty_ids[i] = pad_id, l->empty_lab[i] = -100;
    int64_t R = m->oc.G > 0 ? m->oc.G + 1 : 1;
    l->empty = (os_sample){.R = R, .L = 2, .ids = l->empty_ids, .labels = l->empty_lab, .wav_index = -1};
}

void os_loader_close(os_loader *l) {
    os_free(l->order), os_free(l->smp);
    l->order = NULL, l->smp = NULL;
}

void os_loader_start(os_loader *l, os_data_pos at, int64_t step) {
    if (at.epoch != l->order_epoch) {
        if (l->shuffle) os_epoch_perm(l->order, l->ds->n, l->seed, at.epoch);
        else
            for (int64_t i = 0; i < l->ds->n; i++) l->order[i] = i;
        l->order_epoch = at.epoch;
    }
    l->pos = at.pos, l->g = l->rank, l->step = step;
}

const int64_t *os_loader_stream(const os_loader *l) { return l->order + l->pos; }

int64_t os_loader_filled(const os_loader *l, int64_t per_rank) {
    return os_data_filled(l->pos, per_rank * l->ranks, l->batch, l->ds->n);
}

int64_t os_loader_rounds(const os_loader *l) {
    int64_t round = l->ranks * l->batch;
    return (l->ds->n - l->pos + round - 1) / round;
}

// samples [first, first + n) of the stream into l->smp; 0, or -1 + message at the first that fails
static int read_samples(os_loader *l, int64_t first, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (l->ds->get(l->ds, l->order[first + i], &l->smp[i]) < 0) return -1;
    return 0;
}

// the batch against the model, then its speech inputs (WAV -> log-mel, or the cached encoder output)
static int prepare(os_loader *l, const os_micro *mb, int64_t first) {
    const os_model *m = l->m;
    os_batch_vocab v = {m->oc.G, m->oc.text_vocab, m->oc.audio_vocab, m->V};
    if (os_batch_check(&mb->b, &v) < 0) {
        if (l->step > 0) return os_err_ctx("%s (step %lld)", l->ds->path, (long long)l->step);
        return os_err_ctx("%s (evaluation)", l->ds->path);
    }
    return os_speech_prepare(l->speech, &mb->b, l->ds, l->smp, mb->n ? l->order + first : NULL, mb->n);
}

int os_loader_next(os_loader *l, os_micro *mb) {
    int64_t first;
    mb->g = l->g;
    mb->n = os_data_micro(l->pos, l->g, l->batch, l->ds->n, &first);
    l->g += l->ranks;
    if (os_agree_ok(read_samples(l, first, mb->n)) < 0) return -1;
    if (mb->n) os_collate(&mb->b, l->smp, mb->n, l->pad_id);
    else os_collate(&mb->b, &l->empty, 1, l->pad_id);   // nothing left for this micro-batch: run with no targets
    if (os_agree_ok(prepare(l, mb, first)) == 0) return 0;
    os_batch_free(&mb->b);
    return -1;
}

void os_micro_free(os_micro *mb) { os_batch_free(&mb->b); }
