#include "core/cpu.h"
#include "core/knobs.h"
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *openblas_get_corename(void);

int os_cpu_has_avx512(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    if (!(f && dq && bw && vl)) return 0;
    // the OS must save the zmm state (XCR0 bits 5-7 and 1-2)
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xe6) == 0xe6;
}

int os_cpu_has_bf16(void) {
    unsigned a, b, c, d;
    if (!os_cpu_has_avx512() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int amx = (d >> 22) & 1;   // AMX-BF16 (oneDNN also asks the kernel for the tile state itself)
    if (a < 1 || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return amx;
    return amx || ((a >> 5) & 1);   // AVX512_BF16
}

void os_cpu_setup(int argc, char **argv) {
    (void)argc;
    if (getenv("OPENBLAS_CORETYPE") || os_knobs()->no_blas_fix) return;
    if (!os_cpu_has_avx512()) return;
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    // The library is already loaded with its first choice; only a fresh image picks up the variable.
    execv("/proc/self/exe", argv);
    // exec failed: carry on with the slow kernel
}

const char *os_blas_coretype(void) { return openblas_get_corename(); }
