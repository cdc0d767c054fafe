// Unicode General_Category data for the pre-tokenizer regex, generated into gc_table.c by tools/gen_gc_table.py
// (see there for what each table holds).
#pragma once
#include <stdint.h>

#define OS_GC_COUNT 30
typedef struct { uint32_t first; uint8_t cat; } os_gc_run;   // category cat from first up to the next run
typedef struct { uint32_t first, last, stand_in; } os_gc_stand_in;

extern const char os_gc_unicode_version[];   // the version of the categories (Hugging Face's Oniguruma)
extern const char os_gc_base_version[];      // the version os_gc_changed starts from (Debian 12's PCRE2)
extern const char os_gc_names[OS_GC_COUNT][3];   // "Cn", "Lu", ...: two-letter category names, by index
extern const os_gc_run os_gc_runs[];             // sorted by first; os_gc_runs[0].first == 0
extern const int os_gc_runs_n;
// bit b of byte b/8: block b (code points b*256 .. b*256+255) holds a code point of os_gc_changed
extern const uint8_t os_gc_changed_blocks[0x110000 >> 11];
extern const os_gc_stand_in os_gc_changed[];   // sorted, disjoint: categories that differ from the base version
extern const int os_gc_changed_n;
