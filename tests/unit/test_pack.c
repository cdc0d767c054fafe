// Unit test of packing (src/dataset/pack.c, the packed collation of src/dataset/batch.c) on a pretokenized file:
// the rows formed greedily in order up to max_length, every sample once and whole, each member's ids and labels as
// in the file but its first label -100 (no target crosses a sample boundary), the segment ids, the positions
// restarting at each sample, right padding as a segment of its own, and an unpacked collation unchanged (no seg/pos).
#include "core/alloc.h"
#include "dataset/batch.h"
#include "dataset/dataset.h"
#include "dataset/pack.h"
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NS = 7, NROWS = 4, MAXLEN = 10 };
static const int64_t len[NS] = {4, 3, 5, 2, 9, 1, 3};   // rows: [4 3] [5 2] [9 1] [3]
static int32_t id_of(int64_t i, int64_t p) { return (int32_t)(10 * i + p); }
static int32_t label_of(int64_t i, int64_t p) { return p == 1 ? -100 : (int32_t)(100 + 10 * i + p); }

static const char *write_file(char *path) {
    strcpy(path, "/tmp/test_pack_XXXXXX");
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) return NULL;
    for (int64_t i = 0; i < NS; i++) {
        fprintf(f, "{\"input_ids\": [[");
        for (int64_t p = 0; p < len[i]; p++) fprintf(f, "%s%d", p ? ", " : "", id_of(i, p));
        fprintf(f, "]], \"labels\": [[");
        for (int64_t p = 0; p < len[i]; p++) fprintf(f, "%s%d", p ? ", " : "", label_of(i, p));
        fprintf(f, "]]}\n");
    }
    return fclose(f) == 0 ? path : NULL;
}

int main(void) {
    char path[64];
    CHECK(write_file(path), "cannot write the test file");
    os_dataset *src = os_pretok_open(path, 1, 100, "right");
    CHECK(src && src->n == NS, "pretokenized file not read");
    if (!src) return check_report("test_pack");
    os_dataset *d = os_pack_open(src, MAXLEN);
    CHECK(d && d->n == NROWS, "expected %d packed rows, got %lld", NROWS, d ? (long long)d->n : -1LL);
    if (!d || d->n != NROWS) return check_report("test_pack");
    static const int64_t rows[NROWS][3] = {{0, 1, -1}, {2, 3, -1}, {4, 5, -1}, {6, -1, -1}};
    os_sample s[NROWS];
    for (int64_t r = 0; r < NROWS; r++) {
        CHECK(d->get(d, r, &s[r]) == 0, "row %lld: get failed", (long long)r);
        int64_t at = 0;
        for (int k = 0; k < 3 && rows[r][k] >= 0; k++) {
            int64_t i = rows[r][k];
            for (int64_t p = 0; p < len[i]; p++, at++) {
                CHECK(s[r].ids[at] == id_of(i, p), "row %lld position %lld: id %d, expected %d", (long long)r,
                      (long long)at, s[r].ids[at], id_of(i, p));
                int32_t want = p == 0 ? -100 : label_of(i, p);
                CHECK(s[r].labels[at] == want, "row %lld position %lld: label %d, expected %d", (long long)r,
                      (long long)at, s[r].labels[at], want);
                CHECK(s[r].seg[at] == k, "row %lld position %lld: segment %d, expected %d", (long long)r, (long long)at,
                      s[r].seg[at], k);
            }
        }
        CHECK(s[r].L == at && s[r].lead == 0 && s[r].wav_index == -1 && s[r].L <= MAXLEN,
              "row %lld: L %lld lead %lld, expected L %lld lead 0", (long long)r, (long long)s[r].L,
              (long long)s[r].lead, (long long)at);
    }
    // rows 0 and 2 collated: L 10, row 0 = samples 0 | 1 | padding
    os_sample two[2] = {s[0], s[2]};
    os_batch b;
    os_collate(&b, two, 2, 7);
    static const int32_t seg0[10] = {0, 0, 0, 0, 1, 1, 1, -1, -1, -1}, pos0[10] = {0, 1, 2, 3, 0, 1, 2, 0, 1, 2};
    static const int32_t seg2[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, pos2[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 0};
    CHECK(b.L == 10 && b.seg && b.pos, "packed collation: L %lld, seg/pos %s", (long long)b.L, b.seg ? "set" : "NULL");
    for (int64_t p = 0; b.seg && b.L == 10 && p < 10; p++) {
        CHECK(b.seg[p] == seg0[p] && b.pos[p] == pos0[p] && b.keymask[p] == (p < 7),
              "row 0 position %lld: seg %d pos %d mask %d, expected %d %d %d", (long long)p, b.seg[p], b.pos[p],
              b.keymask[p], seg0[p], pos0[p], p < 7);
        CHECK(b.seg[10 + p] == seg2[p] && b.pos[10 + p] == pos2[p] && b.keymask[10 + p] == 1,
              "row 1 position %lld: seg %d pos %d, expected %d %d", (long long)p, b.seg[10 + p], b.pos[10 + p], seg2[p],
              pos2[p]);
    }
    os_batch_free(&b);
    // an unpacked collation has no segments
    os_sample u;
    CHECK(src->get(src, 0, &u) == 0 && !u.seg, "a pretokenized sample has no segments");
    os_collate(&b, &u, 1, 7);
    CHECK(!b.seg && !b.pos, "unpacked collation: seg/pos must stay NULL");
    os_batch_free(&b);
    d->free(d);
    unlink(path);
    return check_report("test_pack");
}
