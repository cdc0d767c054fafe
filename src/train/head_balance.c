#include "train/head_balance.h"
#include "core/alloc.h"
#include "core/err.h"
#include "kernels/ops.h"
#include "train/head_plan.h"
#include "zero/comm.h"
#include <string.h>

enum { NCLS = OS_LOSS_NCLS, NT = OS_MAX_G + 1 };

// The plan from every rank's rows per class, whether its rows can move (fixed: not; then no rank's move), its room
// (cap, the micro-batch's rows: a rank computes at most that many rows in all, its logits chunk and stash are sized
// for them (model/activations.c), so rows beyond would be computed in chunks smaller than its own: an empty
// micro-batch, 2 rows, would take them 2 at a time) and the work of one row of each class (cost, the same on every
// rank). Returns the number of moves.
enum { M_FIXED = NCLS, M_NALL, M_N };
static int plan(const os_loss_rows *r, const double cost[NCLS], int64_t cap, int S, os_head_move *mv) {
    int any_fixed = 0;
    int64_t mine[M_N], *all = os_alloc(sizeof mine * (size_t)S, "head balance counts");
    int64_t *counts = os_alloc(sizeof(int64_t) * (size_t)(S * NCLS), "head balance counts");
    int64_t *room = os_alloc(sizeof(int64_t) * (size_t)S, "head balance room");
    for (int c = 0; c < NCLS; c++) mine[c] = r->fixed ? 0 : r->cnt[c];
    mine[M_FIXED] = r->fixed, mine[M_NALL] = cap;
    comm_allgather_bytes(mine, all, (int64_t)sizeof mine);
    for (int p = 0; p < S; p++) {
        room[p] = all[p * M_N + M_NALL];
        for (int c = 0; c < NCLS; c++) counts[p * NCLS + c] = all[p * M_N + c], room[p] -= all[p * M_N + c];
        any_fixed |= all[p * M_N + M_FIXED] != 0;
    }
    int nm = !any_fixed ? os_head_plan(counts, room, cost, S, mv) : 0;
    os_free(all), os_free(counts), os_free(room);
    return nm;
}

// the exchange's bookkeeping from the plan
typedef struct {
    const os_loss_rows *r;               // this rank's rows
    const os_head_move *mv;
    int nm, me, S, K1, dh;
    int64_t C;
    int64_t ostart[NCLS], kept[NCLS];    // this rank's rows per class: the kept ones first, then the moved tail
    int64_t *kout, *kin;                 // rows to / from each rank
} exch;

// a rows message of K rows and an answer (the header's layout)
typedef struct {
    float *hn, *scale;
    int32_t *y;
} rows_msg;
typedef struct {
    double *sum;
    int64_t *correct;
    float *dh;
} back_msg;

static int64_t up8(int64_t b) { return (b + 7) / 8 * 8; }
static int64_t rows_bytes(const exch *x, int64_t K) { return K ? up8(4 * (K * x->C + x->K1 * K + x->K1)) : 0; }
static int64_t back_bytes(const exch *x, int64_t K) { return K ? up8(16 * x->K1 + (x->dh ? 4 * K * x->C : 0)) : 0; }
static rows_msg rows_at(const exch *x, char *at, int64_t K) {
    rows_msg g = {.hn = (float *)at};
    g.y = (int32_t *)(g.hn + K * x->C), g.scale = (float *)(g.y + x->K1 * K);
    return g;
}
static back_msg back_at(const exch *x, char *at) {
    back_msg g = {.sum = (double *)at};
    g.correct = (int64_t *)(g.sum + x->K1), g.dh = (float *)(g.correct + x->K1);
    return g;
}

// the messages to or from every rank, K[p] rows each: their sizes, offsets, one buffer
typedef struct {
    int64_t *bytes, *off;
    char *buf;
} msgs;
static msgs msgs_new(const exch *x, const int64_t *K, int64_t (*size)(const exch *, int64_t), const char *what) {
    msgs g = {.bytes = os_alloc(sizeof(int64_t) * (size_t)(2 * x->S), "head balance offsets")};
    int64_t total = 0;
    g.off = g.bytes + x->S;
    for (int p = 0; p < x->S; p++) g.off[p] = total, g.bytes[p] = size(x, K[p]), total += g.bytes[p];
    g.buf = os_alloc_uninit((size_t)total + 8, what);
    return g;
}
static void msgs_free(msgs *g) { os_free(g->bytes), os_free(g->buf); }

