// Unit test of the step's split among ranks (src/dataset/sampler.c: os_data_micro, os_data_filled, os_data_take,
// os_data_advance, os_data_steps) against a direct model of the stream: one reader walks the positions of a step,
// [pos, min(pos + GB, n)), in order and cuts them into micro-batches of `batch`; the c-th piece is global
// micro-batch c (= k * ranks + rank), the rest of the step's ranks * K micro-batches are empty. Swept over sample
// counts, ranks, accumulation, batch sizes and every start position (a resume may start a step anywhere), and
// over whole runs of several epochs (every sample once per epoch, the step count os_data_steps predicts).
#include "dataset/sampler.h"
#include "check.h"

// the model: the piece of global micro-batch g of the step at pos (count 0: empty)
static void model_piece(int64_t pos, int64_t g, int64_t batch, int64_t n, int64_t GB, int64_t *first, int64_t *count) {
    int64_t end = pos + GB < n ? pos + GB : n, at = pos;
    *first = -1, *count = 0;
    for (int64_t c = 0; at < end; c++, at += batch)
        if (c == g) *first = at, *count = end - at < batch ? end - at : batch;
}

static void check_step(int64_t n, int64_t N, int64_t K, int64_t B, int64_t pos) {
    int64_t GB = N * K * B, filled = 0, covered = 0;
    for (int64_t k = 0; k < K; k++)
        for (int64_t r = 0; r < N; r++) {
            int64_t g = k * N + r, first, mf, mc, count = os_data_micro(pos, g, B, n, &first);
            model_piece(pos, g, B, n, GB, &mf, &mc);
            CHECK(count == mc && (!mc || first == mf), "n %lld ranks %lld K %lld batch %lld pos %lld: rank %lld micro-batch "
                  "%lld takes [%lld, +%lld), expected [%lld, +%lld)", (long long)n, (long long)N, (long long)K,
                  (long long)B, (long long)pos, (long long)r, (long long)k, (long long)first, (long long)count,
                  (long long)mf, (long long)mc);
            filled += count > 0, covered += count;
        }
    os_data_pos p = {0, pos};
    CHECK(os_data_filled(pos, N * K, B, n) == filled, "n %lld GB %lld pos %lld: filled %lld, expected %lld", (long long)n,
          (long long)GB, (long long)pos, (long long)os_data_filled(pos, N * K, B, n), (long long)filled);
    CHECK(os_data_take(&p, n, GB) == covered, "n %lld GB %lld pos %lld: take %lld, the micro-batches hold %lld",
          (long long)n, (long long)GB, (long long)pos, (long long)os_data_take(&p, n, GB), (long long)covered);
}

// a run of `epochs` epochs from the start: every position of each epoch taken once, in order, in the predicted steps
static void check_run(int64_t n, int64_t GB, int64_t epochs) {
    os_data_pos p = {0, 0}, end = {epochs, 0};
    int64_t steps = 0, next = 0, ok = 1;
    while (p.epoch < epochs) {
        int64_t take = os_data_take(&p, n, GB);
        ok &= p.pos == next % n && take >= 1 && take <= GB;
        next += take, steps++;
        os_data_advance(&p, n, GB);
    }
    CHECK(ok && next == epochs * n, "n %lld GB %lld: the stream skips or repeats positions", (long long)n, (long long)GB);
    CHECK(steps == os_data_steps((os_data_pos){0, 0}, end, n, GB), "n %lld GB %lld: %lld steps, os_data_steps says %lld",
          (long long)n, (long long)GB, (long long)steps, (long long)os_data_steps((os_data_pos){0, 0}, end, n, GB));
}

int main(void) {
    for (int64_t n = 1; n <= 13; n++)
        for (int64_t N = 1; N <= 4; N++)
            for (int64_t K = 1; K <= 3; K++)
                for (int64_t B = 1; B <= 4; B++) {
                    for (int64_t pos = 0; pos < n; pos++) check_step(n, N, K, B, pos);
                    check_run(n, N * K * B, 3);
                }
    return check_report("test_sampler");
}
