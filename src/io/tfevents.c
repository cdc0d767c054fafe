// TensorBoard event files (io/tfevents.h): record framing with masked CRC32C, Event protos encoded by hand.
#include "io/tfevents.h"
#include "core/err.h"
#include "core/rng.h"
#include "io/atomic.h"
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint32_t os_crc32c(const void *data, size_t n) {
    static uint32_t table[256];
    static int ready;
    if (!ready) {   // reflected polynomial 0x82f63b78 (Castagnoli)
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static uint32_t masked(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

// ---- protobuf wire format: the few encodings an Event needs ----
typedef struct {
    unsigned char b[1024];
    size_t n;
    int over;   // did not fit: the event is refused (a tag of ~1000 bytes)
} buf;

static void put(buf *o, const void *p, size_t n) {
    if (o->n + n > sizeof o->b) {
        o->over = 1;
        return;
    }
    memcpy(o->b + o->n, p, n), o->n += n;
}

static void varint(buf *o, uint64_t v) {
    unsigned char t[10];
    size_t k = 0;
    do t[k++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)), v >>= 7;
    while (v);
    put(o, t, k);
}

static void le(buf *o, uint64_t v, int bytes) {
    unsigned char t[8];
    for (int i = 0; i < bytes; i++) t[i] = (unsigned char)(v >> (8 * i));
    put(o, t, (size_t)bytes);
}

static void key(buf *o, int field, int wire) { varint(o, (uint64_t)(field << 3 | wire)); }

static void bytes_field(buf *o, int field, const void *p, size_t n) {
    key(o, field, 2), varint(o, n), put(o, p, n);
}

// Event{wall_time, step} and then either file_version or a one-value summary
static void event(buf *o, double wall_time, int64_t step) {
    uint64_t w;
    memcpy(&w, &wall_time, 8);
    key(o, 1, 1), le(o, w, 8);
    key(o, 2, 0), varint(o, (uint64_t)step);
}

static int record(os_tfevents *w, const buf *e) {
    if (w->failed) return -1;
    unsigned char head[12];
    uint64_t n = e->n;
    for (int i = 0; i < 8; i++) head[i] = (unsigned char)(n >> (8 * i));
    uint32_t hc = masked(os_crc32c(head, 8)), dc = masked(os_crc32c(e->b, e->n));
    for (int i = 0; i < 4; i++) head[8 + i] = (unsigned char)(hc >> (8 * i));
    unsigned char tail[4];
    for (int i = 0; i < 4; i++) tail[i] = (unsigned char)(dc >> (8 * i));
    if (fwrite(head, 1, 12, w->f) != 12 || fwrite(e->b, 1, e->n, w->f) != e->n || fwrite(tail, 1, 4, w->f) != 4 ||
        fflush(w->f) != 0) {
        w->failed = 1;
        return os_errf("%s: write failed: %s", w->path, strerror(errno));
    }
    w->sum = os_fnv1a(os_fnv1a(os_fnv1a(w->sum, head, 12), e->b, e->n), tail, 4), w->bytes += 16 + (int64_t)e->n;
    return 0;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int os_tfevents_open(os_tfevents *w, const char *dir) {
    static int uid;   // several writers of one process get distinct names (as SummaryWriter's global uid)
    memset(w, 0, sizeof *w);
    if (os_mkdir_p(dir) < 0) return os_err_ctx("--logging_dir %s", dir);
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    double t = now();
    w->sum = OS_FNV_BASIS;
    snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s.%d.%d", dir, (long long)t, host, (int)getpid(), uid++);
    if (!(w->f = fopen(w->path, "wbx"))) return os_errf("%s: cannot create the TensorBoard event file: %s", w->path, strerror(errno));
    buf e = {.n = 0};
    event(&e, t, 0);
    bytes_field(&e, 3, "brain.Event:2", 13);
    return record(w, &e);
}

int os_tfevents_scalar(os_tfevents *w, int64_t step, double wall_time, const char *tag, double value) {
    buf v = {.n = 0}, s = {.n = 0}, e = {.n = 0};
    float f = (float)value;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    bytes_field(&v, 1, tag, strlen(tag));
    key(&v, 2, 5), le(&v, bits, 4);
    bytes_field(&s, 1, v.b, v.n);
    event(&e, wall_time, step);
    bytes_field(&e, 5, s.b, s.n);
    if (v.over || s.over || e.over) return os_errf("%s: TensorBoard tag too long ('%.60s...')", w->path, tag);
    return record(w, &e);
}

int os_tfevents_session_start(os_tfevents *w, int64_t step) {
    buf s = {.n = 0}, e = {.n = 0};
    key(&s, 1, 0), varint(&s, 1);   // SessionLog.status = START
    event(&e, now(), step);
    bytes_field(&e, 7, s.b, s.n);
    return record(w, &e);
}

int os_tfevents_close(os_tfevents *w) {
    if (!w->f) return 0;
    int rc = w->failed ? -1 : 0;
    if (rc == 0 && (fflush(w->f) != 0 || fsync(fileno(w->f)) != 0))
        rc = os_errf("%s: flush failed: %s", w->path, strerror(errno));
    if (fclose(w->f) != 0 && rc == 0) rc = os_errf("%s: close failed: %s", w->path, strerror(errno));
    w->f = NULL;
    return rc;
}
