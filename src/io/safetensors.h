// safetensors files: mmap reader with full header validation, model directories (single file or sharded
// index), and a streaming, atomic F32 writer. Format: 8-byte little-endian header length N, N bytes of JSON
// header, then the data section; see docs/model-directory.md for every rule enforced.
#pragma once
#include <stdint.h>

// dtypes accepted by the reader (names as in the header: "F32", "F16", ...)
enum { OS_DT_F32, OS_DT_F16, OS_DT_BF16, OS_DT_F64, OS_DT_I32, OS_DT_I64, OS_DT_I8, OS_DT_U8, OS_DT_BOOL, OS_DT_COUNT };
const char *os_st_dtype_name(int dtype);   // "F32", ... ; "?" when out of range
int os_st_dtype_size(int dtype);           // bytes per element; 0 when out of range

#define OS_ST_MAX_NDIM 8
typedef struct {
    const char *name;   // tensor name (owned by the file / directory)
    int dtype;          // OS_DT_*
    int ndim;           // 0..8 (0: a scalar, numel 1)
    int64_t shape[OS_ST_MAX_NDIM];
    int64_t numel;      // product of shape
    const void *data;   // into the read-only mapping; numel * os_st_dtype_size(dtype) bytes (may be unaligned)
} os_st_tensor;

// ---- one file ----
typedef struct os_st_file os_st_file;
os_st_file *os_st_open(const char *path);   // NULL + os_errf on any error (message names path, tensor, field)
void os_st_close(os_st_file *f);            // NULL is fine
const char *os_st_path(const os_st_file *f);
int os_st_count(const os_st_file *f);
const os_st_tensor *os_st_at(const os_st_file *f, int i);   // 0 <= i < count, in file (data offset) order
const os_st_tensor *os_st_find(const os_st_file *f, const char *name);   // NULL if absent (no error set)
const char *os_st_metadata(const os_st_file *f, const char *key);     // __metadata__[key] or NULL
// Drop the file's pages from this process's resident set (a mapped page read once stays counted in its RSS).
// Tensors stay readable: a later read faults the pages in again from the page cache.
void os_st_release_pages(os_st_file *f);

// Convert elements [start, start+n) (flat row-major index) to fp32. F32/F16/BF16/F64 only.
// Returns 0, or -1 + message for other dtypes or an out-of-range request.
int os_st_read_f32(const os_st_tensor *t, int64_t start, int64_t n, float *dst);
// Same for integer dtypes (I32/I64/I8/U8/BOOL) to int64.
int os_st_read_i64(const os_st_tensor *t, int64_t start, int64_t n, int64_t *dst);

// ---- model directory: DIR/model.safetensors or DIR/model.safetensors.index.json + shards ----
typedef struct os_st_dir os_st_dir;
// Opens the index (preferred when present) and every shard it names, checking that each weight_map entry
// exists in its shard; else model.safetensors. Error when neither exists or a tensor name occurs twice.
os_st_dir *os_st_dir_open(const char *dir);
// Add another safetensors file (e.g. SLAM-Omni tensors); error if it redefines a name already present.
int os_st_dir_add_file(os_st_dir *d, const char *path);
const os_st_tensor *os_st_dir_find(const os_st_dir *d, const char *name);   // NULL if absent, no error
int os_st_dir_count(const os_st_dir *d);
const os_st_tensor *os_st_dir_at(const os_st_dir *d, int i);   // files in open order, tensors in file order
void os_st_dir_release_pages(os_st_dir *d);   // os_st_release_pages on every file; NULL is fine
void os_st_dir_close(os_st_dir *d);   // NULL is fine

// ---- streaming writer (F32; BF16/F16 with os_st_writer_begin_as): writes path.tmp.<pid>, renamed to path by finish ----
typedef struct os_st_writer os_st_writer;
// Declares ntensors F32 tensors (written in this order, consecutive). shapes[i][0..ndims[i]) are used.
// meta_kv: NULL or "key","value",...,NULL for __metadata__. Returns NULL + message on error.
os_st_writer *os_st_writer_begin(const char *path, int ntensors, const char *const *names, const int *ndims,
                                 const int64_t (*shapes)[8], const char *const *meta_kv);
// Append the next n floats of the data section (may span tensor boundaries). -1 + message on error or
// when more than the declared total is put (the writer then stays failed; call abort).
int os_st_writer_put(os_st_writer *w, const float *data, int64_t n);
// The same for tensors of dtype OS_DT_F32, OS_DT_BF16 or OS_DT_F16 (any other: NULL + message): the floats put are
// stored rounded to nearest even, as torch's .to(torch.bfloat16 / torch.float16) (NaN stays NaN, infinities stay);
// a finite value that float16 cannot hold (|x| >= 65520) fails the put with a message naming its tensor.
os_st_writer *os_st_writer_begin_as(const char *path, int dtype, int ntensors, const char *const *names,
                                    const int *ndims, const int64_t (*shapes)[8], const char *const *meta_kv);
// Check the total, fsync, rename to path, fsync the directory, free w. On error the temp file is removed,
// w is freed, and -1 is returned.
int os_st_writer_finish(os_st_writer *w);
void os_st_writer_abort(os_st_writer *w);   // remove the temp file and free w; NULL is fine
// The whole file at once: begin, put data[i] (the numel of shapes[i] floats) for each tensor, finish; on error
// nothing is left at path (temp file removed). 0, or -1 + message.
int os_st_write_f32(const char *path, int ntensors, const char *const *names, const int *ndims,
                    const int64_t (*shapes)[8], const float *const *data, const char *const *meta_kv);
