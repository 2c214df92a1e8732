/* dsv4rt.h -- libdsv4rt, the dsv4c runtime: load a bundle that dsv4c wrote
 * and launch its kernels with typed, validated arguments.
 *
 * Handles are opaque.  Every call returns a dsv4rt_status (0 = success);
 * on failure dsv4rt_last_error(ctx) says why in one line.  The library
 * never prints and never exits.  Vendor libraries (libcuda.so.1,
 * libOpenCL.so.1) are opened with dlopen at context creation: a missing
 * one is DSV4RT_ERR_NO_BACKEND, not a crash.  A call that fails validation
 * launches nothing and writes nothing.  A context is not thread-safe:
 * use each context (and its bundles and buffers) from one thread at a
 * time; threads with contexts of their own may run at once, creating,
 * opening, launching and failing concurrently.
 */
#ifndef DSV4RT_H
#define DSV4RT_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSV4RT_API __attribute__((visibility("default")))

typedef enum dsv4rt_status {
  DSV4RT_OK = 0,
  DSV4RT_ERR_INVALID_ARG = 1,    /* a bad argument no finer code below names (an unknown backend, a bad entry
                                    number); the context, bundle and timer calls give it for null handles too */
  DSV4RT_ERR_NO_BACKEND = 2,     /* the vendor library or a device is missing */
  DSV4RT_ERR_BUNDLE_FORMAT = 3,  /* truncated, corrupted or inconsistent bundle */
  DSV4RT_ERR_BUNDLE_VERSION = 4, /* a bundle version this runtime does not read */
  DSV4RT_ERR_NO_KERNEL = 5,      /* the bundle has no kernel for this op and device (e.g. built for another target) */
  DSV4RT_ERR_BACKEND = 6,        /* the driver refused (load, launch, copy) */
  DSV4RT_ERR_OUT_OF_MEMORY = 7,
  DSV4RT_ERR_IO = 8,             /* a file could not be read */
  /* The buffer and op calls' refusals (each with a message naming the
   * function and the argument; nothing launched, nothing written): */
  DSV4RT_ERR_NULL_ARG = 9,          /* a NULL bundle, argument struct, required buffer or host pointer */
  DSV4RT_ERR_WRONG_CONTEXT = 10,    /* a buffer of another context */
  DSV4RT_ERR_BUFFER_TOO_SMALL = 11, /* a buffer smaller than the bytes the arguments address in it */
  DSV4RT_ERR_OUT_OF_RANGE = 12,     /* a count, length, size, offset or stride outside its range: negative,
                                       too large, or a stride below a row or one that makes output rows overlap */
  DSV4RT_ERR_MISALIGNED = 13,       /* a device address (CUDA, HIP: wrapped memory) or a stride off the alignment the
                                       kernel's loads and stores need */
  DSV4RT_ERR_ALIASING = 14,         /* an output sharing memory with another buffer argument (the same buffer,
                                       the same cl_mem, or overlapping CUDA address ranges) */
  DSV4RT_ERR_NOT_FINITE = 15,       /* a float argument that is NaN or infinite */
  DSV4RT_ERR_BAD_CONTENTS = 16,     /* check_contents: a length or index in device memory outside its contract */
  DSV4RT_ERR_STALE_TUNING = 17,     /* dsv4rt_bundle_load_tuning: entries measured on other code (another spec,
                                       toolchain or bundle), left out; the fresh ones are loaded */
  DSV4RT_STATUS_FORCE_32BIT = 0x7fffffff
} dsv4rt_status;

typedef enum dsv4rt_backend {
  DSV4RT_BACKEND_AUTO = 0, /* CUDA if a CUDA device is present, else HIP if an AMD one is, else OpenCL */
  DSV4RT_BACKEND_CUDA = 1,
  DSV4RT_BACKEND_OPENCL = 2,
  DSV4RT_BACKEND_HIP = 3, /* AMD GPUs through libamdhip64 (DSV4RT_HIP_LIBRARY names another) */
  DSV4RT_BACKEND_FORCE_32BIT = 0x7fffffff
} dsv4rt_backend;

typedef struct dsv4rt_context dsv4rt_context;
typedef struct dsv4rt_bundle dsv4rt_bundle;
typedef struct dsv4rt_buffer dsv4rt_buffer;

