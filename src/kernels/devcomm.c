// The device transport in use (kernels/devcomm.h): none until a backend brings one.
#include "kernels/devcomm.h"
#include <stddef.h>

const os_devcomm *os_dc = NULL;
void (*os_dc_host_wait)(int (*ready)(void *arg), void *arg) = NULL;
