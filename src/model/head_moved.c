// Rows moved between ranks to even out the head's work (head_balance.h). Messages, per pair of ranks (sizes in
// bytes, each rounded up to 8):
//   rows, owner -> receiver, K rows: hn [K, C] float, targets [G+1][K] int32 (term-major), the owner's gradient
//     scales [G+1] float;
//   back, receiver -> owner: loss sums [G+1] double, correct [G+1] int64, then with dh the rows' dL/dhn [K, C].
// The K rows are the owner's moves to that receiver in plan order, each the next rows from the end of its class.
#include "core/alloc.h"
#include "core/err.h"
#include "kernels/ops.h"
#include "model/head_run.h"
#include <string.h>

static int64_t up8(int64_t b) { return (b + 7) / 8 * 8; }

// the work of one row of each class: its products (logits, dh, dW, the adapter's three), in multiply-adds, and the
// cross-entropy's passes over its columns
static void row_costs(const head_run *h, double cost[NCLS]) {
    const os_model *m = h->m;
    double C = (double)m->C, A = (double)m->oc.audio_vocab, GA = (double)(m->oc.G * m->oc.audio_vocab);
    for (int c = 0; c < NCLS; c++) {
        int64_t d0 = h->row0 > h->c0[c] ? h->row0 : h->c0[c];
        double w = (double)(h->c1[c] - h->c0[c]);
        cost[c] = C * w * (1 + h->dh) + (h->dW && d0 < h->c1[c] ? C * (double)(h->c1[c] - d0) : 0) + 8 * w;
        if (c != CLS_T && h->Wa && m->oc.G > 0) cost[c] += GA * A * (1 + h->bw + (h->dWa != NULL));
        if (cost[c] < 1) cost[c] = 1;
    }
}

// The plan from every rank's class counts, whether its rows can move (fixed: not) and its micro-batch's rows (Nall);
// 0 moves when some rank's rows cannot move. A rank
// computes at most Nall rows in all: its logits chunk and stash are sized for them (activations.c), so rows
// beyond would be computed in chunks smaller than its own (an empty micro-batch, 2 rows, would take them 2 at a time).
enum { M_FIXED = NCLS, M_NALL, M_N };
static int plan(const head_run *h, const os_head_peers *P, const int64_t ncls[NCLS], int fixed, int64_t Nall,
                os_head_move *mv) {
    int S = P->size, any_fixed = 0;
    int64_t mine[M_N], *all = os_alloc(sizeof mine * (size_t)S, "head balance counts");
    int64_t *counts = os_alloc(sizeof(int64_t) * (size_t)(S * NCLS), "head balance counts");
    int64_t *room = os_alloc(sizeof(int64_t) * (size_t)S, "head balance room");
    for (int c = 0; c < NCLS; c++) mine[c] = fixed ? 0 : ncls[c];
    mine[M_FIXED] = fixed, mine[M_NALL] = Nall;
    P->allgather(P->ctx, mine, all, (int64_t)sizeof mine);
    for (int r = 0; r < S; r++) {
        room[r] = all[r * M_N + M_NALL];
        for (int c = 0; c < NCLS; c++) counts[r * NCLS + c] = all[r * M_N + c], room[r] -= all[r * M_N + c];
        any_fixed |= all[r * M_N + M_FIXED] != 0;
    }
    double cost[NCLS];
    row_costs(h, cost);
    int nm = !any_fixed ? os_head_plan(counts, room, cost, S, mv) : 0;
    os_free(all), os_free(counts), os_free(room);
    return nm;
}

typedef struct {
    const head_run *h;
    const os_head_move *mv;
    int nm, me, S, K1;
    int64_t C;
    int64_t ostart[NCLS], kept[NCLS];   // this rank's ordered rows per class: kept ones first, then the moved tail
    int64_t *kout, *kin;                // rows to / from each rank
} exch;

static int64_t rows_bytes(const exch *x, int64_t K) { return K ? up8(4 * (K * x->C + x->K1 * K + x->K1)) : 0; }
static int64_t back_bytes(const exch *x, int64_t K) { return K ? up8(16 * x->K1 + (x->h->dh ? 4 * K * x->C : 0)) : 0; }