/* ---- context ---- */

/* Open device `device` (0-based) of the backend; *out is owned by the caller
 * and freed with dsv4rt_context_destroy.  On failure *out is NULL and the
 * message is in dsv4rt_last_error(NULL). */
DSV4RT_API dsv4rt_status dsv4rt_context_create(dsv4rt_backend backend, int device, dsv4rt_context **out);
/* Free the context; bundles and buffers made from it must be destroyed first. */
DSV4RT_API void dsv4rt_context_destroy(dsv4rt_context *ctx);
/* The last error message of ctx; when ctx is NULL, that of the calling
 * thread's last failed call that had no context to record it on (a context
 * creation, an op on a NULL bundle, a buffer call on a NULL buffer): one
 * message per thread, so a failed creation's message is the creating
 * thread's own.  Owned by the library, valid until the next call on ctx
 * (for NULL: the thread's next such call), and, for NULL, only in the
 * calling thread. */
DSV4RT_API const char *dsv4rt_last_error(const dsv4rt_context *ctx);
/* The backend in use and a device description, owned by ctx. */
DSV4RT_API dsv4rt_backend dsv4rt_context_backend(const dsv4rt_context *ctx);
DSV4RT_API const char *dsv4rt_device_name(const dsv4rt_context *ctx);
/* The backends' names, the tools' and the Python layer's one vocabulary:
 * "auto", "cuda", "opencl", "hip" ("?" for another value); and the
 * backend a name gives: DSV4RT_OK, or DSV4RT_ERR_INVALID_ARG for an
 * unknown name (*out untouched). */
DSV4RT_API const char *dsv4rt_backend_name(dsv4rt_backend be);
DSV4RT_API dsv4rt_status dsv4rt_backend_parse(const char *name, dsv4rt_backend *out);
/* Wait until all work queued on ctx has finished. */
DSV4RT_API dsv4rt_status dsv4rt_synchronize(dsv4rt_context *ctx);
/* The stream this context's work goes on (CUDA: a CUstream, e.g. a
 * framework's current stream, of the context's device and the primary
 * context; HIP: a hipStream_t of the context's device; 0, the default, is
 * the legacy default stream).  Every later
 * launch, dsv4rt_buffer_copy_async and timer event is queued on it, and
 * the blocking calls (dsv4rt_buffer_write / _read / _copy, and so the
 * check_contents reads) first wait for the work queued on it, so they
 * still come after the launches before them.  dsv4rt_synchronize waits
 * for the whole device.  Setting a stream queues nothing and does not wait.
 * OpenCL contexts have one in-order queue: only 0 is accepted there
 * (DSV4RT_ERR_INVALID_ARG otherwise). */
DSV4RT_API dsv4rt_status dsv4rt_set_stream(dsv4rt_context *ctx, uint64_t stream);
/* The stream set on ctx (0 when none or ctx is NULL). */
DSV4RT_API uint64_t dsv4rt_get_stream(const dsv4rt_context *ctx);
/* A short name for a status code; static storage. */
DSV4RT_API const char *dsv4rt_status_name(dsv4rt_status s);

/* ---- device memory ---- */

/* Allocate `size` bytes on the device; the caller owns *out. */
DSV4RT_API dsv4rt_status dsv4rt_buffer_create(dsv4rt_context *ctx, size_t size, dsv4rt_buffer **out);
/* Wrap memory the caller allocated (CUDA: a CUdeviceptr; HIP: a device pointer; OpenCL: a cl_mem)
 * of `size` bytes; dsv4rt_buffer_destroy frees the wrapper, not the memory. */
DSV4RT_API dsv4rt_status dsv4rt_buffer_wrap(dsv4rt_context *ctx, uint64_t native, size_t size, dsv4rt_buffer **out);
DSV4RT_API void dsv4rt_buffer_destroy(dsv4rt_buffer *buf);
DSV4RT_API size_t dsv4rt_buffer_size(const dsv4rt_buffer *buf);
/* The memory behind buf (CUDA: its CUdeviceptr; HIP: its device pointer; OpenCL: its cl_mem), still
 * owned by buf; 0 for NULL.  For interop, and for wrapping part of it. */