static exch exch_new(const os_loss_rows *r, int64_t C, int dh, int me, int S, const os_head_move *mv, int nm) {
    exch x = {.r = r, .mv = mv, .nm = nm, .me = me, .S = S, .K1 = r->nterms, .dh = dh, .C = C};
    x.kout = os_alloc(sizeof(int64_t) * (size_t)S, "head balance rows");
    x.kin = os_alloc(sizeof(int64_t) * (size_t)S, "head balance rows");
    for (int c = 0; c < NCLS; c++) x.ostart[c] = c ? x.ostart[c - 1] + r->cnt[c - 1] : 0, x.kept[c] = r->cnt[c];
    for (int q = 0; q < nm; q++) {
        if (mv[q].from == me) x.kout[mv[q].to] += mv[q].rows, x.kept[mv[q].cls] -= mv[q].rows;
        if (mv[q].to == me) x.kin[mv[q].from] += mv[q].rows;
    }
    OS_ASSERT(x.kept[0] >= 0 && x.kept[1] >= 0 && x.kept[2] >= 0);
    return x;
}

// the rows of this rank's that go to rank p, in message order, into list[kout[p]]
static void rows_to(const exch *x, int p, int64_t *list) {
    int64_t next[NCLS], k = 0;
    for (int c = 0; c < NCLS; c++) next[c] = x->ostart[c] + x->kept[c];
    for (int q = 0; q < x->nm; q++) {
        const os_head_move *v = &x->mv[q];
        if (v->from != x->me) continue;
        for (int64_t i = 0; i < v->rows && v->to == p; i++) list[k++] = next[v->cls] + i;
        next[v->cls] += v->rows;
    }
}

// list[0..K) as an int32 index list on the backend: with inverse, over rows [0, max + 1) of the rows, each its place
// in list or -1 (*n: that count), else list itself (*n = K)
static int32_t *rows_list(const int64_t *list, int64_t K, int inverse, int64_t *n) {
    int64_t top = 0;
    for (int64_t i = 0; i < K; i++) top = list[i] + 1 > top ? list[i] + 1 : top;
    *n = inverse ? top : K;
    int32_t *h = os_alloc(sizeof(int32_t) * (size_t)(*n + 1), "head moved rows");
    for (int64_t i = 0; i < *n; i++) h[i] = inverse ? -1 : (int32_t)list[i];
    for (int64_t i = 0; inverse && i < K; i++) h[list[i]] = (int32_t)i;
    int32_t *d = os_ids_upload(h, *n, "head moved rows (backend)");
    os_free(h);
    return d;
}

// rows list[0..K) of dev [*, C] (the backend's) into host [K, C] (a message): one gather on the backend, one download
static void rows_down(float *host, const float *dev, const int64_t *list, int64_t K, int64_t C) {
    float *st = os_k->alloc((int64_t)sizeof(float) * (K * C + 1), "head rows (staging)");
    int64_t n;
    int32_t *d = rows_list(list, K, 0, &n);
    os_k->gather_rows(st, dev, d, n, C);
    os_k->download(host, st, (int64_t)sizeof(float) * K * C);
    os_k->free(st), os_k->free(d);
}
// host [K, C] (a message) into rows list[0..K) of dev [*, C] (distinct): one upload, then one gather through the
// inverse list on the backend (the rows between them left as they are)
static void rows_up(float *dev, const float *host, const int64_t *list, int64_t K, int64_t C) {
    float *st = os_k->alloc((int64_t)sizeof(float) * (K * C + 1), "head rows (staging)");
    os_k->upload(st, host, (int64_t)sizeof(float) * K * C);
    int64_t n;
    int32_t *d = rows_list(list, K, 1, &n);
    os_k->gather_rows(dev, st, d, n, C);
    os_k->free(st), os_k->free(d);
}

// the rows computed here: per class this rank's kept rows (owner me), then the rows moved here (owner: the sender),
// moves in plan order; at[q]: where move q's rows start (moves to this rank)
typedef struct {
    os_loss_rows r;
    float *hn, *dhn, *scale;   // hn, dhn [rows, C] and y [K1, rows] on the backend, yh y's host copy
    int32_t *y, *yh;
    int *owner;
    os_loss_sums *dsums;  // [S] on the backend's memory, what the head adds into; sums[me] this rank's own rows'
    os_loss_sums *sums;   // [S] their host copy, read once the rows are computed (the answers are host messages)
    int64_t start[NCLS], *at;
} here_rows;

