// The pre-tokenizer regex of tokenizer.json is written for Oniguruma (Hugging Face tokenizers); this rewrites it
// for PCRE2 so that both classify characters alike:
//  - \s / \S become \p{White_Space} / \P{White_Space} (Oniguruma's \s is White_Space; PCRE2's also has U+180E);
//  - General_Category properties (\p{L}, \p{N}, \p{Lu}, \P{L}, \p{^L}, \p{Letter}, ...) become explicit
//    code point ranges from src/tokenizer/gc_table.c (Unicode 16, as HF's Oniguruma), not PCRE2's own tables (Unicode
//    14 in Debian 12's PCRE2 10.42, which does not know e.g. CJK Ext. H/I, Kawi or U+A7CB).
// Other escapes and properties (scripts, \w, \d, ...) are passed to PCRE2 as they are.
// Explicit ranges make PCRE2 2-4x slower; so when PCRE2's tables have the version gc_table.c starts from (Debian 12),
// the properties are kept and the regex runs on a copy of the text whose code points with a changed category are
// replaced by stand-ins of their current category instead (with_stand_ins in tok_encode.c).
#include "core/alloc.h"
#include "tokenizer/cp_range.h"
#include "tokenizer/growbuf.h"
#include "tokenizer/gc_table.h"
#include "tokenizer/tok_internal.h"
#include <ctype.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define MAX_CP 0x10FFFFu

typedef struct {
    os_growbuf g;
    size_t n;   // bytes used, NUL not counted
} strbuf;

static void put(strbuf *b, const char *s, size_t n) {
    char *p = os_gb_reserve(&b->g, b->n + n + 1, b->n, "regex");
    memcpy(p + b->n, s, n);
    b->n += n;
    p[b->n] = 0;
}

static void put_cp(strbuf *b, uint32_t c) {
    char s[16];
    put(b, s, (size_t)snprintf(s, sizeof s, "\\x{%X}", c));
}

// one range [lo, hi] as class items, leaving out the surrogates (PCRE2 rejects them in UTF mode)
static void put_range(strbuf *b, uint32_t lo, uint32_t hi) {
    if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800) put_range(b, lo, 0xD7FF);
        if (hi > 0xDFFF) put_range(b, 0xE000, hi);
        return;
    }
    put_cp(b, lo);
    if (hi > lo) {
        put(b, "-", 1);
        put_cp(b, hi);
    }
}

// the class items (without brackets) of every code point whose category is in mask (bit i = os_gc_names[i]),
// or, negated, of every code point whose category is not
static void put_categories(strbuf *b, uint32_t mask, int negate) {
    uint32_t lo = 0;
    int in = 0;
    for (int r = 0; r <= os_gc_runs_n; r++) {
        uint32_t first = r < os_gc_runs_n ? os_gc_runs[r].first : MAX_CP + 1;
        int want = r < os_gc_runs_n && ((mask >> os_gc_runs[r].cat & 1) != (uint32_t)negate);
        if (want == in) continue;
        if (want) lo = first;
        else put_range(b, lo, first - 1);
        in = want;
    }
}

// the category mask of a property name as Oniguruma reads it (case, spaces, '_' and '-' ignored): a one- or
// two-letter category ("L", "Lu", "LC") or its long name ("Letter", "Uppercase_Letter", ...); 0 for any other
// property (left to PCRE2), and for Cs alone (no code point of UTF-8 text). short_name (if not NULL, 3 bytes) gets
// the name as PCRE2 10.42 knows it ("L", "Lu", "L&").
static uint32_t category_mask(const char *name, size_t n, char *short_name) {
    static const char *const long_names[][2] = {
        {"letter", "l"}, {"casedletter", "lc"}, {"uppercaseletter", "lu"}, {"lowercaseletter", "ll"},
        {"titlecaseletter", "lt"}, {"modifierletter", "lm"}, {"otherletter", "lo"}, {"mark", "m"},
        {"nonspacingmark", "mn"}, {"spacingmark", "mc"}, {"enclosingmark", "me"}, {"number", "n"},
        {"decimalnumber", "nd"}, {"letternumber", "nl"}, {"othernumber", "no"}, {"punctuation", "p"},
        {"connectorpunctuation", "pc"}, {"dashpunctuation", "pd"}, {"openpunctuation", "ps"},
        {"closepunctuation", "pe"}, {"initialpunctuation", "pi"}, {"finalpunctuation", "pf"},
        {"otherpunctuation", "po"}, {"symbol", "s"}, {"mathsymbol", "sm"}, {"currencysymbol", "sc"},
        {"modifiersymbol", "sk"}, {"othersymbol", "so"}, {"separator", "z"}, {"spaceseparator", "zs"},
        {"lineseparator", "zl"}, {"paragraphseparator", "zp"}, {"other", "c"}, {"control", "cc"},
        {"format", "cf"}, {"surrogate", "cs"}, {"privateuse", "co"}, {"unassigned", "cn"}};
    char s[32];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (name[i] == ' ' || name[i] == '_' || name[i] == '-') continue;
        if (m + 1 == sizeof s) return 0;
        s[m++] = (char)tolower((unsigned char)name[i]);
    }
    s[m] = 0;
    for (size_t g = 0; g < sizeof long_names / sizeof long_names[0]; g++)
        if (!strcmp(s, long_names[g][0])) strcpy(s, long_names[g][1]);
    m = strlen(s);
    if (m == 0 || m > 2 || !strcmp(s, "cs")) return 0;
    if (short_name) {
        short_name[0] = (char)toupper((unsigned char)s[0]);
        short_name[1] = strcmp(s, "lc") ? s[1] : '&';
        short_name[2] = 0;
    }
    if (!strcmp(s, "lc"))
        return category_mask("Lu", 2, NULL) | category_mask("Ll", 2, NULL) | category_mask("Lt", 2, NULL);
    uint32_t mask = 0;
    for (int i = 0; i < OS_GC_COUNT; i++)
        if (tolower((unsigned char)os_gc_names[i][0]) == s[0] &&
            (m == 1 || tolower((unsigned char)os_gc_names[i][1]) == s[1]))
            mask |= 1u << i;
    return mask;
}