DSV4RT_API uint64_t dsv4rt_buffer_native(const dsv4rt_buffer *buf);
/* Copy host -> device / device -> host / device -> device (blocking). */
DSV4RT_API dsv4rt_status dsv4rt_buffer_write(dsv4rt_buffer *buf, size_t offset, const void *src, size_t n);
DSV4RT_API dsv4rt_status dsv4rt_buffer_read(dsv4rt_buffer *buf, size_t offset, void *dst, size_t n);
/* Copy the first n bytes of src to dst and wait; DSV4RT_ERR_ALIASING where
 * the two share memory (one buffer or handle, or overlapping wrapped CUDA
 * ranges), which neither backend copies defined. */
DSV4RT_API dsv4rt_status dsv4rt_buffer_copy(dsv4rt_buffer *dst, const dsv4rt_buffer *src, size_t n);
/* Queue a device-to-device copy without waiting (for benchmarks). */
DSV4RT_API dsv4rt_status dsv4rt_buffer_copy_async(dsv4rt_buffer *dst, const dsv4rt_buffer *src, size_t n);

/* ---- timing (device events; for benchmarks) ---- */

/* Mark the start of a timed region on ctx's queue. */
DSV4RT_API dsv4rt_status dsv4rt_timer_start(dsv4rt_context *ctx);
/* Mark its end, wait for it, and give the device time in milliseconds. */
DSV4RT_API dsv4rt_status dsv4rt_timer_stop(dsv4rt_context *ctx, double *ms);

/* ---- bundles ---- */

/* Read and check the bundle file at path (version, size, checksum, every
 * entry and choice record); the caller owns *out.  Kernels are loaded on
 * first launch.  path must name a regular file (a FIFO, device or
 * directory is DSV4RT_ERR_IO, refused without reading or waiting); its
 * header is read and checked first, then exactly the size it gives,
 * which must be the file's (bundles up to 1 GiB).  The code the OpenCL backend hands a driver is held to its
 * format first (SPIR-V: header and every instruction's length; the SPIR
 * 1.2 bitcode: the LLVM bitstream's blocks, abbreviations and records, and
 * sane bounds on the counts and indices an LLVM reader allocates by):
 * DSV4RT_ERR_BUNDLE_FORMAT naming the entry otherwise.  That is structure,
 * not meaning: a well-formed module can still make a driver's compiler
 * fail or kill the process (LLVM 15, PoCL 3.1's, crashes on some
 * metadata and instruction records that reference the wrong kind of
 * value), and PTX text is handed to the CUDA driver unchecked.  Open only
 * bundles from a source you trust, or open and launch untrusted ones in a
 * process of their own.
 * A tuned bundle's choice records (dsv4c --lock: bundle version 7) of
 * this device's GPU model are installed as its tuning choices (below);
 * those of other models are left out silently. */
DSV4RT_API dsv4rt_status dsv4rt_bundle_open(dsv4rt_context *ctx, const char *path, dsv4rt_bundle **out);
/* The same from memory; the bytes are copied. */
DSV4RT_API dsv4rt_status dsv4rt_bundle_open_memory(dsv4rt_context *ctx, const void *data, size_t size,
                                                   dsv4rt_bundle **out);
DSV4RT_API void dsv4rt_bundle_destroy(dsv4rt_bundle *b);
/* Number of entries and the name/op/target/arch of entry i (static strings
 * owned by the bundle); for listings. */
DSV4RT_API int dsv4rt_bundle_count(const dsv4rt_bundle *b);
DSV4RT_API dsv4rt_status dsv4rt_bundle_entry(const dsv4rt_bundle *b, int i, const char **name, const char **op,
                                             const char **target, const char **arch);

/* 1 if entry i is the first entry of its kernel name (a kernel has an entry
 * per target): for listing each kernel once; 0 otherwise or on bad input. */
DSV4RT_API int dsv4rt_bundle_entry_is_first(const dsv4rt_bundle *b, int i);

/* 1 if entry i's code runs on the bundle's device (target, arch and the
 * shared memory it needs); 0 otherwise or on bad input. */
