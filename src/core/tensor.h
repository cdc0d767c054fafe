// A typed tensor view (docs/design.md "Tensor views and the matmul member"): where a tensor's elements are
// (data), what they are (dtype: fp32, or bf16 bits), its shape and the step between neighbours along each dimension
// (strides, in elements). A view owns nothing: it names memory someone else allocated (on the backend's memory
// when it is given to the device seam, kernels/ops.h). Views are small values, passed and returned by value.
// The seam's matmul reads 2-D views: a row-major matrix has stride[1] == 1, its transpose (os_tensor_t) the same
// memory with the two dimensions swapped, stride[0] == 1.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef enum {
    OS_F32 = 0,    // IEEE float32
    OS_BF16 = 1,   // bfloat16: the upper 16 bits of a float32 (round to nearest even, core of k_bf16_round)
} os_dtype;

enum { OS_TENSOR_MAXDIM = 4 };

typedef struct {
    void *data;                          // element [0, .., 0]; NULL: no tensor (an option not taken)
    os_dtype dtype;
    int ndim;
    int64_t shape[OS_TENSOR_MAXDIM];     // [0, ndim)
    int64_t stride[OS_TENSOR_MAXDIM];    // elements between neighbours along each dimension
} os_tensor;

static inline int64_t os_dtype_bytes(os_dtype t) { return t == OS_BF16 ? 2 : 4; }

// no tensor (data NULL): an option not taken
static inline os_tensor os_tensor_none(void) {
    os_tensor v = {NULL, OS_F32, 0, {0, 0, 0, 0}, {0, 0, 0, 0}};
    return v;
}

// the row-major matrix [rows, cols] at data, ld elements from one row to the next (ld >= cols). A view of input
// memory takes a const pointer: the seam never writes a view it reads.
static inline os_tensor os_mat(const void *data, os_dtype t, int64_t rows, int64_t cols, int64_t ld) {
    os_tensor v = {(void *)data, t, 2, {rows, cols, 0, 0}, {ld, 1, 0, 0}};
    return v;
}

// an fp32 matrix (os_mat's shorthand; NULL data gives no tensor) and an fp32 vector [n]
static inline os_tensor os_matf(const float *data, int64_t rows, int64_t cols, int64_t ld) {
    return data ? os_mat(data, OS_F32, rows, cols, ld) : os_tensor_none();
}
static inline os_tensor os_vecf(const float *data, int64_t n) {
    os_tensor v = {(void *)data, OS_F32, 1, {n, 0, 0, 0}, {1, 0, 0, 0}};
    return data ? v : os_tensor_none();
}

// a vector [n] of dtype t
static inline os_tensor os_vec(const void *data, os_dtype t, int64_t n) {
    os_tensor v = {(void *)data, t, 1, {n, 0, 0, 0}, {1, 0, 0, 0}};
    return v;
}

// element i of v's memory (i counted in v's elements, from v.data): a view starts there
static inline void *os_tensor_at(os_tensor v, int64_t i) { return (char *)v.data + i * os_dtype_bytes(v.dtype); }

// rows [r0, r0 + n) of a matrix view (its first dimension), the same memory
static inline os_tensor os_tensor_rows(os_tensor v, int64_t r0, int64_t n) {
    v.data = os_tensor_at(v, r0 * v.stride[0]);
    v.shape[0] = n;
    return v;
}

// columns [c0, c0 + n) of a matrix view (its second dimension), the same memory
static inline os_tensor os_tensor_cols(os_tensor v, int64_t c0, int64_t n) {
    v.data = os_tensor_at(v, c0 * v.stride[1]);
    v.shape[1] = n;
    return v;
}

// the same memory with its last two dimensions swapped (a matrix's transpose); no copy
static inline os_tensor os_tensor_t(os_tensor v) {
    int i = v.ndim - 2;
    if (i < 0) return v;
    int64_t s = v.shape[i], d = v.stride[i];
    v.shape[i] = v.shape[i + 1], v.stride[i] = v.stride[i + 1];
    v.shape[i + 1] = s, v.stride[i + 1] = d;
    return v;
}

// How a 2-D view [rows, cols] lies in memory as a BLAS operand: *trans 0, the stored matrix [rows, cols] of row
// stride *ld (stride[1] == 1: row by row), or *trans 1, the stored matrix [cols, rows] of row stride *ld
// (stride[0] == 1: the transpose of a row-major matrix, os_tensor_t). Where both strides are 1 (a single row or
// column) the view is read as the transpose os_tensor_t made it from (a [1, n] view: of a column [n, 1]); a single
// row or column takes the smallest valid stride where it never steps it (BLAS checks ld >= the stored columns).
// 0, or -1 when no dimension is contiguous (a view the products cannot read).
static inline int os_mat_layout(const os_tensor *v, int *trans, int64_t *ld) {
    if (v->ndim != 2) return -1;
    int64_t r = v->shape[0], c = v->shape[1], s0 = v->stride[0], s1 = v->stride[1];
    int t;
    if (s1 == 1 && s0 != 1) t = 0;
    else if (s0 == 1 && s1 != 1) t = 1;
    else if (s0 == 1) t = r == 1 && c != 1;   // both 1: [1, n] the transpose of a column, [n, 1] a column
    else if (c == 1 || r == 1) t = c != 1;    // neither 1: a column [n, 1] row by row, a row [1, n] as a transpose
    else return -1;
    int64_t n = t ? r : c, step = t ? s1 : s0, lines = t ? c : r;   // the stored matrix: lines of n, step apart
    *trans = t, *ld = lines == 1 && step < n ? n : step;
    return *ld >= n || lines == 1 ? 0 : -1;
}
