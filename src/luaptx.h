/* luaptx — hand-written PTX kernels scripted in Lua, embedded in C hosts.
 *
 * The one public header. Link libluaptx (static or shared; pkg-config
 * `luaptx`, CMake `find_package(luaptx)`).
 *
 *   luaptx_state *S = luaptx_open(NULL);                 // device "auto"
 *   if (luaptx_load_file(S, "rms_norm.lua")) fail(luaptx_error(S));
 *   luaptx_kernel *k = luaptx_kernel_get(S, "rms_norm", "B=16,N=1024");
 *   DLTensor *args[] = { &x, &w, &y };                  // inputs, then outputs
 *   if (luaptx_launch_dlpack(k, args, 3, NULL)) fail(luaptx_error(S));
 *   luaptx_close(S);
 *
 * States: no global state; each luaptx_state owns a LuaJIT state, a device
 * and a compiler, and several may coexist. A state (and its kernels) must
 * be used by one thread at a time; different states may run on different
 * threads concurrently.
 *
 * Errors: calls returning int give 0 on success and -1 on failure; calls
 * returning a pointer give NULL. luaptx_error() then says what went wrong
 * (it stays valid until the next call on the same state).
 */
#ifndef LUAPTX_H
#define LUAPTX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LUAPTX_VERSION "0.1.0"

/* What the library exports: the functions of this header, nothing else
 * (it is built with hidden visibility, as LuaJIT marks LUA_API). */
#if defined(__GNUC__)
#define LUAPTX_API __attribute__((visibility("default")))
#else
#define LUAPTX_API
#endif
#define LUAPTX_MAX_DIMS 8      /* the highest rank of a tensor luaptx binds */

/* ------------------------------------------------------------------ DLPack
 * The DLPack 1.0 ABI, declared here unless the host included dlpack.h. */
#ifndef DLPACK_MAJOR_VERSION
typedef struct { uint32_t major, minor; } DLPackVersion;
typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 } DLDeviceType;
typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;
typedef enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLOpaqueHandle = 3, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 } DLDataTypeCode;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;      /* NULL: compact row-major */
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif

/* ------------------------------------------------------------------ states */

typedef struct luaptx_state luaptx_state;
typedef struct luaptx_kernel luaptx_kernel;

typedef struct luaptx_options {
  const char *device;     /* "auto" (default: cuda when a GPU exists, else emu), "emu", "cuda" */
  const char *cache_dir;  /* cubin cache; NULL: $LUAPTX_CACHE_DIR, $XDG_CACHE_HOME/luaptx, ~/.cache/luaptx */
  const char *lua_path;   /* prepended to package.path, e.g. "/opt/kernels/?.lua;" (NULL: none) */
  int quiet;              /* nonzero: do not print the chosen device on stderr */
} luaptx_options;

/* Open a state (opts may be NULL). NULL only when out of memory. A state
 * whose set-up failed (an unknown device name, a bad LUAPTX_* variable)
 * says why in luaptx_error() right away and refuses every later call; a
 * valid device name whose device is missing (cuda without a GPU) is
 * reported by the first call that needs the device. */
LUAPTX_API luaptx_state *luaptx_open(const luaptx_options *opts);

/* Close a state and everything it owns (kernels included). */
LUAPTX_API void luaptx_close(luaptx_state *S);

/* The last error of the state as text ("" when none). */
LUAPTX_API const char *luaptx_error(const luaptx_state *S);

/* The device in use, e.g. "emu (CPU emulator, 2 threads)". */
LUAPTX_API const char *luaptx_device(luaptx_state *S);

/* ----------------------------------------------------------------- scripts */

/* Load a kernel script (a file, or a string with a chunk name for errors).
 * Its kernels (a kernel, a list, or a table with `kernels`) become
 * available to luaptx_kernel_get. Loading again adds to them. */
LUAPTX_API int luaptx_load_file(luaptx_state *S, const char *path);
LUAPTX_API int luaptx_load_string(luaptx_state *S, const char *chunk, const char *chunkname);

/* ----------------------------------------------------------------- kernels */

/* A kernel of the loaded scripts by name, specialized with template values
 * "NAME=value,..." (numbers or words; NULL or "" for the defaults). The
 * handle lives until the state closes. */
LUAPTX_API luaptx_kernel *luaptx_kernel_get(luaptx_state *S, const char *name, const char *params);

/* The PTX text of the specialization (owned by the kernel). */
LUAPTX_API const char *luaptx_kernel_ptx(luaptx_kernel *K, size_t *len);

/* The compiled cubin (through the cache; owned by the kernel). */
LUAPTX_API const void *luaptx_kernel_cubin(luaptx_kernel *K, size_t *len);

/* The names of the kernels the loaded scripts define, comma-separated
 * (owned by the state, valid until the next call). */
LUAPTX_API const char *luaptx_kernel_names(luaptx_state *S);

/* The kernel's tensor boundary as text, for hosts that bind shapes and
 * allocate outputs themselves (owned by the kernel): "where FILE:LINE" (the
 * kernel's definition), "params NAMES" (the template values the kernel
 * declares, its params and raw_params, comma-separated; "-" for none),
 * then one line per in_spec "in DTYPE DIMS" and per
 * out_spec "out DTYPE DIMS"; DTYPE a PTX type name (f32, bf16, s32...),
 * DIMS comma-separated numbers or symbol names ("-" for a scalar); last,
 * when the kernel has runtime scalars, "scalars NAME:TYPE,..." (see
 * luaptx_launch_dlpack_scalars). */