DSV4RT_API int dsv4rt_bundle_entry_runs(const dsv4rt_bundle *b, int i);
/* 1 if some entry of the kernel named `name` runs on the bundle's device. */
DSV4RT_API int dsv4rt_bundle_kernel_runs(const dsv4rt_bundle *b, const char *name);

/* The cache layout entry i was compiled for (copied into *out). */
DSV4RT_API dsv4rt_status dsv4rt_bundle_entry_layout(const dsv4rt_bundle *b, int i, dsv4_layout *out);

/* Entry i's launch geometry and op parameters (from the bundle's manifest). */
typedef struct dsv4rt_kernel_info {
  int threads, tokens_per_cta, values_per_thread, tokens_per_thread;
  int rope_first, rope_dims; /* kv_insert: the RoPE range (dims 0: none) */
  int q_dim;                 /* kv_insert: head size of the q branch (0: none) */
  int quant_floor;           /* kv_insert: 0 amax floored at 1e-4 (vLLM), 1 amax/448 floored (FlashMLA tests) */
  int v_dim;                 /* sparse_decode: output dims */
  int heads;                 /* paged_mqa_logits: query heads */
  int topk;                  /* topk: K */
  int matrix;                /* 1 for the forms tile.matrix asks for (sparse_decode: split-KV capable;
                                paged_mqa_logits: a CTA every next_n row of a batch entry) */
  int form;                  /* the launch record's DSV4_FORM_* (dsv4_abi.h) */
  int cluster;               /* CTAs a cluster (2: CTA pairs) */
  int shared_bytes;          /* dynamic shared memory a launch takes */
} dsv4rt_kernel_info;
DSV4RT_API dsv4rt_status dsv4rt_bundle_entry_info(const dsv4rt_bundle *b, int i, dsv4rt_kernel_info *out);

/* ---- tuning (docs/tuning.md) ----
 *
 * dsv4c-tune measures the variants of a spec's sweeps on the shapes of a
 * workload and writes a lockfile: per GPU model and shape bucket, every
 * variant's times and correctness gate and the winner.  A bundle built
 * from it (dsv4c --lock) carries the winners as choice records, installed
 * on open for this GPU model; a bundle holding such choices (its own, or
 * a lockfile's loaded over them) runs, in an op call made without
 * opts->kernel, the winner of the call's shape bucket; a shape no entry
 * covers gets the default choice
 * (the first kernel of the op that runs here, the matrix form preferred).
 * The bucket of a call (common/bucket.h, dsv4_shape_bucket) rounds up to powers of
 * two: sparse_decode n_tokens, heads, topk and extra_topk (0 without an
 * extra cache), with extra_block_size exact; paged_mqa_logits batch and
 * row_len, with next_n exact; the other ops their main count (n, num_requests,
 * n_tokens, rows). */

/* Load the lockfile at path into b, over the bundle's own choice records
 * (a lockfile entry replaces the record of its bucket and kind; a lockfile
 * loaded earlier is replaced; NULL goes back to the records alone).  An
 * entry is used when it is for this device's GPU model
 * (the device name before " (") and its winner is a kernel of b, of the
 * entry's target, that runs here with the very code that was measured (the
 * SHA-256 of its code in b equals the lockfile's).  Entries of other GPU
 * models are left out silently.  Any other entry is stale (its winner is
 * missing or its code differs: b was built from another spec or
 * toolchain): it is never used, and the call returns
 * DSV4RT_ERR_STALE_TUNING naming it, with the fresh entries loaded all the
 * same.  DSV4RT_ERR_IO when the file cannot be read and
 * DSV4RT_ERR_BUNDLE_FORMAT when it is not a lockfile: nothing is loaded
 * then and the earlier choices stay. */
DSV4RT_API dsv4rt_status dsv4rt_bundle_load_tuning(dsv4rt_bundle *b, const char *path);
/* The same from the lockfile's text (len bytes). */
DSV4RT_API dsv4rt_status dsv4rt_bundle_load_tuning_text(dsv4rt_bundle *b, const char *text, size_t len);
/* The number of (op, bucket) choices b holds (0 for NULL). */
DSV4RT_API int dsv4rt_bundle_tuning_count(const dsv4rt_bundle *b);
/* The kernel tuning chooses for a call of op (its name, e.g. "sparse_decode")
 * with these dims (sparse_decode: n_tokens, heads, topk, extra_topk,
 * extra_block_size; paged_mqa_logits: batch, next_n, row_len; the other
 * ops: their main count): its name, owned by b, or NULL when no entry
 * covers the call's bucket (the default choice then applies). */
