// Unit test of dataset mixing (src/dataset/mix.c) on real pretokenized files: PATH#N parsing; ms-swift's sampling
// (floor(N/n) whole copies in file order, then N mod n distinct samples); the mix's size and multiset of samples;
// the order a pure function of (specs, shuffle, seed, role) -- what makes every rank build the same mix -- and
// another seed giving another order; file order without shuffle; the digest covering the files, #N, shuffle and
// seed; a bad line of the second file named FILE:LINE of that file. Each sample is recognised by its id.
#include "dataset/mix.h"
#include "core/alloc.h"
#include "core/err.h"
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64], pa[128], pb[128], pbad[128];
static const os_data_sizes Z = {.G = 0};

// file f: n samples, sample i is two positions of id 100 f + i (labels the same)
static void write_file(const char *path, int f, int n, int bad_line) {
    FILE *o = fopen(path, "w");
    for (int i = 0; i < n; i++) {
        int v = 100 * f + i;
        if (i + 1 == bad_line) fprintf(o, "{\"input_ids\": [[%d, %d]], \"labels\": \n", v, v);
        else fprintf(o, "{\"input_ids\": [[%d, %d]], \"labels\": [[%d, %d]]}\n", v, v, v, v);
    }
    fclose(o);
}

static os_dataset *open_list(const char *s0, const char *s1, int shuffle, uint64_t seed, const char *role) {
    const char *specs[2] = {s0, s1};
    return os_dataset_open_list(specs, s1 ? 2 : 1, &Z, dir, 64, "right", shuffle, seed, role);
}

// the ids of d's samples in order, into out[] (at most 64); returns n
static int64_t ids(os_dataset *d, int *out) {
    for (int64_t i = 0; i < d->n && i < 64; i++) {
        os_sample s;
        out[i] = d->get(d, i, &s) == 0 ? s.ids[0] : -1;
    }
    return d->n;
}

static void check_parse(void) {
    char *p;
    int64_t n;
    CHECK(os_data_source_parse("a.jsonl#5", &p, &n) == 0 && !strcmp(p, "a.jsonl") && n == 5, "a.jsonl#5");
    os_free(p);
    CHECK(os_data_source_parse("x#y.jsonl", &p, &n) == 0 && !strcmp(p, "x#y.jsonl") && n == -1, "x#y.jsonl: a path");
    os_free(p);
    CHECK(os_data_source_parse("a.jsonl", &p, &n) == 0 && !strcmp(p, "a.jsonl") && n == -1, "a.jsonl");
    os_free(p);
    CHECK(os_data_source_parse("a.jsonl#0", &p, &n) < 0 && strstr(os_errmsg(), "a.jsonl#0"), "#0 refused: %s", os_errmsg());
}

static void check_pick(void) {
    int64_t idx[16], count[3] = {0};
    os_data_source_pick(idx, 3, 7, 1, 42);
    for (int i = 0; i < 6; i++) CHECK(idx[i] == i % 3, "3 of 7: whole copies first, in order (idx[%d] = %lld)", i, (long long)idx[i]);
    for (int i = 0; i < 7; i++) count[idx[i]]++;
    CHECK(count[0] + count[1] + count[2] == 7 && count[0] >= 2 && count[1] >= 2 && count[2] >= 2, "#7 of 3: each twice or more");
    os_data_source_pick(idx, 5, 3, 1, 42);
    CHECK(idx[0] != idx[1] && idx[0] != idx[2] && idx[1] != idx[2], "#3 of 5: without replacement");
    int moved = 0;
    for (uint64_t s = 0; s < 8; s++) {
        os_data_source_pick(idx, 5, 3, 1, s);
        moved |= idx[0] != 0 || idx[1] != 1 || idx[2] != 2;
    }
    CHECK(moved, "#3 of 5 with shuffle: a random choice (some seed picks other than the first three)");
    os_data_source_pick(idx, 5, 3, 0, 42);
    CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 2, "#3 of 5 without shuffle: the first three");
}

static void check_mix(void) {
    char a7[140], a2[140];
    snprintf(a7, sizeof a7, "%s#7", pa), snprintf(a2, sizeof a2, "%s#2", pa);
    int x[64], y[64], cnt[2][8] = {{0}};
    os_dataset *d = open_list(a7, pb, 1, 42, "train");
    CHECK(d && d->n == 11 && d->nsources == 2, "a#7 b: 7 + 4 samples from 2 files: %s", d ? "" : os_errmsg());
    if (!d) return;
    ids(d, x);
    for (int i = 0; i < 11; i++) cnt[x[i] / 100 - 1][x[i] % 100]++;
    CHECK(cnt[0][0] + cnt[0][1] + cnt[0][2] == 7 && cnt[0][0] >= 2 && cnt[0][1] >= 2 && cnt[0][2] >= 2, "a (3) #7");
    CHECK(cnt[1][0] == 1 && cnt[1][1] == 1 && cnt[1][2] == 1 && cnt[1][3] == 1, "b: each sample once");
    int sorted = 1;
    for (int i = 1; i < 11; i++) sorted &= x[i - 1] <= x[i];
    CHECK(!sorted, "shuffle: not in file order");
    os_dataset *e = open_list(a7, pb, 1, 42, "train");   // another rank, or the same run resumed
    ids(e, y);
    CHECK(!memcmp(x, y, sizeof(int) * 11) && e->digest == d->digest && e->bytes == d->bytes, "the same specs and seed: the same mix");
    e->free(e);
    e = open_list(a7, pb, 1, 43, "train");
    ids(e, y);
    CHECK(memcmp(x, y, sizeof(int) * 11) && e->digest != d->digest, "--data_seed 43: another order and digest");
    e->free(e);
    e = open_list(a7, pb, 1, 42, "val");
    ids(e, y);
    CHECK(memcmp(x, y, sizeof(int) * 11), "the val mix draws its own stream");
    e->free(e);
    e = open_list(a7, pb, 0, 42, "train");
    ids(e, y);
    int order = 1;
    for (int i = 0; i < 6; i++) order &= y[i] == 100 + i % 3;
    for (int i = 0; i < 4; i++) order &= y[7 + i] == 200 + i;
    CHECK(order && e->digest != d->digest, "--dataset_shuffle false: a's pick, then b in file order");
    e->free(e);
    e = open_list(a2, pb, 1, 42, "train");
    CHECK(e->n == 6 && e->digest != d->digest, "a#2: 2 + 4 samples, another digest");
    e->free(e);
    d->free(d);
    d = open_list(pa, NULL, 1, 42, "train");
    CHECK(d->nsources == 0 && d->n == 3, "one whole file: the file's dataset itself");
    ids(d, x);
    CHECK(x[0] == 100 && x[1] == 101 && x[2] == 102, "one whole file: file order");
    d->free(d);
}

static void check_error(void) {
    os_dataset *d = open_list(pa, pbad, 1, 42, "train");
    CHECK(!d && strstr(os_errmsg(), pbad) && strstr(os_errmsg(), ":2:"), "the bad file and line named: %s", os_errmsg());
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_mix_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(pa, sizeof pa, "%s/a.jsonl", dir), snprintf(pb, sizeof pb, "%s/b.jsonl", dir);
    snprintf(pbad, sizeof pbad, "%s/bad.jsonl", dir);
    write_file(pa, 1, 3, 0), write_file(pb, 2, 4, 0), write_file(pbad, 3, 3, 2);
    check_parse();
    check_pick();
    check_mix();
    check_error();
    remove(pa), remove(pb), remove(pbad), rmdir(dir);
    return check_report("test_mix");
}
