// CPU and BLAS set-up done once at program start, before any BLAS call.
// OpenBLAS 0.3.21 picks a slow sgemm kernel on AVX-512 CPUs it does not recognise (about 6x slower).
// os_cpu_setup() detects AVX-512 and, when OPENBLAS_CORETYPE is not set, sets it to SkylakeX and re-executes
// the program so that the library loads with the fast kernel. OMNISHARD_NO_BLAS_FIX=1 disables this.
#pragma once
void os_cpu_setup(int argc, char **argv);
const char *os_blas_coretype(void);   // the core type OpenBLAS reports it uses
int os_cpu_has_avx512(void);
int os_cpu_has_bf16(void);   // AVX512_BF16 or AMX-BF16 instructions usable (bf16 GEMMs)