DSV4RT_API const char *dsv4rt_bundle_tuned_kernel(const dsv4rt_bundle *b, const char *op, const int64_t *dims,
                                                  int ndims);
/* Entry i's code hash as a tuning lockfile records it: the SHA-256 of the
 * code the entry holds, 64 lower-case hex digits and a NUL in hex. */
DSV4RT_API dsv4rt_status dsv4rt_bundle_entry_code_hash(const dsv4rt_bundle *b, int i, char hex[65]);

/* ---- operations (docs/ops.md section 2) ----
 *
 * What every op call checks on the host before it launches (the first
 * failure is returned; nothing is launched or written):
 *   NULL_ARG         bundle, args, and each buffer the kernel uses (optional ones are named so below);
 *   NO_KERNEL        no entry of the bundle for this op runs on the context's device (opts->kernel,
 *                    when given, names the kernel);
 *   OUT_OF_RANGE     every count, length, size and stride against its range (negative and huge
 *                    values alike; block_stride below the layout's block; a row stride below a row;
 *                    paged_gather's out strides as its comment says);
 *   WRONG_CONTEXT, BUFFER_TOO_SMALL (the bytes the arguments address, counted without overflow),
 *   MISALIGNED       (CUDA and HIP addresses of wrapped memory; block strides to the layout's alignment),
 *   ALIASING         an output overlapping any other buffer argument of the call, input or output
 *                    (inputs may share memory with each other); only the bytes the call addresses
 *                    count.  OpenCL sub-buffers of one cl_mem are not seen as overlapping;
 *   NOT_FINITE       softmax_scale, eps (kernels with a q branch; must also be >= 0) and tensor_scale
 *                    (per-tensor layouts).
 * Values in device memory (lengths, indices, slots, positions, tables) are
 * checked only with check_contents, below. */

/* Launch-time options shared by the ops. */
typedef struct dsv4rt_launch_opts {
  const char *kernel;     /* a kernel name in the bundle; NULL = a tuned bundle's (or lockfile's) winner for
                             the call's shape, else the default rule (rt.c rt_default_rank): of the kernels
                             for this op with the layout of the first that runs on this device, warpgroup,
                             then warp, then row warp-matrix, then portable; CTA pairs first at 128 heads or
                             more; the logits' batch forms only up to DSV4_LOGITS_MAX_NEXT_N; ties in bundle
                             order */
  int check_contents;     /* 1: also read every device-resident length and index a kernel uses back to the
                             host (a blocking read, after the work queued before) and refuse the first value
                             outside its contract with DSV4RT_ERR_BAD_CONTENTS, naming array and position:
                               dequant_gather    indices[i] >= num_blocks * block_size (any negative: a zero
                                                 row, docs/ops.md 2a);
                               paged_gather      seq_lens[r] < 0; gather_lens[r] outside [0, seq_lens[r]];
                                                 offset + g_r > out_rows; a gathered position whose block-table
                                                 column is >= max_blocks or whose block is outside
                                                 [0, num_blocks);
                               kv_insert         slot_mapping[n] >= num_blocks * block_size (negative: skipped,
                                                 docs/ops.md 5); positions[n] outside [0, max_pos) for every row the
                                                 kernel reads (all n_tokens with a q branch, else the inserted);
                               sparse_decode     lens[t] / extra_lens[t] outside [0, topk] (when topk > 0); an
                                                 entry j < lens[t] neither -1 nor a slot of its cache;
                               paged_mqa_logits  context_lens[r] outside [0, row_len] (docs/ops.md 4: the logits row
                                                 has row_len entries); a position k < ctx whose block-table
                                                 column is >= max_blocks or whose block is outside the cache;
                               topk              context_lens[r] outside [0, row_len].
                             0 (the default): none of these is read, and the kernels' guards keep every
                             such value from touching memory outside the buffers given, with these results:
                               dequant_gather    a slot past the cache: a zero row;
                               paged_gather      rows past out_rows, positions below 0 and block-table
                                                 columns >= max_blocks are not written; a block outside
                                                 the cache gives a zero row; negative lengths write nothing;
                               kv_insert         a slot past the cache or a position outside the cos/sin table:
                                                 the row is not inserted (the q branch then skips RoPE);
                               sparse_decode     lens clamped to [0, topk]; a bad index is skipped like -1;
                               paged_mqa_logits  context_lens clamped to [0, row_len]; positions without a
                                                 valid block get -inf;
                               topk              context_lens clamped to [0, row_len] (negative: a row of -1). */
  int splits;             /* sparse_decode, warp-matrix kernels: split each token's index lists over this many
                             CTAs (split-KV, then a combine kernel); topk: split each row over this many CTAs
                             (then a merge kernel; 1: whole rows); 0: chosen from the device's size; 1..64 */
  int no_tensor_maps;     /* paged_mqa_logits: 1 keeps the warpgroup form on its per-thread copies even where the
                             cache could be read by tensor map (TMA): an A/B switch for tests and measurements */
} dsv4rt_launch_opts;