static void here_fill(here_rows *H, const exch *x, const os_loss_rows *r, const msgs *in) {
    int64_t C = x->C, Nc = 0, row = 0;
    for (int c = 0; c < NCLS; c++) Nc += x->kept[c];
    for (int p = 0; p < x->S; p++) Nc += x->kin[p];
    H->hn = os_k->alloc((int64_t)sizeof(float) * (Nc * C + 1), "head rows here[rows, C]");
    H->dhn = x->dh ? os_k->alloc((int64_t)sizeof(float) * (Nc * C + 1), "head row gradients here") : NULL;
    H->y = os_k->alloc((int64_t)sizeof(int32_t) * (Nc * x->K1 + 1), "head targets here");
    H->yh = os_alloc_uninit(sizeof(int32_t) * (size_t)(Nc * x->K1 + 1), "head targets here (host)");
    H->owner = os_alloc(sizeof(int) * (size_t)(Nc + 1), "head row owners");
    H->scale = os_alloc(sizeof(float) * (size_t)(x->S * NT), "head owners' gradient scales");
    H->dsums = os_k->alloc((int64_t)sizeof(os_loss_sums) * x->S, "head owners' loss sums");
    H->sums = os_alloc(sizeof(os_loss_sums) * (size_t)x->S, "head owners' loss sums (host)");
    H->at = os_alloc(sizeof(int64_t) * (size_t)(x->nm + 1), "head moved rows");
    memcpy(H->scale + x->me * NT, r->scale, sizeof(float) * NT);
    // where each move's rows start in its sender's message: after the rows of the sender's earlier moves here
    int64_t *cur = os_alloc(sizeof(int64_t) * (size_t)x->S, "head balance cursors");
    int64_t *first = os_alloc(sizeof(int64_t) * (size_t)(x->nm + 1), "head balance offsets");
    for (int q = 0; q < x->nm; q++)
        if (x->mv[q].to == x->me) first[q] = cur[x->mv[q].from], cur[x->mv[q].from] += x->mv[q].rows;
    for (int c = 0; c < NCLS; c++) {
        H->start[c] = row;
        os_k->copy(H->hn + row * C, r->hn + x->ostart[c] * C, x->kept[c] * C);
        for (int64_t i = 0; i < x->kept[c]; i++, row++) {
            for (int t = 0; t < x->K1; t++) H->yh[t * Nc + row] = r->yh[t * r->ldy + x->ostart[c] + i];
            H->owner[row] = x->me;
        }
        for (int q = 0; q < x->nm; q++) {
            const os_head_move *v = &x->mv[q];
            if (v->to != x->me || v->cls != c) continue;
            int p = v->from;
            int64_t K = x->kin[p];
            rows_msg g = rows_at(x, in->buf + in->off[p], K);
            memcpy(H->scale + p * NT, g.scale, sizeof(float) * (size_t)x->K1);
            H->at[q] = row;
            os_k->upload(H->hn + row * C, g.hn + first[q] * C, (int64_t)sizeof(float) * v->rows * C);
            for (int64_t i = first[q]; i < first[q] + v->rows; i++, row++) {
                for (int t = 0; t < x->K1; t++) H->yh[t * Nc + row] = g.y[t * K + i];
                H->owner[row] = p;
            }
        }
    }
    os_k->upload(H->y, H->yh, (int64_t)sizeof(int32_t) * x->K1 * Nc);
    H->r = (os_loss_rows){.nterms = r->nterms, .hn = H->hn, .y = H->y, .yh = H->yh, .ldy = Nc, .owner = H->owner,
                          .scale = H->scale, .sums = H->dsums, .dhn = H->dhn};
    for (int c = 0; c < NCLS; c++) H->r.cnt[c] = (c + 1 < NCLS ? H->start[c + 1] : row) - H->start[c];
    os_free(cur), os_free(first);
}

static void here_free(here_rows *H) {
    os_k->free(H->hn), os_k->free(H->dhn), os_k->free(H->y), os_k->free(H->dsums);
    os_free(H->yh), os_free(H->owner), os_free(H->scale), os_free(H->sums);
    os_free(H->at);
}

// the answers to the rows moved here: per owner its loss sums, then the rows' input gradients in its order
static void pack_back(const exch *x, const here_rows *H, msgs *out) {
    for (int p = 0; p < x->S; p++) {
        if (!x->kin[p]) continue;
        back_msg g = back_at(x, out->buf + out->off[p]);
        memcpy(g.sum, H->sums[p].sum, sizeof(double) * (size_t)x->K1);
        memcpy(g.correct, H->sums[p].correct, sizeof(int64_t) * (size_t)x->K1);
        for (int q = 0; q < x->nm && x->dh; q++) {
            const os_head_move *v = &x->mv[q];
            if (v->to != x->me || v->from != p) continue;
            os_k->download(g.dh, H->dhn + H->at[q] * x->C, (int64_t)sizeof(float) * v->rows * x->C);
            g.dh += v->rows * x->C;
        }
    }
}