// byte offsets of the messages to or from each rank, of sizes size(K[p]); returns the total
static int64_t offsets(const exch *x, const int64_t *K, int64_t (*size)(const exch *, int64_t), int64_t *bytes,
                       int64_t *off) {
    int64_t total = 0;
    for (int p = 0; p < x->S; p++) off[p] = total, bytes[p] = size(x, K[p]), total += bytes[p];
    return total;
}

// For each row this rank moves to rank p, in message order: fn(ctx, i, ordered row) with i its index in the message
typedef void (*row_fn)(void *ctx, int64_t i, int64_t row);
static void moved_rows(const exch *x, int p, row_fn fn, void *ctx) {
    int64_t next[NCLS], i = 0;
    for (int c = 0; c < NCLS; c++) next[c] = x->ostart[c] + x->kept[c];
    for (int q = 0; q < x->nm; q++) {
        const os_head_move *v = &x->mv[q];
        if (v->from != x->me) continue;
        for (int64_t r = 0; r < v->rows; r++, next[v->cls]++)
            if (v->to == p) fn(ctx, i++, next[v->cls]);
    }
}

typedef struct {
    const exch *x;
    char *msg;             // the message of K rows
    int64_t K;
    const int64_t *idx;    // unpack: ordered row -> the row of buf->dhn
    float *dhn;
} pack_ctx;

static void pack_row(void *ctx, int64_t i, int64_t row) {
    pack_ctx *k = ctx;
    const head_run *h = k->x->h;
    int64_t C = k->x->C;
    os_k->copy((float *)k->msg + i * C, h->hn + row * C, C);
    int32_t *y = (int32_t *)(k->msg + 4 * k->K * C);
    for (int t = 0; t < h->nterms; t++) y[t * k->K + i] = h->y[t][row];
}

static void unpack_dh(void *ctx, int64_t i, int64_t row) {
    pack_ctx *k = ctx;
    int64_t C = k->x->C;
    os_k->copy(k->dhn + k->idx[row] * C, (const float *)(k->msg + 16 * k->x->K1) + i * C, C);
}

// the rows this rank computes: per class its kept rows, then the rows moved here (moves in plan order), into hn,
// y [K1][Nc] and the owners' segments; at[q]: where move q's rows start (moves to this rank)
typedef struct {
    float *hn;
    int32_t *y;
    head_seg *seg;
    int nseg;
    int64_t Nc, start[NCLS], cnt[NCLS], *at;
} local_rows;

static void gather_rows(const exch *x, const char *recv, const int64_t *roff, os_loss_sums *fs, local_rows *L) {
    const head_run *h = x->h;
    // where each move's rows start in its sender's message: after the rows of the sender's earlier moves to this rank
    int64_t C = x->C, *cur = os_alloc(sizeof(int64_t) * (size_t)x->S, "head balance cursors"), r = 0;
    int64_t *first = os_alloc(sizeof(int64_t) * (size_t)(x->nm + 1), "head balance offsets");
    memset(cur, 0, sizeof(int64_t) * (size_t)x->S);
    for (int q = 0; q < x->nm; q++)
        if (x->mv[q].to == x->me) first[q] = cur[x->mv[q].from], cur[x->mv[q].from] += x->mv[q].rows;
    L->Nc = 0;
    for (int c = 0; c < NCLS; c++) L->Nc += x->kept[c];
    for (int p = 0; p < x->S; p++) L->Nc += x->kin[p];
    L->hn = os_alloc_uninit(sizeof(float) * (size_t)(L->Nc * C + 1), "head rows here[rows, C]");
    L->y = os_alloc_uninit(sizeof(int32_t) * (size_t)(L->Nc * x->K1 + 1), "head targets here");
    L->seg = os_alloc(sizeof(head_seg) * (size_t)(NCLS * (1 + x->nm)), "head row owners");
    L->at = os_alloc(sizeof(int64_t) * (size_t)(x->nm + 1), "head moved rows");
    L->nseg = 0;
    for (int c = 0; c < NCLS; c++) {
        L->start[c] = r;
        for (int64_t i = 0; i < x->kept[c]; i++, r++) {
            os_k->copy(L->hn + r * C, h->hn + (x->ostart[c] + i) * C, C);
            for (int t = 0; t < x->K1; t++) L->y[t * L->Nc + r] = h->y[t][x->ostart[c] + i];
        }
        L->seg[L->nseg++] = (head_seg){.end = r, .scale = h->scale, .s = h->s};
        for (int q = 0; q < x->nm; q++) {
            const os_head_move *v = &x->mv[q];
            if (v->to != x->me || v->cls != c) continue;
            int p = v->from;
            int64_t K = x->kin[p];
            const char *msg = recv + roff[p];
            const int32_t *y = (const int32_t *)(msg + 4 * K * C);
            L->at[q] = r;
            for (int64_t i = first[q]; i < first[q] + v->rows; i++, r++) {
                os_k->copy(L->hn + r * C, (const float *)msg + i * C, C);
                for (int t = 0; t < x->K1; t++) L->y[t * L->Nc + r] = y[t * K + i];
            }
            L->seg[L->nseg++] = (head_seg){.end = r, .scale = (const float *)(y + x->K1 * K), .s = &fs[p]};
        }
        L->cnt[c] = r - L->start[c];
    }
    os_free(cur), os_free(first);
}