/* out[i, :] = dequant(cache slot indices[i]); a negative index gives zeros. */
typedef struct dsv4rt_dequant_gather_args {
  dsv4rt_buffer *out;     /* [n, dim] bf16, 16-byte aligned */
  dsv4rt_buffer *cache;   /* num_blocks blocks of block_stride bytes */
  dsv4rt_buffer *indices; /* [n] int32 global slots */
  int64_t n;
  int64_t num_blocks, block_size, block_stride; /* block_stride in bytes */
  float tensor_scale;     /* kv_scale of a per-tensor layout (must be finite there); else unused */
} dsv4rt_dequant_gather_args;

/* Validate and launch (queued; returns before the kernel ends). */
DSV4RT_API dsv4rt_status dsv4rt_dequant_gather(dsv4rt_bundle *b, const dsv4rt_dequant_gather_args *a,
                                               const dsv4rt_launch_opts *opts);

/* For each request r and i < g_r (g_r = gather_lens[r], or seq_lens[r]
 * when gather_lens is NULL): out[r, offset + i, :] = dequant of position
 * seq_lens[r] - g_r + i through block_table; other rows untouched. */
typedef struct dsv4rt_paged_gather_args {
  dsv4rt_buffer *out;          /* bf16 [R, out_rows, dim] with the strides below */
  int64_t out_stride_r, out_stride_m; /* in elements, multiples of 8; out_stride_m >= dim, and with R > 1 and
                                         out_rows > 0 the requests' rows must not overlap: either
                                         out_stride_r >= (out_rows - 1) * out_stride_m + dim (requests one
                                         after another) or out_stride_r >= dim and out_stride_m >=
                                         (R - 1) * out_stride_r + dim (requests interleaved) */
  int64_t out_rows, offset;
  dsv4rt_buffer *cache;
  int64_t num_blocks, block_size, block_stride;
  dsv4rt_buffer *seq_lens;     /* [R] int32 */
  dsv4rt_buffer *gather_lens;  /* [R] int32, or NULL */
  dsv4rt_buffer *block_table;  /* [R, max_blocks] int32 */
  int64_t num_requests, max_blocks;
  float tensor_scale;          /* kv_scale of a per-tensor layout; else unused */
  int64_t block_table_stride;  /* elements from one request's row of block_table to the next (0: max_blocks;
                                  a column slice of a wider table passes its width) */
} dsv4rt_paged_gather_args;

DSV4RT_API dsv4rt_status dsv4rt_paged_gather(dsv4rt_bundle *b, const dsv4rt_paged_gather_args *a,
                                             const dsv4rt_launch_opts *opts);

/* ---- the cache writer (docs/ops.md section 5; DSv3.2 and indexer writers) ---- */

/* For each row n < min(n_insert, n_tokens) with slot_mapping[n] >= 0: RoPE
 * (kernels with rope) at positions[n], round to bf16, quantize as the
 * layout says and write the token into the cache at that slot.  Kernels
 * with a q branch also write q_out[n, h] = RoPE(RMSNorm(q[n, h])) for all
 * n < n_tokens, zeros for heads h >= heads. */
