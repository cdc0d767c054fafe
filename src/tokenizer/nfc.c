#include "tokenizer/nfc.h"
#include "tokenizer/cp_range.h"
#include "tokenizer/nfc_table.h"
#include "tokenizer/utf8.h"

// Hangul syllables are composed/decomposed algorithmically (Unicode ch. 3.12)
enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7, L_COUNT = 19, V_COUNT = 21,
       T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

static int qc_maybe(uint32_t c) {
    return os_nfc_qc_stage2[os_nfc_qc_stage1[c >> 8]][(c & 0xFF) >> 3] >> (c & 7) & 1;
}

int os_nfc_quick_yes(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        if (qc_maybe(os_utf8_next(s, &i))) return 0;
    }
    return 1;
}

int os_nfc_ccc(uint32_t c) {
    if (c < 0x300) return 0;
    int i = os_cp_range_find(os_nfc_ccc_ranges, os_nfc_ccc_ranges_n, sizeof *os_nfc_ccc_ranges, c);
    return i < 0 ? 0 : os_nfc_ccc_ranges[i].ccc;
}

static const os_nfc_decomp *find_decomp(uint32_t c) {
    int lo = 0, hi = os_nfc_decomps_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (c < os_nfc_decomps[mid].cp) hi = mid - 1;
        else if (c > os_nfc_decomps[mid].cp) lo = mid + 1;
        else return &os_nfc_decomps[mid];
    }
    return NULL;
}

// primary composite of (a, b), or 0 when there is none
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    uint64_t key = (uint64_t)a << 32 | b;
    int lo = 0, hi = os_nfc_pairs_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        uint64_t k = (uint64_t)os_nfc_pairs[mid].first << 32 | os_nfc_pairs[mid].second;
        if (key < k) hi = mid - 1;
        else if (key > k) lo = mid + 1;
        else return os_nfc_pairs[mid].composite;
    }
    return 0;
}

size_t os_nfc(const char *str, size_t n, os_growbuf *out, os_growbuf *cps) {
    const unsigned char *s = (const unsigned char *)str;
    // 1. full canonical decomposition: at most 4 code points per input byte (decompositions of <= 4 characters)
    uint32_t *cp = os_gb_reserve(cps, 4 * n * sizeof(uint32_t) + 16, 0, "NFC code points");
    size_t m = 0, i = 0;
    while (i < n) {
        uint32_t c = os_utf8_next(s, &i);
        if (c >= S_BASE && c < S_BASE + S_COUNT) {
            uint32_t si = c - S_BASE;
            cp[m++] = L_BASE + si / N_COUNT;
            cp[m++] = V_BASE + si % N_COUNT / T_COUNT;
            if (si % T_COUNT) cp[m++] = T_BASE + si % T_COUNT;
            continue;
        }
        const os_nfc_decomp *d = c >= 0xC0 ? find_decomp(c) : NULL;
        if (!d) { cp[m++] = c; continue; }
        for (int k = 0; k < d->len; k++) cp[m++] = os_nfc_decomp_pool[d->off + k];
    }
    // 2. canonical ordering: stable sort of each run of non-starters by combining class
    for (size_t k = 1; k < m; k++) {
        int cc = os_nfc_ccc(cp[k]);
        if (!cc) continue;
        uint32_t c = cp[k];
        size_t j = k;
        while (j > 0 && os_nfc_ccc(cp[j - 1]) > cc) { cp[j] = cp[j - 1]; j--; }
        cp[j] = c;
    }
    // 3. canonical composition, in place: a character combines with the last starter unless blocked
    size_t w = 0, starter = (size_t)-1;
    int last_cc = -1;
    for (size_t k = 0; k < m; k++) {
        uint32_t c = cp[k];
        int cc = os_nfc_ccc(c);
        if (starter != (size_t)-1 && (w == starter + 1 || (last_cc != 0 && last_cc < cc))) {
            uint32_t comp = compose(cp[starter], c);
            if (comp) { cp[starter] = comp; continue; }
        }
        if (cc == 0) starter = w;
        last_cc = cc;
        cp[w++] = c;
    }
    // 4. back to UTF-8
    unsigned char *o = os_gb_reserve(out, 4 * w + 1, 0, "NFC text");
    size_t len = 0;
    for (size_t k = 0; k < w; k++) len += (size_t)os_utf8_put(o + len, cp[k]);
    return len;
}