// the answers to the rows moved here: per owner its loss sums, then the rows' input gradients in its order
static void pack_back(const exch *x, const local_rows *L, const float *dhn, const os_loss_sums *fs, char *send,
                      const int64_t *soff) {
    for (int p = 0; p < x->S; p++) {
        if (!x->kin[p]) continue;
        char *msg = send + soff[p];
        memcpy(msg, fs[p].sum, sizeof(double) * (size_t)x->K1);
        memcpy(msg + 8 * x->K1, fs[p].correct, sizeof(int64_t) * (size_t)x->K1);
        float *d = (float *)(msg + 16 * x->K1);
        for (int q = 0; q < x->nm && x->h->dh; q++) {
            const os_head_move *v = &x->mv[q];
            if (v->to != x->me || v->from != p) continue;
            os_k->copy(d, dhn + L->at[q] * x->C, v->rows * x->C);
            d += v->rows * x->C;
        }
    }
}

// the classes over the rows in L (the buffers and owners swapped in for the call); dh into dhn (NULL: none)
static void run_here(head_run *h, const local_rows *L, float *dhn, int64_t Nall) {
    head_run saved = *h;
    h->hn = L->hn, h->dhn = dhn, h->seg = L->seg, h->nseg = L->nseg;
    for (int t = 0; t < h->nterms; t++) h->y[t] = L->y + t * L->Nc;
    os_head_run_classes(h, L->start, L->cnt, L->Nc, Nall);
    h->hn = saved.hn, h->dhn = saved.dhn, h->seg = saved.seg, h->nseg = saved.nseg;
    memcpy(h->y, saved.y, sizeof saved.y);
}

// the exchange's bookkeeping from the plan: rows to and from each rank, the rows this rank keeps per class
static void exch_init(exch *x, head_run *h, const os_head_peers *P, const int64_t ncls[NCLS], os_head_move *mv,
                      int nm) {
    int S = P->size;
    *x = (exch){.h = h, .mv = mv, .nm = nm, .me = P->rank, .S = S, .K1 = h->nterms, .C = h->m->C};
    x->kout = os_alloc(sizeof(int64_t) * (size_t)S, "head balance rows");
    x->kin = os_alloc(sizeof(int64_t) * (size_t)S, "head balance rows");
    memset(x->kout, 0, sizeof(int64_t) * (size_t)S), memset(x->kin, 0, sizeof(int64_t) * (size_t)S);
    for (int c = 0; c < NCLS; c++) x->ostart[c] = c ? x->ostart[c - 1] + ncls[c - 1] : 0, x->kept[c] = ncls[c];
    for (int q = 0; q < nm; q++) {
        if (mv[q].from == x->me) x->kout[mv[q].to] += mv[q].rows, x->kept[mv[q].cls] -= mv[q].rows;
        if (mv[q].to == x->me) x->kin[mv[q].from] += mv[q].rows;
    }
    OS_ASSERT(x->kept[0] >= 0 && x->kept[1] >= 0 && x->kept[2] >= 0);
}