LUAPTX_API const char *luaptx_kernel_specs(luaptx_kernel *K, size_t *len);

/* ptxas's resource report of the specialization as "key=value" lines
 * (arch, instructions, registers, smem, dynamic_smem, spills, stack);
 * NULL without ptxas or when it fails (owned by the kernel). */
LUAPTX_API const char *luaptx_kernel_check(luaptx_kernel *K, size_t *len);

/* Autotune the kernel over configs of template values with `luaptx
 * tune`'s sweep (pyptx.tools.tune) and its per-config result cache.
 * request is JSON: {"name": sweep name, "configs": [{"NAME": value,
 * ...}, ...], "inputs": [{"dtype": "f32", "shape": [...]}, ...] (random
 * inputs of those), "values": {more template values}, "force": bool,
 * "cache_dir": dir}. Returns the sweep's result as JSON (results per
 * config, best first, with status, reason, cached; best; ranking, which
 * says on the emulator that timing is not meaningful), owned by the
 * kernel; NULL with luaptx_error. */
LUAPTX_API const char *luaptx_kernel_tune(luaptx_kernel *K, const char *request, size_t *len);

/* Launch with every tensor the kernel takes, inputs then outputs, as
 * DLTensors; dims bound from their shapes, dtypes and ranks checked first.
 * CPU tensors run on the emulator (copied in and out; the call returns
 * when done); CUDA tensors on the cuda device, queued on stream (a
 * CUstream, or NULL for the default stream) with no synchronisation, so
 * the launch can be captured in a CUDA graph. The first launch of given
 * shapes, dtypes and devices prepares a plan kept on the kernel; later
 * launches of the same run it in C without Lua. */
LUAPTX_API int luaptx_launch_dlpack(luaptx_kernel *K, DLTensor *const *tensors, int n, void *stream);

/* Check tensors as a launch does, without launching, and bind the
 * kernel's dims: n is the number of inputs (outputs left to the host to
 * allocate) or of inputs and outputs. flags: each tensor's DLPack 1.0
 * flags (NULL: none; a read-only or copied output is refused), or
 * LUAPTX_BIND_SHAPE_ONLY for a tensor that is a dtype and a shape only (a
 * tracer's abstract value, before any data exists): its data, strides,
 * device and flags are not checked, nor its dtype when its bits are 0.
 * out_shapes (NULL: not wanted) receives each output's shape,
 * LUAPTX_MAX_DIMS values per output (-1 past its rank); an output dim no
 * input binds is an error. 0; -1 with luaptx_error, or -2 when the error
 * is a tensor's dtype. (Launches ignore LUAPTX_BIND_SHAPE_ONLY.) */
#define LUAPTX_BIND_SHAPE_ONLY (1ull << 63)
LUAPTX_API int luaptx_kernel_bind(luaptx_kernel *K, DLTensor *const *tensors, const uint64_t *flags, int n, int64_t *out_shapes);

/* A runtime scalar's value for luaptx_launch_dlpack_scalars: kind NONE
 * (the kernel's template value), INT (i), UINT (i's bits, unsigned) or
 * FLOAT (f). */
enum { LUAPTX_SCALAR_NONE = 0, LUAPTX_SCALAR_INT = 1, LUAPTX_SCALAR_UINT = 2, LUAPTX_SCALAR_FLOAT = 3 };
typedef struct luaptx_scalar { int32_t kind; int64_t i; double f; } luaptx_scalar;

/* luaptx_launch_dlpack with the kernel's runtime scalars: its raw_params
 * of one integer, f32 or f64 value ("scalars NAME:TYPE,..." in
 * luaptx_kernel_specs), one per scalar in that order (nscalars 0: all
 * from template values). Each is checked against its type (an integer in
 * range; a float only for f32/f64) and patched into the launch's
 * parameters: a new value re-traces and re-plans nothing. -2 when a
 * value's type is wrong, -1 for any other error. */
LUAPTX_API int luaptx_launch_dlpack_scalars(luaptx_kernel *K, DLTensor *const *tensors, int n, const luaptx_scalar *scalars,
                                            int nscalars, void *stream);

/* Check runtime scalars as luaptx_launch_dlpack_scalars does, without
 * launching: 0, -2 (a value's type) or -1 (a value out of range, a
 * missing value, a wrong count) with luaptx_error. */
LUAPTX_API int luaptx_kernel_scalars(luaptx_kernel *K, const luaptx_scalar *scalars, int nscalars);

/* The same with DLPack 1.0 managed tensors (version 1.x required). */
LUAPTX_API int luaptx_launch_dlpack_versioned(luaptx_kernel *K, DLManagedTensorVersioned *const *tensors, int n, void *stream);

/* Launch with raw device addresses (of the state's device), one per tensor. */
LUAPTX_API int luaptx_launch_ptrs(luaptx_kernel *K, const uint64_t *ptrs, int n, void *stream);

/* ------------------------------------------------------------- the program */

struct lua_State;

/* Run the luaptx command line with argv; returns the process exit code. */
LUAPTX_API int luaptx_main(int argc, char **argv);

/* Install luaptx's module loader and core bindings into a lua_State you
 * own (LuaJIT 2.1, after luaL_openlibs). 0, or -1 with a message on L. */
LUAPTX_API int luaptx_install(struct lua_State *L);

#ifdef __cplusplus
}
#endif
#endif