// At p (just after a backslash, at 'p' or 'P' and '{'): a General_Category property? Sets *mask, *negate, the
// short name and returns the length of the escape after the backslash, or 0 for anything else.
static size_t parse_property(const char *p, uint32_t *mask, int *negate, char *short_name) {
    *negate = p[0] == 'P';
    const char *name = p + 2, *end = strchr(name, '}');
    if (!end) return 0;
    if (*name == '^') {
        *negate = !*negate;
        name++;
    }
    *mask = category_mask(name, (size_t)(end - name), short_name);
    return *mask ? (size_t)(end + 1 - p) : 0;
}

// Stand-ins are safe when PCRE2 classifies by the base version and the pattern names no character that could be a
// changed one or a stand-in: ASCII only, no code point escapes (\x{..} \u \o{..} \N{..}) and no octal/back
// references. os_tok_force_ranges(1) (OMNISHARD_TOK_RANGES=1, tests) forces explicit ranges.
static int g_force_ranges;
void os_tok_force_ranges(int on) { g_force_ranges = on; }
static int stand_ins_ok(const char *p) {
    char v[64];
    if (g_force_ranges || pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, v) < 0 ||
        strcmp(v, os_gc_base_version))
        return 0;
    for (; *p; p++) {
        if ((unsigned char)*p >= 0x80) return 0;
        if (*p == '\\' && p[1] && (strchr("xuoN", p[1]) || isdigit((unsigned char)p[1]))) return 0;
        if (*p == '\\' && p[1]) p++;
    }
    return 1;
}

char *os_tok_regex_to_pcre2(const char *p, int *stand_ins) {
    *stand_ins = stand_ins_ok(p);
    strbuf b = {0};
    put(&b, "", 0);
    size_t n = strlen(p);
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '[' && !in_class) {   // a class starts; a ']' right after '[' or '[^' is literal
            in_class = 1;
            size_t j = i + 1 + (p[i + 1] == '^');
            j += p[j] == ']';
            put(&b, p + i, j - i);
            i = j - 1;
            continue;
        }
        if (in_class && p[i] == '[' && p[i + 1] == ':') {   // [:alpha:] inside a class
            const char *end = strstr(p + i, ":]");
            size_t len = end ? (size_t)(end - (p + i)) + 2 : n - i;
            put(&b, p + i, len);
            i += len - 1;
            continue;
        }
        if (in_class && p[i] == ']') in_class = 0;
        if (p[i] != '\\' || i + 1 == n) {
            put(&b, p + i, 1);
            continue;
        }
        char e = p[++i];
        uint32_t mask;
        int negate;
        char name[3];
        size_t len;
        if (e == 's' || e == 'S') {
            put(&b, e == 's' ? "\\p{White_Space}" : "\\P{White_Space}", 15);
        } else if ((e == 'p' || e == 'P') && p[i + 1] != '{') {   // Oniguruma: \pL is "pL", not a property
            put(&b, &e, 1);
        } else if ((e == 'p' || e == 'P') && (len = parse_property(p + i, &mask, &negate, name))) {
            if (*stand_ins) {   // PCRE2's own table, by the short name
                char prop[16];
                put(&b, prop, (size_t)snprintf(prop, sizeof prop, "\\%c{%s}", negate ? 'P' : 'p', name));
            } else {
                if (!in_class) put(&b, negate ? "[^" : "[", negate ? 2 : 1);
                put_categories(&b, mask, in_class && negate);
                if (!in_class) put(&b, "]", 1);
            }
            i += len - 1;
        } else if (e == 'Q') {   // \Q...\E is literal
            const char *end = strstr(p + i, "\\E");
            len = end ? (size_t)(end - (p + i - 1)) + 2 : n - (i - 1);
            put(&b, p + i - 1, len);
            i = i - 1 + len - 1;
        } else {
            char esc[2] = {'\\', e};
            put(&b, esc, 2);
        }
    }
    return b.g.p;
}

uint32_t os_tok_stand_in_search(uint32_t c) {
    int i = os_cp_range_find(os_gc_changed, os_gc_changed_n, sizeof *os_gc_changed, c);
    return i < 0 ? 0 : os_gc_changed[i].stand_in;
}