int os_head_balanced(head_run *h, const os_head_peers *P, const int64_t ncls[NCLS], const int64_t *idx, int64_t Nall) {
    int S = P->size;
    os_head_move *mv = os_alloc(sizeof(os_head_move) * (size_t)OS_HEAD_MAX_MOVES(S), "head balance plan");
    int nm = plan(h, P, ncls, idx == NULL, Nall, mv);
    if (!nm) {
        os_free(mv);
        return 0;
    }
    exch x;
    exch_init(&x, h, P, ncls, mv, nm);
    // the rows out
    int64_t *sb = os_alloc(sizeof(int64_t) * (size_t)(4 * S), "head balance offsets"), *so = sb + S, *rb = so + S;
    int64_t *ro = rb + S;
    char *send = os_alloc_uninit((size_t)offsets(&x, x.kout, rows_bytes, sb, so) + 8, "head rows out");
    char *recv = os_alloc_uninit((size_t)offsets(&x, x.kin, rows_bytes, rb, ro) + 8, "head rows in");
    for (int p = 0; p < S; p++) {
        if (!x.kout[p]) continue;
        pack_ctx k = {.x = &x, .msg = send + so[p], .K = x.kout[p]};
        moved_rows(&x, p, pack_row, &k);
        memcpy(k.msg + 4 * k.K * (x.C + x.K1), h->scale, sizeof(float) * (size_t)x.K1);
    }
    P->alltoallv(P->ctx, send, sb, so, recv, rb, ro);
    // the classes over this rank's rows and the rows moved here
    os_loss_sums *fs = os_alloc(sizeof(os_loss_sums) * (size_t)S, "moved rows' loss sums");
    memset(fs, 0, sizeof(os_loss_sums) * (size_t)S);
    local_rows L;
    gather_rows(&x, recv, ro, fs, &L);
    float *dhn = h->dh ? os_alloc_uninit(sizeof(float) * (size_t)(L.Nc * x.C + 1), "head row gradients here") : NULL;
    run_here(h, &L, dhn, Nall);
    // the answers back: dh of the kept rows in place, of the moved ones from their receiver
    os_free(send), os_free(recv);
    send = os_alloc_uninit((size_t)offsets(&x, x.kin, back_bytes, sb, so) + 8, "head answers out");
    recv = os_alloc_uninit((size_t)offsets(&x, x.kout, back_bytes, rb, ro) + 8, "head answers in");
    pack_back(&x, &L, dhn, fs, send, so);
    P->alltoallv(P->ctx, send, sb, so, recv, rb, ro);
    if (h->dh) {
        os_k->zero(h->dhn, Nall * x.C);
        for (int c = 0; c < NCLS; c++)
            for (int64_t i = 0; i < x.kept[c]; i++)
                os_k->copy(h->dhn + idx[x.ostart[c] + i] * x.C, dhn + (L.start[c] + i) * x.C, x.C);
    }
    for (int p = 0; p < S; p++) {
        if (!x.kout[p]) continue;
        pack_ctx k = {.x = &x, .msg = recv + ro[p], .K = x.kout[p], .idx = idx, .dhn = h->dhn};
        double sum[OS_MAX_G + 1];
        int64_t correct[OS_MAX_G + 1];
        memcpy(sum, k.msg, sizeof(double) * (size_t)x.K1);
        memcpy(correct, k.msg + 8 * x.K1, sizeof(int64_t) * (size_t)x.K1);
        for (int t = 0; t < x.K1; t++) h->s->sum[t] += sum[t], h->s->correct[t] += correct[t];
        if (h->dh) moved_rows(&x, p, unpack_dh, &k);
    }
    for (int p = 0; p < S; p++) h->s->moved += x.kout[p];
    os_free(send), os_free(recv), os_free(fs), os_free(dhn), os_free(L.hn), os_free(L.y), os_free(L.seg), os_free(L.at);
    os_free(sb), os_free(x.kout), os_free(x.kin), os_free(mv);
    return 1;
}