typedef struct dsv4rt_kv_insert_args {
  dsv4rt_buffer *cache;         /* num_blocks blocks of block_stride bytes */
  int64_t num_blocks, block_size, block_stride;
  dsv4rt_buffer *kv;            /* [n_tokens, dim] bf16 */
  int64_t n_tokens;
  dsv4rt_buffer *slot_mapping;  /* [n_insert] int64; rows past n_insert (DP padding) are skipped */
  int64_t n_insert;
  dsv4rt_buffer *positions;     /* [n_tokens] int64; kernels with rope */
  dsv4rt_buffer *cos_sin;       /* [max_pos, rope dims] f32: cos in the first half, sin in the second */
  int64_t max_pos;
  dsv4rt_buffer *q;             /* [n_tokens, heads, q_dim] bf16; kernels with a q branch */
  dsv4rt_buffer *q_out;         /* [n_tokens, padded_heads, q_dim] bf16 */
  int64_t heads, padded_heads;
  float eps;                    /* RMSNorm epsilon (1e-6 for DeepSeek-V4) */
} dsv4rt_kv_insert_args;

DSV4RT_API dsv4rt_status dsv4rt_kv_insert(dsv4rt_bundle *b, const dsv4rt_kv_insert_args *a,
                                          const dsv4rt_launch_opts *opts);

/* ---- sparse MLA decode (docs/ops.md section 3) ---- */

/* For token t and head h: one softmax over the valid entries of both index
 * lists (position j < min(lens[t], topk), value != -1), the sink only in
 * the denominator.  out = 0 and lse = +inf when no entry is valid. */
typedef struct dsv4rt_sparse_decode_args {
  dsv4rt_buffer *out;           /* [n_tokens, heads, v_dim] bf16 (or out_strides) */
  dsv4rt_buffer *lse;           /* [n_tokens, heads] f32, natural log, without the sink (or lse_strides) */
  dsv4rt_buffer *q;             /* [n_tokens, heads, dim] bf16 (or q_strides) */
  int64_t n_tokens, heads;
  dsv4rt_buffer *cache;         /* the main (SWA) cache */
  int64_t num_blocks, block_size, block_stride;
  dsv4rt_buffer *indices;       /* [n_tokens, topk] int32 slots, -1 skipped */
  dsv4rt_buffer *lens;          /* [n_tokens] int32 */
  int64_t topk;
  dsv4rt_buffer *extra_cache;   /* the compressed cache, or NULL */
  int64_t extra_num_blocks, extra_block_size, extra_block_stride;
  dsv4rt_buffer *extra_indices; /* [n_tokens, extra_topk] int32 */
  dsv4rt_buffer *extra_lens;    /* [n_tokens] int32 */
  int64_t extra_topk;
  dsv4rt_buffer *attn_sink;     /* [heads] f32, or NULL (no sink) */
  float softmax_scale;
  float tensor_scale;           /* kv_scale of a per-tensor layout; else unused */
  /* Batched, strided arguments (FlashMLA's [batch, s_q, ...] views), read
   * where they lie: token t is position t % seq_q of batch entry t / seq_q
   * (seq_q 0: 1; n_tokens a multiple of it), and each token-major argument
   * lies at its strides, in elements: batch entry, position (and head), its
   * last dim packed.  An argument whose strides are all 0 is packed as
   * above.  lens_strides {1, 0}: one length a batch entry (FlashMLA's
   * topk_length [b]).  q's and out's strides are multiples of 8 (16-byte
   * rows) where the layout's dim / v_dim is; out's and lse's never make two
   * elements share an address. */
  int64_t seq_q;
  int64_t q_strides[3], out_strides[3], lse_strides[3];
  int64_t indices_strides[2], lens_strides[2], extra_indices_strides[2], extra_lens_strides[2];
} dsv4rt_sparse_decode_args;

DSV4RT_API dsv4rt_status dsv4rt_sparse_decode(dsv4rt_bundle *b, const dsv4rt_sparse_decode_args *a,
                                              const dsv4rt_launch_opts *opts);

