// The start-up data check (docs/dataset.md "The start-up data check"): every training sample built once before the
// model loads, the ranks sharing the work, and counted: skipped (no answer position fits --max_length) or cut.
#include "train/data_check.h"
#include "core/err.h"
#include "train/stop.h"
#include "zero/comm.h"
#include <stdint.h>
#include <string.h>

// 1 when the sample has a trained position (a label other than -100)
static int trains(const os_sample *s) {
    for (int64_t k = 0; k < s->R * s->L; k++)
        if (s->labels[k] != -100) return 1;
    return 0;
}

void os_data_check(os_dataset *d, const char *what, int64_t max_length, const char *truncation) {
    int rank = comm_rank(), N = comm_size(), rc = 0;
    double count[3] = {0, 0, 0};   // skipped, cut, trained nowhere in the data (sums over the ranks; exact below 2^53)
    int64_t least = INT64_MAX;  // the smallest --max_length that trains a skipped sample
    for (int64_t i = rank, k = 0; i < d->n && rc == 0; i += N, k++) {
        if ((k & 1023) == 1023 && os_stop_signal) break;   // the caller's next stop boundary ends the run
        os_sample s;
        if (d->get(d, i, &s) < 0) {
            rc = -1;
            break;
        }
        if (trains(&s)) {
            if (s.need > 0) count[1]++;   // cut to fit
        } else if (s.need > 0) {   // skipped by --max_length
            count[0]++;
            if (s.need < least) least = s.need;
        } else {   // every label masked in the data itself: not --max_length's doing
            count[2]++;
        }
    }
    os_stop_if_failed(rc);
    comm_allreduce_sum_f64(count, 3);
    comm_allreduce_min_i64(&least, 1);
    int64_t skipped = (int64_t)count[0], cut = (int64_t)count[1], masked = (int64_t)count[2];
    if (skipped && skipped + masked == d->n) {   // (data without any target at all runs, and says so at its end)
        char who[160], fix[200] = "";
        if (masked)
            snprintf(who, sizeof who, "%lld of the %lld %s samples have", (long long)skipped, (long long)d->n, what);
        else
            snprintf(who, sizeof who, "every one of the %lld %s samples has", (long long)d->n, what);
        if (least < INT64_MAX)
            snprintf(fix, sizeof fix, "; the shortest needs %lld: give --max_length %lld or more", (long long)least,
                     (long long)least);
        if (!strcmp(truncation, "delete"))
            snprintf(fix + strlen(fix), sizeof fix - strlen(fix), ", or --truncation_strategy right trains each "
                     "sample's first max_length positions");
        os_stop_if_failed(os_errf("nothing can train: %s no answer position within --max_length %lld "
                                  "(--truncation_strategy %s)%s%s", who, (long long)max_length, truncation,
                                  masked ? ", and the others no trained position in the data" : "", fix));
    }
    if ((skipped || cut) && !os_stop_signal)   // (a stopped check counted a part)
        os_info("omnishard sft: data check: of %lld %s samples, %lld will be skipped (no answer position within "
                "--max_length %lld, --truncation_strategy %s) and %lld cut to fit it", (long long)d->n, what,
                (long long)skipped, (long long)max_length, truncation, (long long)cut);
}
