// A single answer's progress on stderr (infer_progress.h).
#include "infer/infer_progress.h"
#include "core/alloc.h"
#include "core/timer.h"
#include "infer/infer_lines.h"
#include "infer/infer_text.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { TAIL = 60, BAR = 20 };

void os_infer_progress_start(os_infer_progress *p, const os_tokenizer *tok, int64_t max_new_tokens) {
    *p = (os_infer_progress){.tok = tok, .max = max_new_tokens, .t0 = os_now(), .tty = isatty(2)};
}

// the last TAIL bytes of the text so far (from a UTF-8 lead byte), newlines and tabs as spaces, into out
static void text_tail(const os_infer_progress *p, const os_gen_result *r, char *out, size_t cap) {
    out[0] = 0;
    size_t len = 0;
    char *s = p->tok ? os_infer_text(p->tok, r->text, r->ntext, 1, &len) : NULL;
    if (!s) return;
    size_t b = len > TAIL ? len - TAIL : 0;
    while (b < len && ((unsigned char)s[b] & 0xC0) == 0x80) b++;
    size_t n = 0;
    for (size_t i = b; i < len && n + 1 < cap; i++) out[n++] = (char)(s[i] == '\n' || s[i] == '\r' || s[i] == '\t' ? ' ' : s[i]);
    out[n] = 0;
    os_free(s);
}

void os_infer_progress_step(void *ctx, const os_gen_result *r) {
    os_infer_progress *p = ctx;
    double now = os_now(), sec = now - p->t0, rate = sec > 0 ? (double)r->steps / sec : 0.0;
    if (p->live && now - p->shown < (p->tty ? 0.1 : 5.0)) return;
    if (!p->tty && sec < 5.0) return;   // a log gets a line every 5 s (none for a short answer)
    p->shown = now, p->live = 1;
    if (!p->tty) {
        fprintf(stderr, "omnishard infer: %lld/%lld tokens, %.1f tokens/s, %lld text tokens\n", (long long)r->steps,
                (long long)p->max, rate, (long long)r->ntext);
        return;
    }
    char bar[BAR + 1], tail[4 * TAIL];
    int64_t fill = p->max > 0 ? r->steps * BAR / p->max : 0;
    for (int i = 0; i < BAR; i++) bar[i] = i < fill ? '#' : '.';
    bar[BAR] = 0;
    text_tail(p, r, tail, sizeof tail);
    fprintf(stderr, "\r\033[Komnishard infer: [%s] %lld/%lld tokens, %.1f tokens/s: %s", bar, (long long)r->steps,
            (long long)p->max, rate, tail);
    fflush(stderr);
}

void os_infer_progress_end(os_infer_progress *p, const os_gen_result *r, int text_only) {
    if (p->tty && p->live) fprintf(stderr, "\r\033[K");
    double sec = os_now() - p->t0;
    int why = os_infer_stop_reason(r, text_only);
    static const char *const SAYS[3] = {"the text and the audio ended", "the text and the audio ended",
                                        "the limit was reached before the answer ended"};
    fprintf(stderr, "omnishard infer: stop: %s (%s; %lld of at most %lld tokens, %.1f tokens/s)\n", OS_INFER_STOPS[why],
            text_only && why < 2 ? "the text ended" : SAYS[why], (long long)r->steps, (long long)p->max,
            sec > 0 ? (double)r->steps / sec : 0.0);
}