/* ---- the top-k indexer (docs/ops.md section 4) ---- */

/* logits[r, k] = kscale_k * sum_h weights[r, h] * relu(q[r, h] . K_k) for
 * row r = b * next_n + j and k < context_lens[b, j]; -inf for k in
 * [ctx, row_len).  Heads and head dim are the kernel's. */
typedef struct dsv4rt_mqa_logits_args {
  dsv4rt_buffer *logits;        /* [rows, row_stride] f32 */
  int64_t row_len, row_stride;  /* L, and the row stride in elements (>= L) */
  dsv4rt_buffer *q;             /* [B, next_n, heads, dim] e4m3 */
  int64_t batch, next_n;
  dsv4rt_buffer *cache;         /* the indexer cache */
  int64_t num_blocks, block_size, block_stride;
  dsv4rt_buffer *weights;       /* [B * next_n, heads] f32 */
  dsv4rt_buffer *context_lens;  /* [B, next_n] int32 */
  dsv4rt_buffer *block_table;   /* [B, max_blocks] int32 */
  int64_t max_blocks;
  int64_t block_table_stride;   /* elements from one batch entry's row of block_table to the next (0: max_blocks) */
} dsv4rt_mqa_logits_args;

DSV4RT_API dsv4rt_status dsv4rt_paged_mqa_logits(dsv4rt_bundle *b, const dsv4rt_mqa_logits_args *a,
                                                 const dsv4rt_launch_opts *opts);

/* out[r, :K] = the positions of the K largest logits[r, k], k < min(ctx[r],
 * row_len), in no particular order; rows with ctx <= K get 0..ctx-1 then -1.
 * K is the kernel's. */
typedef struct dsv4rt_topk_args {
  dsv4rt_buffer *out;           /* [rows, K] int32 */
  dsv4rt_buffer *logits;        /* [rows, row_stride] f32 */
  int64_t rows, row_len, row_stride;
  dsv4rt_buffer *context_lens;  /* [rows] int32 (the logits' [B, next_n]) */
} dsv4rt_topk_args;

DSV4RT_API dsv4rt_status dsv4rt_topk(dsv4rt_bundle *b, const dsv4rt_topk_args *a, const dsv4rt_launch_opts *opts);

/* The two above in one op, the logits never written: out[r, :K] = the
 * positions of the K largest logits[r, k] that dsv4rt_paged_mqa_logits
 * would compute, with topk's contract (docs/ops.md 4): k < min(ctx[r],
 * row_len), no particular order, rows with ctx <= K get 0..ctx-1 then -1.
 * K and heads are the kernel's.  A row longer than the kernel's chunk
 * (tokens_per_cta) takes a second launch (the merge) and two buffers of
 * the kernel's, kept by the runtime: candidates (rows x row_len x 8 bytes)
 * and histograms (rows x 16388 bytes, 0 between calls); calls of one
 * kernel on two streams at once would share them.  opts->splits does not
 * apply. */
typedef struct dsv4rt_mqa_logits_topk_args {
  dsv4rt_buffer *out;           /* [B * next_n, K] int32 */
  int64_t row_len;              /* L: positions k < L only */
  dsv4rt_buffer *q;             /* [B, next_n, heads, dim] e4m3 */
  int64_t batch, next_n;
  dsv4rt_buffer *cache;         /* the indexer cache */
  int64_t num_blocks, block_size, block_stride;
  dsv4rt_buffer *weights;       /* [B * next_n, heads] f32 */
  dsv4rt_buffer *context_lens;  /* [B, next_n] int32 */
  dsv4rt_buffer *block_table;   /* [B, max_blocks] int32 */
  int64_t max_blocks;
  int64_t block_table_stride;   /* elements from one batch entry's row of block_table to the next (0: max_blocks) */
  int64_t topk;                 /* the K wanted: unnamed, the rule's kernel among those of this K; 0: the first
                                   kernel's K; a named kernel must have it */
} dsv4rt_mqa_logits_topk_args;

DSV4RT_API dsv4rt_status dsv4rt_paged_mqa_logits_topk(dsv4rt_bundle *b, const dsv4rt_mqa_logits_topk_args *a,
                                                      const dsv4rt_launch_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
