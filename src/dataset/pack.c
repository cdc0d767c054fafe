// Packing view (pack.h): rows formed at open; each get concatenates its members into a ring of buffers.
#include "dataset/pack.h"
#include "core/alloc.h"
#include "core/err.h"
#include <string.h>

#define RING 256   // packed rows returned by get stay valid for the next RING-1 gets (os_dataset.live)

typedef struct {
    int32_t *ids, *labels, *seg;
    uint8_t *speech;   // [L] the members' speech positions
    int64_t *wavs;     // [<= L] the spoken members' speech inputs, in order
    int64_t cap;       // positions * rows the buffers hold
} slot;

typedef struct {
    os_dataset base;
    os_dataset *src;
    int64_t *first;    // [n + 1] row i's members are src's samples first[i] .. first[i+1]-1
    int64_t *len;      // [n] row i's positions
    slot ring[RING];
    int ringpos;
} pack_ds;

static void slot_free(slot *s) {
    os_free(s->ids), os_free(s->labels), os_free(s->seg), os_free(s->speech), os_free(s->wavs);
}

// a slot for a row of R x L cells (R >= 1)
static slot *next_slot(pack_ds *d, int64_t cells) {
    slot *s = &d->ring[d->ringpos];
    d->ringpos = (d->ringpos + 1) % RING;
    if (s->cap < cells) {
        slot_free(s);
        s->cap = cells;
        s->ids = os_alloc(sizeof(int32_t) * (size_t)cells, "packed row ids");
        s->labels = os_alloc(sizeof(int32_t) * (size_t)cells, "packed row labels");
        s->seg = os_alloc(sizeof(int32_t) * (size_t)cells, "packed row segments");
        s->speech = os_alloc((size_t)cells, "packed row speech positions");
        s->wavs = os_alloc(sizeof(int64_t) * (size_t)cells, "packed row speech inputs");
    }
    return s;
}

static int pack_get(os_dataset *base, int64_t i, os_sample *out) {
    pack_ds *d = (pack_ds *)base;
    int64_t L = d->len[i], off = 0;
    memset(out, 0, sizeof *out);
    slot *s = NULL;
    for (int64_t j = d->first[i]; j < d->first[i + 1]; j++) {
        os_sample m;
        if (d->src->get(d->src, j, &m) < 0) return -1;
        if (!s) s = next_slot(d, m.R * L), out->R = m.R, out->task = m.task;
        if (m.R != out->R || off + m.L > L)   // the source changed since the rows were formed
            return os_errf("%s: sample %lld: %lld rows of %lld positions, packing counted %lld rows of %lld", base->path,
                           (long long)j, (long long)m.R, (long long)m.L, (long long)out->R,
                           (long long)(d->len[i] - off));
        for (int64_t r = 0; r < m.R; r++) {
            memcpy(s->ids + r * L + off, m.ids + r * m.L, sizeof(int32_t) * (size_t)m.L);
            memcpy(s->labels + r * L + off, m.labels + r * m.L, sizeof(int32_t) * (size_t)m.L);
            s->labels[r * L + off] = -100;   // no target crosses into this member
        }
        for (int64_t p = 0; p < m.L; p++) s->seg[off + p] = (int32_t)(j - d->first[i]);
        for (int64_t p = 0; p < m.L; p++) s->speech[off + p] = m.speech ? m.speech[p] : 0;
        if (m.wav_index >= 0) s->wavs[out->nwavs++] = m.wav_index;
        off += m.L;
    }
    out->L = L, out->ids = s->ids, out->labels = s->labels, out->seg = s->seg, out->wav_index = -1;
    out->speech = out->nwavs ? s->speech : NULL, out->wavs = out->nwavs ? s->wavs : NULL;
    return 0;
}

// speech inputs keep the source's indices
static const char *pack_wav(os_dataset *base, int64_t wav_index) {
    pack_ds *d = (pack_ds *)base;
    return d->src->wav_path(d->src, wav_index);
}

static void pack_free(os_dataset *base) {
    pack_ds *d = (pack_ds *)base;
    for (int k = 0; k < RING; k++) slot_free(&d->ring[k]);
    d->src->free(d->src);
    os_free(d->first), os_free(d->len), os_free(d);
}

os_dataset *os_pack_inner(os_dataset *d) { return d && d->get == pack_get ? ((pack_ds *)d)->src : NULL; }

// each sample's length, then the rows: greedy in order
static int form_rows(pack_ds *d, int64_t max_length) {
    os_dataset *src = d->src;
    int64_t n = 0, used = 0;
    d->first[0] = 0;
    for (int64_t i = 0; i < src->n; i++) {
        os_sample s;
        if (src->get(src, i, &s) < 0) return os_err_ctx("--packing true");
        if (used > 0 && used + s.L > max_length) d->len[n] = used, d->first[++n] = i, used = 0;
        used += s.L;
    }
    if (used > 0) d->len[n] = used, d->first[++n] = src->n;
    d->base.n = n;
    return 0;
}

os_dataset *os_pack_open(os_dataset *src, int64_t max_length) {
    pack_ds *d = os_alloc(sizeof *d, "packing view");
    d->base = *src;
    d->base.get = pack_get, d->base.free = pack_free, d->base.wav_path = src->wav_path ? pack_wav : NULL, d->base.record = NULL;
    d->base.live = RING, d->base.lazy_skipped = NULL, d->base.sources = NULL, d->base.nsources = 0;
    d->src = src;
    d->first = os_alloc(sizeof(int64_t) * (size_t)(src->n + 2), "packed rows");
    d->len = os_alloc(sizeof(int64_t) * (size_t)(src->n + 1), "packed row lengths");
    if (form_rows(d, max_length) == 0) return &d->base;
    pack_free(&d->base);
    return NULL;
}
