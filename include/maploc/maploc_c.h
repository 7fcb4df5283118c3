/* maploc_c.h - maploc's C API, for C programs and foreign-function callers (Python's ctypes, ...).
 *
 * Everything is reached through opaque handles made by maploc_open, maploc_plan_make and
 * maploc_load and released by their *_free function. Every function that can fail returns
 * 0 (MAPLOC_OK) or an error code: maploc::ErrorCode's stable number (include/maploc/error.h,
 * docs/api.md), or MAPLOC_E_INTERNAL for a failure that is no maploc::Error (out of memory,
 * a bug). The message of the calling thread's last failure is maploc_last_error_message().
 * No C++ exception ever leaves a function of this header.
 *
 * Threads: the last error is per thread. A maploc_checkpoint and a maploc_plan are immutable
 * after they are made: any number of threads may list, plan and load from one at once. A
 * maploc_loaded may be read (listed, hashed, exported) from several threads at once, but
 * maploc_loaded_to and maploc_loaded_free need it to themselves. Exported DLPack tensors are
 * independent of every handle.
 *
 * Strings and arrays returned inside the *_info structs live as long as the handle they came
 * from (for a maploc_loaded: until maploc_loaded_to or maploc_loaded_free).
 */
#ifndef MAPLOC_MAPLOC_C_H
#define MAPLOC_MAPLOC_C_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h> /* Debian's libdlpack-dev */

#if defined(__GNUC__)
#define MAPLOC_C_EXPORT __attribute__((visibility("default")))
#else
#define MAPLOC_C_EXPORT
#endif

/* maploc_loaded_dlpack_versioned exists whatever DLPack header maploc was built against: it writes
 * DLPack 1.0's ABI (DLManagedTensorVersioned) itself; the macro stays for callers that tested it. */
#define MAPLOC_C_DLPACK_VERSIONED 1

