// Unicode data for NFC normalisation, generated into nfc_table.c by tools/gen_nfc_table.py.
#pragma once
#include <stdint.h>

typedef struct { uint32_t first, last; uint8_t ccc; } os_nfc_ccc_range;   // canonical combining class != 0
typedef struct { uint32_t cp; uint16_t off, len; } os_nfc_decomp;          // full NFD of cp in the pool
typedef struct { uint32_t first, second, composite; } os_nfc_pair;         // primary composite

extern const char os_nfc_unicode_version[];
// quick check: bit set = the character may change under NFC or reorder/compose with its neighbours
extern const uint8_t os_nfc_qc_stage1[0x110000 >> 8];
extern const uint8_t os_nfc_qc_stage2[][32];
extern const os_nfc_ccc_range os_nfc_ccc_ranges[];   // sorted by first
extern const int os_nfc_ccc_ranges_n;
extern const uint32_t os_nfc_decomp_pool[];
extern const os_nfc_decomp os_nfc_decomps[];  // sorted by cp
extern const int os_nfc_decomps_n;
extern const os_nfc_pair os_nfc_pairs[];      // sorted by (first, second)
extern const int os_nfc_pairs_n;
