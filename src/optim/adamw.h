// AdamW with PyTorch's semantics (torch.optim.AdamW, foreach=False), on a flat range of n elements.
// g is multiplied by gscale first (gradient clipping), and set to 0 in the same pass (the gradient is consumed: one
// memory pass instead of AdamW and then a separate zeroing). step is the 1-based step count.
//   p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#pragma once
#include <stdint.h>
void os_adamw(float *p, float *g, float *m, float *v, int64_t n, float lr, float b1, float b2, float eps,
              float wd, float gscale, int64_t step);
