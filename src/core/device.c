// --device and --tf32 (core/device.h).
#include "core/device.h"
#include "core/err.h"
#include "core/numtext.h"
#include <string.h>

int os_device_parse(const char *v, int *index) {
    long long n;
    *index = -1;
    if (!strcmp(v, "cpu")) return OS_DEVICE_CPU;
    if (!strcmp(v, "cuda")) return OS_DEVICE_CUDA;
    if (!strncmp(v, "cuda:", 5) && os_parse_decimal_int(v + 5, 0, 1023, &n) == 0) {
        *index = (int)n;
        return OS_DEVICE_CUDA;
    }
    if (!strcmp(v, "guard") || !strcmp(v, "guard:lax")) {
        *index = v[5] == 0;
        return OS_DEVICE_GUARD;
    }
    return os_errf("--device: '%s' is not supported (supported: cpu, cuda or cuda:N), nor is it the test backend "
                   "(guard, guard:lax)", v);
}

int os_tf32_check(int tf32, const char *device, int bf16) {
    int index;
    if (!tf32) return 0;
    if (os_device_parse(device, &index) != OS_DEVICE_CUDA)
        return os_errf("--tf32 true: TF32 is the number format of a CUDA GPU's tensor cores; on --device %s the products "
                       "are exact fp32 (TF32 needs --device cuda)", device);
    if (bf16)
        return os_errf("--tf32 true with --torch_dtype bfloat16: every product runs on bf16 inputs already (TF32 "
                       "applies to fp32 products only; drop one of the two)");
    return 0;
}