#ifdef __cplusplus
extern "C" {
#endif

enum {
  MAPLOC_OK = 0,
  MAPLOC_E_INVALID_ARGUMENT = 4,   /* maploc::ErrorCode::kInvalidArgument: a null handle, an index out of range */
  MAPLOC_E_NOT_CONVERTIBLE = 313,  /* kTorchNotConvertible: a tensor DLPack (or the target format) cannot hold */
  MAPLOC_E_INTERNAL = 999          /* not a maploc::Error: out of memory, or a bug */
};

/* How storages placed on the CPU are held (maploc::remap::HostMemory). */
enum { MAPLOC_HOST_VIEW = 0, MAPLOC_HOST_COPY = 1, MAPLOC_HOST_PINNED = 2 };

typedef struct maploc_checkpoint maploc_checkpoint;
typedef struct maploc_plan maploc_plan;
typedef struct maploc_loaded maploc_loaded;

/* One tensor. In a checkpoint listing `device` and `data` are NULL. */
typedef struct maploc_tensor_info {
  const char* name;
  const char* dtype;         /* torch's name: "float32", "bfloat16", "float8_e4m3fn" */
  const char* kind;          /* "dense", "storage", "quantized", "sparse_coo", "nested", "meta", ... */
  int32_t ndim;
  const int64_t* shape;      /* ndim entries (NULL when ndim is 0) */
  const int64_t* stride;     /* ndim entries, in elements; NULL when the file gives none (meta, subclasses) */
  int64_t storage_offset;    /* in elements */
  int64_t storage;           /* index of its storage, -1 for none (composites, meta) */
  int32_t requires_grad;
  int32_t conj;              /* a lazy conjugate bit: the values are the conjugate of the stored ones */
  int32_t neg;               /* a lazy negation bit */
  const char* location;      /* its storage's saved tag ("cpu", "cuda:1"), "" for none */
  const char* device;        /* where it is placed: "cpu", "cuda:1", "meta" (loaded only) */
  void* data;                /* its first element (a device pointer on CUDA; loaded only, NULL on meta) */
  int32_t parameter;         /* rebuilt as a torch.nn.Parameter (_rebuild_parameter*) */
} maploc_tensor_info;

/* One storage. `device`, `data`, `writable` and `pinned` are set for a loaded checkpoint only. */
typedef struct maploc_storage_info {
  const char* key;           /* the persistent id's key */
  const char* dtype;
  uint64_t nbytes;
  const char* location;      /* the saved tag, verbatim */
  const char* device;
  void* data;
  int32_t writable;
  int32_t pinned;            /* page-locked host memory (MAPLOC_HOST_PINNED) */
} maploc_storage_info;

/* Bytes and storages bound for one device in a plan. */
typedef struct maploc_device_total {
  const char* device;
  uint64_t bytes;
  uint64_t storages;
  int32_t has_free_bytes;    /* CUDA only: the device reported its free memory */
  uint64_t free_bytes;
} maploc_device_total;

typedef struct maploc_load_options {
  const char* map_location;  /* a SPEC (docs/map-location.md), e.g. "cuda:*->cpu"; NULL or "": the saved tags */
  int32_t host;              /* MAPLOC_HOST_VIEW (default), MAPLOC_HOST_COPY, MAPLOC_HOST_PINNED */
  int32_t writable;          /* with MAPLOC_HOST_VIEW: copy-on-write pages instead of read-only ones */
  int32_t populate;          /* with MAPLOC_HOST_VIEW: map every page before returning */
  uint32_t host_threads;     /* 0: one per core, at most 8 */
  /* The caller's CUDA stream (a cudaStream_t) of device cuda_stream_device: the load's copies start
   * after the work queued on it (docs/cuda.md, the stream contract). NULL: the legacy default
   * stream, as for every device not named. */
  int32_t cuda_stream_device;
  void* cuda_stream;
} maploc_load_options;

/* --- errors and version --- */
MAPLOC_C_EXPORT int maploc_last_error_code(void);
/* The calling thread's last failure, "" if none; valid until its next failing call. */
MAPLOC_C_EXPORT const char* maploc_last_error_message(void);
MAPLOC_C_EXPORT const char* maploc_version(void);

/* --- checkpoints --- */
/* Opens a checkpoint of any format maploc reads, a sharded set's index file or directory, or a
 * torch.distributed.checkpoint directory (maploc::torch::Checkpoint::open). Nothing in it runs. */
MAPLOC_C_EXPORT int maploc_open(const char* path, maploc_checkpoint** out);
MAPLOC_C_EXPORT void maploc_checkpoint_free(maploc_checkpoint* checkpoint);
/* "zip", "legacy", "tar", "torchscript", "safetensors", "set", "dcp" (NULL for a NULL handle). */
MAPLOC_C_EXPORT const char* maploc_checkpoint_format(const maploc_checkpoint* checkpoint);
MAPLOC_C_EXPORT size_t maploc_checkpoint_tensor_count(const maploc_checkpoint* checkpoint);
MAPLOC_C_EXPORT size_t maploc_checkpoint_storage_count(const maploc_checkpoint* checkpoint);
MAPLOC_C_EXPORT int maploc_checkpoint_tensor(const maploc_checkpoint* checkpoint, size_t index, maploc_tensor_info* out);
MAPLOC_C_EXPORT int maploc_checkpoint_storage(const maploc_checkpoint* checkpoint, size_t index,
                                              maploc_storage_info* out);

/* --- plans: where each storage would go, before anything is read --- */
MAPLOC_C_EXPORT int maploc_plan_make(const maploc_checkpoint* checkpoint, const char* map_location, maploc_plan** out);
MAPLOC_C_EXPORT void maploc_plan_free(maploc_plan* plan);
/* The device storage `index` goes to ("cpu", "cuda:0", "meta"), NULL when out of range. */
MAPLOC_C_EXPORT const char* maploc_plan_target(const maploc_plan* plan, size_t index);
MAPLOC_C_EXPORT size_t maploc_plan_device_count(const maploc_plan* plan);
MAPLOC_C_EXPORT int maploc_plan_device(const maploc_plan* plan, size_t index, maploc_device_total* out);
/* kRemapOutOfMemory (405) when a CUDA device's total exceeds its free memory. */
MAPLOC_C_EXPORT int maploc_plan_check_fits(const maploc_plan* plan);

/* --- loading --- */
/* The defaults: map_location NULL (saved tags), MAPLOC_HOST_VIEW, read-only, no populate. */
MAPLOC_C_EXPORT void maploc_load_options_init(maploc_load_options* options);
/* Places every storage (maploc::remap::load); `options` NULL for the defaults. */
MAPLOC_C_EXPORT int maploc_load(const maploc_checkpoint* checkpoint, const maploc_load_options* options,
                                maploc_loaded** out);
/* Frees the handle; storages held by exported DLPack tensors stay alive until their deleters run. */
MAPLOC_C_EXPORT void maploc_loaded_free(maploc_loaded* loaded);
MAPLOC_C_EXPORT size_t maploc_loaded_tensor_count(const maploc_loaded* loaded);
MAPLOC_C_EXPORT size_t maploc_loaded_storage_count(const maploc_loaded* loaded);
MAPLOC_C_EXPORT int maploc_loaded_tensor(const maploc_loaded* loaded, size_t index, maploc_tensor_info* out);
MAPLOC_C_EXPORT int maploc_loaded_storage(const maploc_loaded* loaded, size_t index, maploc_storage_info* out);
/* The index of the tensor named `name`; kInvalidArgument (4) when there is none. */
MAPLOC_C_EXPORT int maploc_loaded_find(const maploc_loaded* loaded, const char* name, size_t* index);
/* Moves the storages of the tensors whose name matches the glob (NULL: all) to "cpu", "cuda:N" or
 * "meta" (maploc::remap::Loaded::to). Tensors exported before keep the old placement. */
MAPLOC_C_EXPORT int maploc_loaded_to(maploc_loaded* loaded, const char* device, const char* name_glob);
/* Orders the later copies of `loaded` (to, hashes, DLPack reads) on `device` after the caller's
 * `stream` (a cudaStream_t; NULL: the legacy default stream). */
MAPLOC_C_EXPORT int maploc_loaded_set_cuda_stream(maploc_loaded* loaded, int device, void* stream);
/* SHA-256 of the tensor's values in row-major order, as 64 hex digits and a NUL into out[65]. */
MAPLOC_C_EXPORT int maploc_loaded_tensor_sha256(const maploc_loaded* loaded, size_t index, char* out);

/* --- DLPack (maploc/remap/dlpack.h says what is exported and what is refused) --- */
/* A new DLManagedTensor for tensor `index`, owned by the caller: hand it to a consumer or release
 * it with its deleter (or maploc_dlpack_free). It keeps its storage alive on its own. */
MAPLOC_C_EXPORT int maploc_loaded_dlpack(const maploc_loaded* loaded, size_t index, DLManagedTensor** out);
/* Calls t->deleter(t) when t and its deleter are not NULL (for callers that cannot call a function pointer). */
MAPLOC_C_EXPORT void maploc_dlpack_free(DLManagedTensor* t);
/* A PyCapsule destructor for Python producers over ctypes (python/maploc): for a capsule still named
 * "dltensor" (never consumed: consumers rename it "used_dltensor" and own the tensor) it releases the
 * DLManagedTensor the capsule holds. It reaches Python's C API through the running process (dlsym), so
 * libmaploc.so does not link Python; outside a Python process it does nothing. Needs the GIL, as every
 * capsule destructor runs with. Written in C so that it also runs while a consumer's exception is pending. */
MAPLOC_C_EXPORT void maploc_dlpack_capsule_destructor(void* capsule);
/* Tensor `index` as DLPack 1.0's DLManagedTensorVersioned (the ABI the DLPack 1.x header defines; under
 * an older header the struct is incomplete here: pass it on, e.g. in a "dltensor_versioned" capsule):
 * version 1.0, DLPACK_FLAG_BITMASK_READ_ONLY (1) set unless the storage is writable, bool as kDLBool (6),
 * strides always set; the caller releases it through its deleter. Errors as maploc_loaded_dlpack. */
struct DLManagedTensorVersioned;
MAPLOC_C_EXPORT int maploc_loaded_dlpack_versioned(const maploc_loaded* loaded, size_t index,
                                                   struct DLManagedTensorVersioned** out);
/* maploc_dlpack_capsule_destructor for "dltensor_versioned" capsules (DLPack >= 1.0 consumers). */
MAPLOC_C_EXPORT void maploc_dlpack_versioned_capsule_destructor(void* capsule);

/* --- the object tree (what torch.load returns, inertly) --- */
/* Opens a checkpoint held in memory (a copy of the `size` bytes is kept: the caller may free them);
 * `name` (NULL: "<memory>") names it in messages. Any single-file format maploc_open reads. */
MAPLOC_C_EXPORT int maploc_open_memory(const void* data, size_t size, const char* name, maploc_checkpoint** out);
/* The checkpoint's main object (what torch.load returns) serialised into one buffer the caller
 * releases with maploc_buffer_free; tensors in it are indices into the checkpoint's (and every
 * maploc_loaded's) tensors. Linear in the tree's nodes; a shared or cyclic object is written once
 * and referred to again by id. Formats without an object tree (safetensors, sets, DCP) give
 * {name: tensor} in order. The format (little-endian; docs/capi.md, "The object tree"):
 *   value  := tag payload; a tag with bit 0x80 set takes the next id (0, 1, ...), in writing order
 *   'N' None  'T' True  'F' False  'f' float64  'i' int64  'I' u32 n + n bytes (two's complement, LE)
 *   's' str (u32 n + UTF-8)  'b' bytes  'a' bytearray (u32 n + bytes)
 *   't' tuple  'l' list  'S' set  'Z' frozenset: u32 n + n values
 *   'd' dict: u32 n + n (key value) pairs, in order
 *   'G' a global (class, function): str module, str name (each u32 n + UTF-8)
 *   'X' u32: a tensor, by index
 *   'C' a call torch would make (an object maploc does not rebuild): u8 op (0 REDUCE, 1 NEWOBJ,
 *       2 NEWOBJ_EX, 3 INST, 4 OBJ), callable, args, kwargs, u32 n + appended values,
 *       u32 n + set (key value) items, u32 n + BUILD states
 *   'P' a persistent id no loader resolved: its value
 *   'R' u32: the value that took this id before */
MAPLOC_C_EXPORT int maploc_checkpoint_object(const maploc_checkpoint* checkpoint, uint8_t** out, size_t* size);
MAPLOC_C_EXPORT void maploc_buffer_free(void* buffer);
/* The symbolic name of an error code ("kTorchNotCheckpoint"; "kOk", "kInternal"; "unknown" for others). */
MAPLOC_C_EXPORT const char* maploc_error_code_name(int code);
/* Storage `index` as a 1-D uint8 DLPack tensor of its nbytes (strides set), holding the placement
 * alive like maploc_loaded_dlpack: every tensor over it can be made a view of one consumer array. */
MAPLOC_C_EXPORT int maploc_loaded_storage_dlpack(const maploc_loaded* loaded, size_t index, DLManagedTensor** out);

/* --- what maploc_tensor_info does not say: quantizers, components, subclasses, state ---
 * (appended functions, so that maploc_tensor_info's layout stays as it was) */
typedef struct maploc_tensor_extra {
  const char* subclass;      /* "module.Name" of a tensor subclass (_rebuild_from_type_v2, wrapper subclasses), "" none */
  const char* qscheme;       /* quantized: "per_tensor_affine", "per_channel_affine_float_qparams", ...; "" otherwise */
  double q_scale;            /* per-tensor schemes */
  int64_t q_zero_point;      /* per-tensor schemes */
  int64_t q_axis;            /* per-channel schemes (their scales and zero points are components); -1 otherwise */
  int64_t held_by;           /* the tensor whose state holds this one (a wrapper subclass's inner tensor), -1 none */
  int32_t is_component;      /* a part of a composite (sparse, nested, per-channel quantized, ...) */
  const char* device;        /* storage-less kinds (meta, wrapper subclasses): the device argument, "" none */
  size_t component_count;    /* maploc_*_tensor_component */
  size_t attribute_count;    /* maploc_*_tensor_attribute */
} maploc_tensor_extra;
MAPLOC_C_EXPORT int maploc_checkpoint_tensor_extra(const maploc_checkpoint* checkpoint, size_t index,
                                                   maploc_tensor_extra* out);
MAPLOC_C_EXPORT int maploc_loaded_tensor_extra(const maploc_loaded* loaded, size_t index, maploc_tensor_extra* out);
/* Component `k` of a composite: its role ("values", "offsets", "scales", "zero_points", "indices", ...) and
 * the index of the tensor holding it. kInvalidArgument when k >= component_count. */
MAPLOC_C_EXPORT int maploc_checkpoint_tensor_component(const maploc_checkpoint* checkpoint, size_t index, size_t k,
                                                       const char** role, size_t* tensor);
MAPLOC_C_EXPORT int maploc_loaded_tensor_component(const maploc_loaded* loaded, size_t index, size_t k,
                                                   const char** role, size_t* tensor);
/* Attribute `k` of the tensor's tensor-free state (a wrapper subclass's block_size, a jagged tensor's
 * ragged_idx/min_seqlen/max_seqlen): its name and its value as compact JSON (docs/torch.md, "Tensor state"). */
MAPLOC_C_EXPORT int maploc_checkpoint_tensor_attribute(const maploc_checkpoint* checkpoint, size_t index, size_t k,
                                                       const char** name, const char** json);
MAPLOC_C_EXPORT int maploc_loaded_tensor_attribute(const maploc_loaded* loaded, size_t index, size_t k,
                                                   const char** name, const char** json);

/* --- rewriting files --- */
/* `maploc remap IN OUT --map-location SPEC`: a torch.save archive with the storages' location tags
 * rewritten by the SPEC; storages no rule matches keep their tag. */
MAPLOC_C_EXPORT int maploc_remap(const char* in, const char* out, const char* map_location);
/* `maploc convert IN OUT --to safetensors|torch`: `to` is "safetensors" or "torch". */
MAPLOC_C_EXPORT int maploc_convert(const char* in, const char* out, const char* to);

#ifdef __cplusplus
}
#endif

#endif /* MAPLOC_MAPLOC_C_H */
