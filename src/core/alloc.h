// Aligned, zeroed allocation that stops with a message (bytes requested, what for) when memory runs out,
// and a process-wide count of live bytes used by the memory accounting.
#pragma once
#include <stddef.h>
#include <stdint.h>

void *os_alloc(size_t bytes, const char *what);   // 64-byte aligned, zero-filled; never returns NULL
void os_free(void *p);                             // NULL is fine
int64_t os_alloc_live_bytes(void);                 // bytes currently allocated through os_alloc
int64_t os_alloc_peak_bytes(void);
int64_t os_peak_rss_bytes(void);                   // VmHWM of this process