// this rank's rows' results: the kept rows' from here, the moved rows' from their receivers' answers
static void take_back(const exch *x, const here_rows *H, msgs *in, const os_loss_rows *r) {
    int64_t C = x->C;
    os_loss_sums acc;   // r's sums (on the backend's memory) added to on the host
    os_k->download(&acc, r->sums, (int64_t)sizeof acc);
    for (int t = 0; t < x->K1; t++) acc.sum[t] += H->sums[x->me].sum[t];
    for (int t = 0; t < x->K1; t++) acc.correct[t] += H->sums[x->me].correct[t];
    for (int c = 0; c < NCLS && x->dh; c++)
        os_k->copy(r->dhn + x->ostart[c] * C, H->dhn + H->start[c] * C, x->kept[c] * C);
    for (int p = 0; p < x->S; p++) {
        if (!x->kout[p]) continue;
        back_msg g = back_at(x, in->buf + in->off[p]);
        for (int t = 0; t < x->K1; t++) acc.sum[t] += g.sum[t], acc.correct[t] += g.correct[t];
        if (!x->dh) continue;
        int64_t *list = os_alloc(sizeof(int64_t) * (size_t)x->kout[p], "head moved rows");
        rows_to(x, p, list);
        rows_up(r->dhn, g.dh, list, x->kout[p], C);
        os_free(list);
    }
    os_k->upload(r->sums, &acc, (int64_t)sizeof acc);
}

// the exchange between os_head_out and os_head_back: the plan, the rows messages (kept until the answers: the
// uploads of here_fill read them) and the rows computed here
struct os_head_exch {
    exch x;
    os_head_move *mv;
    msgs out, in;
    here_rows H;
};

os_head_exch *os_head_out(const os_loss_rows *r, const double cost[OS_LOSS_NCLS], int64_t cap, int64_t C, int dh,
                          os_loss_rows *here) {
    OS_ASSERT(!r->owner);   // the micro-batch's own rows, one owner
    int S = comm_size();
    os_head_exch *e = os_alloc(sizeof *e, "head balance exchange");
    e->mv = os_alloc(sizeof(os_head_move) * (size_t)OS_HEAD_MAX_MOVES(S), "head balance plan");
    int nm = plan(r, cost, cap, S, e->mv);
    e->x = exch_new(r, C, dh, comm_rank(), S, e->mv, nm);
    *here = *r;   // nothing moves: this rank's rows, as without balancing
    if (!nm) return e;
    exch *x = &e->x;
    // the rows out
    e->out = msgs_new(x, x->kout, rows_bytes, "head rows out"), e->in = msgs_new(x, x->kin, rows_bytes, "head rows in");
    for (int p = 0; p < S; p++) {
        int64_t K = x->kout[p];
        if (!K) continue;
        int64_t *list = os_alloc(sizeof(int64_t) * (size_t)K, "head moved rows");
        rows_msg g = rows_at(x, e->out.buf + e->out.off[p], K);
        rows_to(x, p, list);
        rows_down(g.hn, r->hn, list, K, x->C);
        for (int64_t i = 0; i < K; i++)
            for (int t = 0; t < x->K1; t++) g.y[t * K + i] = r->yh[t * r->ldy + list[i]];
        memcpy(g.scale, r->scale, sizeof(float) * (size_t)x->K1);
        os_free(list);
    }
    comm_alltoallv_bytes(e->out.buf, e->out.bytes, e->out.off, e->in.buf, e->in.bytes, e->in.off);
    // this rank's kept rows and the rows moved here, as one set of rows
    here_fill(&e->H, x, r, &e->in);
    *here = e->H.r;
    return e;
}

int64_t os_head_back(os_head_exch *e) {
    exch *x = &e->x;
    int S = x->S;
    int64_t moved = 0;
    if (x->nm) {
        here_rows *H = &e->H;
        // the answers travel as host messages: the balanced loss's one wait for its kernels
        os_k->download(H->sums, H->dsums, (int64_t)sizeof(os_loss_sums) * S);
        // the answers back
        msgs_free(&e->out), msgs_free(&e->in);
        msgs out = msgs_new(x, x->kin, back_bytes, "head answers out"), in = msgs_new(x, x->kout, back_bytes, "head answers in");
        pack_back(x, H, &out);
        comm_alltoallv_bytes(out.buf, out.bytes, out.off, in.buf, in.bytes, in.off);
        take_back(x, H, &in, x->r);
        for (int p = 0; p < S; p++) moved += x->kout[p];
        msgs_free(&out), msgs_free(&in), here_free(H);
    }
    os_free(x->kout), os_free(x->kin), os_free(e->mv), os_free(e);
    return moved;
}
