/* luaptx._core: the Python extension over the C embedding API (luaptx.h).
 * Python is a host like any C host: a state per loaded script, kernels by
 * name, tensors taken through the DLPack protocol (versioned capsules with
 * the 0.x fallback), zero-copy. Shapes, dtypes, strides and devices are
 * checked by the C API (luaptx_kernel_bind, the checks of every launch) so
 * that a mismatch is a TypeError (a dtype) or ValueError naming the
 * argument and the Lua file:line of the kernel; everything else raised by
 * Lua is LuaError. The specs text (luaptx_kernel_specs) gives the outputs'
 * dtypes for allocating them. */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#define PY_SSIZE_T_CLEAN
#define _POSIX_C_SOURCE 200809L
#include <Python.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include "luaptx.h"
#include "lpx_bind.h"

/* The DLPack 0.x managed tensor (the unversioned capsule "dltensor"). */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

enum { MAX_DIMS = LUAPTX_MAX_DIMS, MAX_TENSORS = LPX_BIND_TENSORS, SYM_LEN = 32 };

static PyObject *LuaError;

/* A state and the lock that serialises its use (Python threads, XLA). */
typedef struct {
  luaptx_state *S;
  pthread_mutex_t lock;
  int device_kind;         /* 0 unknown, kDLCPU for emu, kDLCUDA for cuda (the XLA registry's key) */
} py_state;

/* One tensor spec: dtype and dims (a number, or a symbol). */
typedef struct {
  char dtype[8];
  uint8_t code, bits;      /* code 255: a dtype DLPack cannot name */
  int ndim;
  int64_t dims[MAX_DIMS];
  char syms[MAX_DIMS][SYM_LEN];   /* "" for a fixed dim */
} py_spec;

/* A kernel specialisation: the handle and its parsed boundary. */
typedef struct {
  luaptx_kernel *K;
  PyObject *state;         /* the state capsule, kept alive */
  py_state *st;            /* its struct */
  char name[128], where[640];
  int nin, nout;
  py_spec specs[MAX_TENSORS];
  int nscalars;            /* runtime scalars ("scalars" line), for XLA's attributes */
  char scalars[LPX_BIND_SCALARS][SYM_LEN];
  /* The last allocating launch's inputs' shapes and the outputs' shapes
   * they bound (Python threads only, under the GIL): a launch on inputs
   * of the same shapes allocates without binding first (the launch
   * checks every tensor itself). */
  int cached;
  int cache_ndim[MAX_TENSORS];
  int64_t cache_in[MAX_TENSORS][MAX_DIMS], cache_out[MAX_TENSORS * MAX_DIMS];
} py_kernel;

/* A tensor taken from a DLPack capsule (until its deleter runs), or
 * viewed through its type's DLPack C exchange API (own: a copy of the
 * producer's DLTensor with its shape and strides, owner kept alive). */
typedef struct {
  PyObject *owner, *capsule;
  DLTensor *t;
  void *managed;
  int versioned;
  uint64_t flags;
  DLTensor own;
  int64_t shape[MAX_DIMS], strides[MAX_DIMS];
} py_taken;

/* DLPack's C exchange API (dlpack.h 1.2+, `type(x).__dlpack_c_exchange_api__`,
 * a capsule "dlpack_exchange_api"): tensors viewed and allocated, and the
 * producer's current stream, from C without Python calls. torch has it. */
typedef struct dl_exchange_api {
  struct { DLPackVersion version; void *prev_api; } header;
  int (*allocator)(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                   void (*set_error)(void *error_ctx, const char *kind, const char *message));
  int (*managed_from_py)(void *obj, DLManagedTensorVersioned **out);
  int (*managed_to_py)(DLManagedTensorVersioned *tensor, void **out);
  int (*dltensor_from_py)(void *obj, DLTensor *out);
  int (*current_stream)(DLDeviceType device_type, int32_t device_id, void **out);
} dl_exchange_api;

/* ------------------------------------------------------------ dtypes */

/* Fill a spec's DLPack code and bits from its PTX type name (code 255: a
 * dtype DLPack cannot name), through the binding's one table. */
static void dtype_of(py_spec *s)
{
  if (lpx_bind_dtype(s->dtype, &s->code, &s->bits)) s->code = 255;
}

/* ------------------------------------------------------------- states */

/* Free a state capsule's state. */
static void state_free(PyObject *cap)
{
  py_state *st = PyCapsule_GetPointer(cap, "luaptx.state");
  if (!st) return;
  luaptx_close(st->S);
  pthread_mutex_destroy(&st->lock);
  free(st);
}

/* The py_state of a capsule argument (NULL with TypeError). */
static py_state *state_of(PyObject *cap) { return PyCapsule_GetPointer(cap, "luaptx.state"); }

/* Raise LuaError with the state's message; returns NULL. */
static PyObject *lua_fail(py_state *st)
{
  PyErr_SetString(LuaError, luaptx_error(st->S));
  return NULL;
}

/* open(device, lua_path, cache_dir, quiet) -> state capsule. */
static PyObject *py_open(PyObject *self, PyObject *args)
{
  const char *device, *lua_path, *cache_dir;
  int quiet;
  (void)self;
  if (!PyArg_ParseTuple(args, "szzp", &device, &lua_path, &cache_dir, &quiet)) return NULL;
  py_state *st = calloc(1, sizeof *st);
  if (!st) return PyErr_NoMemory();
  luaptx_options o = { device, cache_dir, lua_path, quiet };
  st->S = luaptx_open(&o);
  if (!st->S) { free(st); return PyErr_NoMemory(); }
  pthread_mutex_init(&st->lock, NULL);
  PyObject *cap = PyCapsule_New(st, "luaptx.state", state_free);
  if (!cap) { luaptx_close(st->S); free(st); return NULL; }
  if (*luaptx_error(st->S)) { PyErr_SetString(LuaError, luaptx_error(st->S)); Py_DECREF(cap); return NULL; }
  return cap;
}

/* load(state, chunk_or_path, chunkname or None): a file when no name. */
static PyObject *py_load(PyObject *self, PyObject *args)
{
  PyObject *cap;
  const char *text, *name;
  (void)self;
  if (!PyArg_ParseTuple(args, "Osz", &cap, &text, &name)) return NULL;
  py_state *st = state_of(cap);
  if (!st) return NULL;
  pthread_mutex_lock(&st->lock);
  int rc = name ? luaptx_load_string(st->S, text, name) : luaptx_load_file(st->S, text);
  pthread_mutex_unlock(&st->lock);
  if (rc) return lua_fail(st);
  Py_RETURN_NONE;
}

/* names(state) -> "a,b" ; device(state) -> text. */
static PyObject *state_text(PyObject *args, int which)
{
  PyObject *cap;
  if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
  py_state *st = state_of(cap);
  if (!st) return NULL;
  pthread_mutex_lock(&st->lock);
  const char *s = which ? luaptx_kernel_names(st->S) : luaptx_device(st->S);
  PyObject *r = s && (*s || !*luaptx_error(st->S)) ? PyUnicode_FromString(s) : NULL;
  pthread_mutex_unlock(&st->lock);
  return r ? r : lua_fail(st);
}

static PyObject *py_names(PyObject *self, PyObject *args) { (void)self; return state_text(args, 1); }
static PyObject *py_device(PyObject *self, PyObject *args) { (void)self; return state_text(args, 0); }

/* ------------------------------------------------------------ kernels */

/* Free a kernel capsule (the handle itself belongs to the state). */
static void kernel_free(PyObject *cap)
{
  py_kernel *k = PyCapsule_GetPointer(cap, "luaptx.kernel");
  if (!k) return;
  Py_XDECREF(k->state);
  free(k);
}

/* Parse one "in|out DTYPE DIMS" line into the kernel's next spec. */
static int parse_spec(py_kernel *k, const char *line)
{
  char role[4], dtype[8], dims[512];
  if (sscanf(line, "%3s %7s %511s", role, dtype, dims) != 3 || k->nin + k->nout >= MAX_TENSORS) return -1;
  py_spec *s = &k->specs[k->nin + k->nout];
  if (strcmp(role, "in") == 0) { if (k->nout) return -1; k->nin++; } else k->nout++;
  snprintf(s->dtype, sizeof s->dtype, "%s", dtype);
  dtype_of(s);
  if (strcmp(dims, "-") == 0) return 0;
  for (char *d = strtok(dims, ","); d; d = strtok(NULL, ",")) {
    if (s->ndim == MAX_DIMS) return -1;
    char *end;
    long long v = strtoll(d, &end, 10);
    s->dims[s->ndim] = *end ? -1 : v;
    snprintf(s->syms[s->ndim], SYM_LEN, "%s", *end ? d : "");
    s->ndim++;
  }
  return 0;
}

/* Parse luaptx_kernel_specs's text into k. */
static int parse_specs(py_kernel *k, const char *text)
{
  const char *p = text;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    char line[640];
    snprintf(line, sizeof line, "%.*s", (int)n, p);
    if (strncmp(line, "where ", 6) == 0) snprintf(k->where, sizeof k->where, "%s", line + 6);
    else if (strncmp(line, "params ", 7) == 0) { /* names: luaptx/__init__.py reads them */ }
    else if (strncmp(line, "scalars ", 8) == 0) {
      for (char *x = strtok(line + 8, ","); x && k->nscalars < LPX_BIND_SCALARS; x = strtok(NULL, ","))
        snprintf(k->scalars[k->nscalars++], SYM_LEN, "%.*s", (int)strcspn(x, ":"), x);
    }
    else if (parse_spec(k, line)) return -1;
    p += n + (nl != NULL);
  }
  return 0;
}

/* kernel(state, name, params) -> kernel capsule. */
static PyObject *py_kernel_get(PyObject *self, PyObject *args)
{
  PyObject *cap;
  const char *name, *params;
  (void)self;
  if (!PyArg_ParseTuple(args, "Oss", &cap, &name, &params)) return NULL;
  py_state *st = state_of(cap);
  if (!st) return NULL;
  py_kernel *k = calloc(1, sizeof *k);
  if (!k) return PyErr_NoMemory();
  pthread_mutex_lock(&st->lock);
  k->K = luaptx_kernel_get(st->S, name, params);
  const char *specs = k->K ? luaptx_kernel_specs(k->K, NULL) : NULL;
  int bad = specs ? parse_specs(k, specs) : 0;
  pthread_mutex_unlock(&st->lock);
  if (!specs) { free(k); return lua_fail(st); }
  if (bad) { free(k); PyErr_Format(PyExc_ValueError, "kernel \"%s\": its specs are beyond this host (at most %d tensors of rank %d)", name, MAX_TENSORS, MAX_DIMS); return NULL; }
  snprintf(k->name, sizeof k->name, "%s", name);
  Py_INCREF(cap);
  k->state = cap;
  k->st = st;
  PyObject *kc = PyCapsule_New(k, "luaptx.kernel", kernel_free);
  if (!kc) { Py_DECREF(cap); free(k); }
  return kc;
}

/* A kernel's state struct, read without the Python API (XLA's threads run
 * without the GIL): kept at kernel creation. */
static py_state *state_of_unchecked(const py_kernel *k) { return k->st; }

/* The py_kernel of a capsule argument. */
static py_kernel *kernel_of(PyObject *cap) { return PyCapsule_GetPointer(cap, "luaptx.kernel"); }

/* ptx/specs/check(kernel) -> text. */
static PyObject *kernel_text(PyObject *args, const char *(*fn)(luaptx_kernel *, size_t *))
{
  PyObject *cap;
  if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
  py_kernel *k = kernel_of(cap);
  if (!k) return NULL;
  py_state *st = state_of(k->state);
  size_t len = 0;
  pthread_mutex_lock(&st->lock);
  const char *s = fn(k->K, &len);
  PyObject *r = s ? PyUnicode_FromStringAndSize(s, (Py_ssize_t)len) : NULL;
  pthread_mutex_unlock(&st->lock);
  if (!s) return lua_fail(st);
  return r;
}

static PyObject *py_ptx(PyObject *self, PyObject *args) { (void)self; return kernel_text(args, luaptx_kernel_ptx); }

/* tune(kernel, request JSON) -> the sweep's result as JSON
 * (luaptx_kernel_tune), the GIL released while the sweep runs. */
static PyObject *py_tune(PyObject *self, PyObject *args)
{
  PyObject *cap;
  const char *request;
  (void)self;
  if (!PyArg_ParseTuple(args, "Os", &cap, &request)) return NULL;
  py_kernel *k = kernel_of(cap);
  if (!k) return NULL;
  py_state *st = state_of(k->state);
  size_t len = 0;
  char *copy = NULL, *err = NULL;
  Py_BEGIN_ALLOW_THREADS
  pthread_mutex_lock(&st->lock);
  const char *text = luaptx_kernel_tune(k->K, request, &len);
  if (text && (copy = malloc(len + 1))) memcpy(copy, text, len + 1);
  if (!text) err = strdup(luaptx_error(st->S));
  pthread_mutex_unlock(&st->lock);
  Py_END_ALLOW_THREADS
  PyObject *r = copy ? PyUnicode_FromStringAndSize(copy, (Py_ssize_t)len) : NULL;
  if (!copy) PyErr_SetString(err ? LuaError : PyExc_MemoryError, err ? err : "out of memory");
  free(copy);
  free(err);
  return r;
}
static PyObject *py_specs(PyObject *self, PyObject *args) { (void)self; return kernel_text(args, luaptx_kernel_specs); }
static PyObject *py_check(PyObject *self, PyObject *args) { (void)self; return kernel_text(args, luaptx_kernel_check); }

/* Learn the state's device kind from luaptx_device (once; 0 while unknown). */
static void learn_device(py_state *st)
{
  if (st->device_kind) return;
  const char *d = luaptx_device(st->S);
  if (strncmp(d, "emu", 3) == 0) st->device_kind = kDLCPU;
  else if (strncmp(d, "cuda", 4) == 0) st->device_kind = kDLCUDA;
}

/* ------------------------------------------------- the XLA registry
 * Kernels called from JAX are named in the HLO by a stable key (script
 * hash, kernel name, template values: luaptx.jax builds it), never by an
 * address: compiled and exported executables outlive the Python objects.
 * The registry maps (key, device kind) to a kernel for the life of the
 * process: a registered kernel's capsule is never released, and a key
 * registered again (a script reloaded) points at the newer kernel while
 * the older one stays alive for executables already running it. */
typedef struct {
  char *key;
  size_t len;
  int kind;                /* kDLCPU (the emulator) or kDLCUDA */
  py_kernel *k;
} xla_entry;

static xla_entry *xla_reg;
static size_t xla_nreg, xla_cap;
static pthread_mutex_t xla_lock = PTHREAD_MUTEX_INITIALIZER;

/* The registered kernel of key on device kind, or NULL (any thread). */
static py_kernel *xla_find(const char *key, size_t len, int kind)
{
  py_kernel *k = NULL;
  pthread_mutex_lock(&xla_lock);
  for (size_t i = 0; i < xla_nreg && !k; i++)
    if (xla_reg[i].kind == kind && xla_reg[i].len == len && memcmp(xla_reg[i].key, key, len) == 0) k = xla_reg[i].k;
  pthread_mutex_unlock(&xla_lock);
  return k;
}

/* Point key (on k's device kind) at k, adding an entry when new. */
static int xla_put(const char *key, size_t len, py_kernel *k)
{
  int rc = 0;
  pthread_mutex_lock(&xla_lock);
  size_t i = 0;
  while (i < xla_nreg && !(xla_reg[i].kind == k->st->device_kind && xla_reg[i].len == len && memcmp(xla_reg[i].key, key, len) == 0)) i++;
  if (i == xla_nreg && xla_nreg == xla_cap) {
    size_t cap = xla_cap ? 2 * xla_cap : 16;
    xla_entry *grown = realloc(xla_reg, cap * sizeof *grown);
    if (grown) { xla_reg = grown; xla_cap = cap; } else rc = -1;
  }
  if (rc == 0 && i == xla_nreg) {
    char *copy = malloc(len + 1);
    if (copy) {
      memcpy(copy, key, len);
      copy[len] = 0;
      xla_reg[i] = (xla_entry){ copy, len, k->st->device_kind, k };
      xla_nreg++;
    } else rc = -1;
  } else if (rc == 0) xla_reg[i].k = k;
  pthread_mutex_unlock(&xla_lock);
  return rc;
}

/* xla_register(key, kernel) -> the device kind ("cpu" or "cuda"): the
 * kernel is launched by the XLA handler of that platform when an
 * ffi_call names key; its capsule is kept for the life of the process. */
static PyObject *py_xla_register(PyObject *self, PyObject *args)
{
  PyObject *cap;
  const char *key;
  Py_ssize_t len;
  (void)self;
  if (!PyArg_ParseTuple(args, "s#O", &key, &len, &cap)) return NULL;
  py_kernel *k = kernel_of(cap);
  if (!k) return NULL;
  if (!k->st->device_kind) {
    pthread_mutex_lock(&k->st->lock);
    learn_device(k->st);
    const char *err = k->st->device_kind ? NULL : luaptx_error(k->st->S);
    pthread_mutex_unlock(&k->st->lock);
    if (err) { PyErr_SetString(LuaError, err); return NULL; }
  }
  if (xla_find(key, (size_t)len, k->st->device_kind) != k) {
    if (xla_put(key, (size_t)len, k)) return PyErr_NoMemory();
    Py_INCREF(cap);      /* for the life of the process: executables may name it */
  }
  return PyUnicode_FromString(k->st->device_kind == kDLCUDA ? "cuda" : "cpu");
}

/* ------------------------------------------------------------- DLPack */

/* Interned names and the constant arguments of __dlpack__ calls. */
static PyObject *s_dlpack, *s_empty, *s_kw_versioned;

/* Call obj.__dlpack__(max_version=(1, 0)[, stream]), falling back to the
 * 0.x signature when the producer does not take max_version. */
static PyObject *dlpack_capsule(PyObject *obj, PyObject *stream)
{
  PyObject *meth = PyObject_GetAttr(obj, s_dlpack);
  if (!meth) return NULL;
  PyObject *kw = stream == Py_None ? s_kw_versioned : PyDict_Copy(s_kw_versioned), *cap = NULL;
  if (kw && (stream == Py_None || PyDict_SetItemString(kw, "stream", stream) == 0)) {
    cap = PyObject_Call(meth, s_empty, kw);
    if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyObject *legacy = PyDict_New();
      if (legacy && (stream == Py_None || PyDict_SetItemString(legacy, "stream", stream) == 0))
        cap = PyObject_Call(meth, s_empty, legacy);
      Py_XDECREF(legacy);
    }
  }
  if (kw != s_kw_versioned) Py_XDECREF(kw);
  Py_DECREF(meth);
  return cap;
}

/* Types seen and their exchange API (NULL: none), kept with a reference;
 * grad: the type has requires_grad (torch). */
enum { XC_TYPES = 8 };
static struct { PyObject *type; const dl_exchange_api *api; int grad; } xc_seen[XC_TYPES];
static int xc_next;
static PyObject *s_xc_attr, *s_requires_grad;

/* The DLPack C exchange API of obj's type (DLPack 1.x), or NULL; grad
 * (NULL: not wanted) receives whether the type has requires_grad. */
static const dl_exchange_api *exchange_api(PyObject *obj, int *grad)
{
  PyObject *type = (PyObject *)Py_TYPE(obj);
  for (int i = 0; i < XC_TYPES; i++)
    if (xc_seen[i].type == type) { if (grad) *grad = xc_seen[i].grad; return xc_seen[i].api; }
  const dl_exchange_api *api = NULL;
  PyObject *cap = PyObject_GetAttr(type, s_xc_attr);
  if (cap && PyCapsule_IsValid(cap, "dlpack_exchange_api")) api = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
  if (api && (api->header.version.major != 1 || !api->dltensor_from_py)) api = NULL;
  Py_XDECREF(cap);
  PyErr_Clear();
  Py_XDECREF(xc_seen[xc_next].type);
  Py_INCREF(type);
  xc_seen[xc_next].type = type;
  xc_seen[xc_next].api = api;
  xc_seen[xc_next].grad = api && PyObject_HasAttr(type, s_requires_grad);
  if (grad) *grad = xc_seen[xc_next].grad;
  xc_next = (xc_next + 1) % XC_TYPES;
  return api;
}

/* Tensor i's name in messages: "input I" or "output O" (1-based). */
static const char *arg_name(const py_kernel *k, int i, char *buf, size_t size)
{
  snprintf(buf, size, i < k->nin ? "input %d" : "output %d", i < k->nin ? i + 1 : i - k->nin + 1);
  return buf;
}

/* View obj through its exchange API: no capsule, no Python call. */
static int take_exchange(const dl_exchange_api *api, PyObject *obj, py_taken *tk, int i, const py_kernel *k)
{
  char arg[24];
  if (api->dltensor_from_py(obj, &tk->own)) return -1;
  if (tk->own.ndim < 0 || tk->own.ndim > MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "kernel \"%s\" (%s): %s has rank %d; luaptx takes at most %d dims", k->name, k->where,
                 arg_name(k, i, arg, sizeof arg), (int)tk->own.ndim, MAX_DIMS);
    return -1;
  }
  for (int d = 0; d < tk->own.ndim; d++) {
    tk->shape[d] = tk->own.shape[d];
    if (tk->own.strides) tk->strides[d] = tk->own.strides[d];
  }
  tk->own.shape = tk->shape;
  tk->own.strides = tk->own.strides ? tk->strides : NULL;
  tk->t = &tk->own;
  Py_INCREF(obj);
  tk->owner = obj;
  return 0;
}

/* torch.is_grad_enabled, looked up when first needed. */
static PyObject *grad_enabled;

/* Refuse tensor i when it requires grad while grad mode is on (torch):
 * a kernel called directly is invisible to autograd. -1 with TypeError. */
static int grad_refused(PyObject *obj, int i, const py_kernel *k)
{
  PyObject *rg = PyObject_GetAttr(obj, s_requires_grad);
  if (!rg) return -1;
  int wants = PyObject_IsTrue(rg);
  Py_DECREF(rg);
  if (wants <= 0) return wants;
  if (!grad_enabled) {
    PyObject *torch = PyImport_ImportModule("torch");
    grad_enabled = torch ? PyObject_GetAttrString(torch, "is_grad_enabled") : NULL;
    Py_XDECREF(torch);
    if (!grad_enabled) return -1;
  }
  PyObject *on = PyObject_CallNoArgs(grad_enabled);
  int enabled = on ? PyObject_IsTrue(on) : -1;
  Py_XDECREF(on);
  if (enabled <= 0) return enabled;
  char arg[24];
  PyErr_Format(PyExc_TypeError, "kernel \"%s\" (%s): %s requires grad, but a kernel called directly is invisible to autograd; "
               "use luaptx.torch.differentiable for a gradient, or pass a detached tensor (x.detach())", k->name, k->where,
               arg_name(k, i, arg, sizeof arg));
  return -1;
}

/* Take the DLTensor out of obj's capsule (renamed "used_..." so that the
 * capsule no longer owns it; release() runs its deleter), or view it
 * through its type's exchange API; given: the caller's tensor (one
 * allocated here needs no requires_grad check). */
static int take(PyObject *obj, PyObject *stream, py_taken *tk, int i, const py_kernel *k, int given)
{
  char arg[24];
  int grad = 0;
  memset(tk, 0, offsetof(py_taken, own));
  const dl_exchange_api *api = exchange_api(obj, &grad);
  if (api) return take_exchange(api, obj, tk, i, k) || (grad && given && grad_refused(obj, i, k)) ? -1 : 0;
  arg_name(k, i, arg, sizeof arg);
  PyObject *cap = dlpack_capsule(obj, stream);
  if (!cap) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();
      PyObject *tn = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__");
      PyErr_Format(PyExc_TypeError, "kernel \"%s\" (%s): %s must be a tensor with __dlpack__ (numpy, torch, jax...), got %S",
                   k->name, k->where, arg, tn ? tn : Py_None);
      Py_XDECREF(tn);
    }
    return -1;
  }
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    tk->versioned = 1; tk->managed = m; tk->t = &m->dl_tensor; tk->flags = m->flags;
    PyCapsule_SetName(cap, "used_dltensor_versioned");
    if (m->version.major != 1) {
      tk->capsule = cap;
      PyErr_Format(PyExc_ValueError, "kernel \"%s\" (%s): %s is DLPack version %u.%u; luaptx reads DLPack 1.x",
                   k->name, k->where, arg, (unsigned)m->version.major, (unsigned)m->version.minor);
      return -1;
    }
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    tk->managed = m; tk->t = &m->dl_tensor;
    PyCapsule_SetName(cap, "used_dltensor");
  } else {
    Py_DECREF(cap);
    PyErr_Format(PyExc_TypeError, "kernel \"%s\" (%s): %s's __dlpack__ did not return a DLPack capsule", k->name, k->where, arg);
    return -1;
  }
  tk->capsule = cap;
  Py_INCREF(obj);
  tk->owner = obj;
  return 0;
}

/* Run a taken tensor's deleter and drop its references. */
static void release(py_taken *tk)
{
  if (tk->managed) {
    if (tk->versioned) { DLManagedTensorVersioned *m = tk->managed; if (m->deleter) m->deleter(m); }
    else { DLManagedTensor *m = tk->managed; if (m->deleter) m->deleter(m); }
  }
  Py_XDECREF(tk->capsule);
  Py_XDECREF(tk->owner);
  memset(tk, 0, offsetof(py_taken, own));
}

/* ------------------------------------------------------------ binding */

/* Raise the C API's binding error (rc -2: a dtype, TypeError; else
 * ValueError), naming the kernel's file:line after its name. */
static void bind_error(const py_kernel *k, int rc, const char *msg)
{
  char prefix[160];
  snprintf(prefix, sizeof prefix, "kernel \"%s\"", k->name);
  size_t n = strlen(prefix);
  PyObject *type = rc == -2 ? PyExc_TypeError : PyExc_ValueError;
  if (strncmp(msg, prefix, n) == 0) PyErr_Format(type, "%s (%s)%s", prefix, k->where, msg + n);
  else PyErr_Format(type, "kernel \"%s\" (%s): %s", k->name, k->where, msg);
}

/* luaptx_kernel_bind on n tensors with their flags, under the state's
 * lock; its error raised as a Python exception. shapes receives the
 * outputs' shapes. */
static int bind_tensors(const py_kernel *k, py_state *st, DLTensor *const *ts, const uint64_t *flags, int n, int64_t *shapes)
{
  char msg[1024];
  pthread_mutex_lock(&st->lock);
  int rc = luaptx_kernel_bind(k->K, ts, flags, n, shapes);
  if (rc) snprintf(msg, sizeof msg, "%s", luaptx_error(st->S));
  pthread_mutex_unlock(&st->lock);
  if (rc) bind_error(k, rc, msg);
  return rc ? -1 : 0;
}

/* Check the n tensors taken (inputs, then none or all outputs) through
 * luaptx_kernel_bind; shapes receives the outputs' shapes. */
static int bind(const py_kernel *k, py_state *st, const py_taken *tk, int n, int64_t *shapes)
{
  DLTensor *ts[MAX_TENSORS];
  uint64_t flags[MAX_TENSORS];
  for (int i = 0; i < n; i++) { ts[i] = tk[i].t; flags[i] = tk[i].flags; }
  return bind_tensors(k, st, ts, flags, n, shapes);
}

/* A shape as a tuple of ints. */
static PyObject *shape_tuple(const int64_t *dims, int nd)
{
  PyObject *shape = PyTuple_New(nd);
  for (int d = 0; shape && d < nd; d++) PyTuple_SetItem(shape, d, PyLong_FromLongLong(dims[d]));
  return shape;
}

/* The dims of one shape tuple into dims; -1 (a Python error set) when it
 * is not a tuple of at most MAX_DIMS ints. */
static int shape_of(const py_kernel *k, PyObject *shape, int i, int64_t *dims, int *ndim)
{
  if (!PyTuple_Check(shape) || PyTuple_Size(shape) > MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "kernel \"%s\" (%s): input %d's shape must be a tuple of at most %d ints", k->name, k->where, i + 1, MAX_DIMS);
    return -1;
  }
  *ndim = (int)PyTuple_Size(shape);
  for (int d = 0; d < *ndim; d++) {
    dims[d] = PyLong_AsLongLong(PyTuple_GetItem(shape, d));
    if (dims[d] == -1 && PyErr_Occurred()) return -1;
  }
  return 0;
}

/* bind_shapes(kernel, shapes, dtypes) -> the outputs' shapes: inputs given
 * by shape and DLPack dtype ((code, bits), or None: not checked) only, as
 * a tracer (JAX) knows them before any data exists, checked and bound by
 * luaptx_kernel_bind (LUAPTX_BIND_SHAPE_ONLY): the one binding launches use. */
static PyObject *py_bind_shapes(PyObject *self, PyObject *args)
{
  PyObject *cap, *shapes, *dtypes;
  (void)self;
  if (!PyArg_ParseTuple(args, "OO!O!", &cap, &PyTuple_Type, &shapes, &PyTuple_Type, &dtypes)) return NULL;
  py_kernel *k = kernel_of(cap);
  if (!k) return NULL;
  Py_ssize_t n = PyTuple_Size(shapes);
  if (n != PyTuple_Size(dtypes) || n > MAX_TENSORS)
    return PyErr_Format(PyExc_ValueError, "bind_shapes: %zd shapes, %zd dtypes (at most %d)", n, PyTuple_Size(dtypes), MAX_TENSORS);
  DLTensor ts[MAX_TENSORS], *tp[MAX_TENSORS];
  int64_t dims[MAX_TENSORS][MAX_DIMS], out[MAX_TENSORS * MAX_DIMS];
  uint64_t flags[MAX_TENSORS];
  memset(ts, 0, sizeof ts);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *dt = PyTuple_GetItem(dtypes, i);
    unsigned code = 0, bits = 0;
    if (dt != Py_None && !PyArg_ParseTuple(dt, "II", &code, &bits)) return NULL;
    if (shape_of(k, PyTuple_GetItem(shapes, i), (int)i, dims[i], &ts[i].ndim)) return NULL;
    ts[i].device.device_type = kDLCPU;
    ts[i].dtype.code = (uint8_t)code; ts[i].dtype.bits = (uint8_t)bits; ts[i].dtype.lanes = 1;
    ts[i].shape = dims[i];
    tp[i] = &ts[i];
    flags[i] = LUAPTX_BIND_SHAPE_ONLY;
  }
  if (bind_tensors(k, state_of(k->state), tp, flags, (int)n, out)) return NULL;
  PyObject *res = PyTuple_New(k->nout);
  for (int j = 0; res && j < k->nout; j++) {
    int nd = 0;
    while (nd < MAX_DIMS && out[j * MAX_DIMS + nd] >= 0) nd++;   /* -1 past the rank */
    PyObject *shape = shape_tuple(&out[j * MAX_DIMS], nd);
    if (!shape) { Py_DECREF(res); return NULL; }
    PyTuple_SetItem(res, j, shape);
  }
  return res;
}

/* Report an exchange API allocator's error as a Python exception. */
static void xc_set_error(void *ctx, const char *kind, const char *message)
{
  (void)ctx;
  PyErr_Format(PyExc_RuntimeError, "allocating an output (%s): %s", kind ? kind : "error", message ? message : "failed");
}

/* Allocate output j of shape dims (bound by luaptx_kernel_bind) like the
 * first tensor: through its type's exchange API when it has one (torch),
 * else alloc(dtype, shape, like). */
static PyObject *allocate(const py_kernel *k, int j, int64_t *dims, PyObject *alloc, PyObject *like, const DLTensor *first)
{
  const py_spec *s = &k->specs[k->nin + j];
  const dl_exchange_api *api = first ? exchange_api(like, NULL) : NULL;
  if (api && api->allocator && api->managed_to_py && s->code != 255) {
    DLTensor proto;
    memset(&proto, 0, sizeof proto);
    proto.device = first->device;
    proto.ndim = s->ndim;
    proto.dtype.code = s->code; proto.dtype.bits = s->bits; proto.dtype.lanes = 1;
    proto.shape = dims;
    DLManagedTensorVersioned *mt = NULL;
    void *out = NULL;
    if (api->allocator(&proto, &mt, NULL, xc_set_error) || api->managed_to_py(mt, &out)) return NULL;
    return out;
  }
  PyObject *shape = shape_tuple(dims, s->ndim);
  if (!shape) return NULL;
  PyObject *r = PyObject_CallFunction(alloc, "sOO", s->dtype, shape, like);
  Py_DECREF(shape);
  return r;
}

/* ------------------------------------------------------------- launch */

/* The outputs' shapes for the n inputs taken: the cached ones when the
 * inputs have the shapes of the last allocating launch, else bound by
 * luaptx_kernel_bind now (its checks' errors raised) and cached. */
static int out_shapes(py_kernel *k, py_state *st, const py_taken *tk, int n, int64_t *shapes)
{
  int hit = k->cached;
  for (int i = 0; hit && i < n; i++) {
    const DLTensor *t = tk[i].t;
    hit = t->ndim == k->cache_ndim[i] && (t->ndim == 0 || memcmp(t->shape, k->cache_in[i], (size_t)t->ndim * sizeof *t->shape) == 0);
  }
  size_t size = (size_t)k->nout * MAX_DIMS * sizeof *shapes;
  if (hit) { memcpy(shapes, k->cache_out, size); return 0; }
  k->cached = 0;
  if (bind(k, st, tk, n, shapes)) return -1;
  for (int i = 0; i < n; i++) {
    k->cache_ndim[i] = tk[i].t->ndim;
    if (tk[i].t->ndim) memcpy(k->cache_in[i], tk[i].t->shape, (size_t)tk[i].t->ndim * sizeof *shapes);
  }
  memcpy(k->cache_out, shapes, size);
  k->cached = 1;
  return 0;
}

/* Take the given tensors, allocate the missing outputs in the shapes the
 * inputs bind and take them; fills outs with the outputs. Given outputs
 * with DLPack flags (read-only, copied) are checked here; everything else
 * is checked by the launch itself (launch_error explains a refusal). */
static int gather(py_kernel *k, py_state *st, PyObject *tensors, PyObject *alloc, PyObject *stream, py_taken *tk, PyObject *outs)
{
  int n = (int)PyTuple_Size(tensors), total = k->nin + k->nout;
  int64_t shapes[MAX_TENSORS * MAX_DIMS];
  uint64_t flags = 0;
  for (int i = 0; i < total; i++) {
    if (i == n && out_shapes(k, st, tk, n, shapes)) return -1;   /* the inputs: the outputs' shapes */
    PyObject *obj = i < n ? PyTuple_GetItem(tensors, i)
                          : allocate(k, i - k->nin, shapes + (size_t)(i - k->nin) * MAX_DIMS, alloc, PyTuple_GetItem(tensors, 0), k->nin ? tk[0].t : NULL);
    if (!obj) return -1;
    if (i < n) Py_INCREF(obj);
    if (i >= k->nin) { Py_INCREF(obj); PyTuple_SetItem(outs, i - k->nin, obj); }
    int rc = take(obj, stream, &tk[i], i, k, i < n);
    Py_DECREF(obj);
    if (rc) return -1;
    flags |= tk[i].flags;
  }
  return n == total && flags ? bind(k, st, tk, n, NULL) : 0;
}

/* Raise a failed launch's error: the binding's TypeError or ValueError
 * naming the argument when the tensors fail its checks (the inputs
 * first when the outputs were allocated, as bound before allocating),
 * else the launch's LuaError. */
static void launch_error(py_kernel *k, py_state *st, const py_taken *tk, int given)
{
  char msg[1024];
  pthread_mutex_lock(&st->lock);
  snprintf(msg, sizeof msg, "%s", luaptx_error(st->S));
  pthread_mutex_unlock(&st->lock);
  if (given < k->nin + k->nout && bind(k, st, tk, k->nin, NULL)) return;
  if (bind(k, st, tk, k->nin + k->nout, NULL)) return;
  PyErr_SetString(LuaError, msg);
}

/* stream_fallback(tensor) -> CUstream int or None: the stream of a CUDA
 * tensor whose type has no exchange API (set by luaptx/__init__.py). */
static PyObject *stream_fallback;

/* set_stream_fallback(fn): set it. */
static PyObject *py_set_stream_fallback(PyObject *self, PyObject *fn)
{
  (void)self;
  PyObject *old = stream_fallback;
  Py_INCREF(fn);
  stream_fallback = fn;
  Py_XDECREF(old);
  Py_RETURN_NONE;
}

/* The producer's current stream for a CUDA tensor (torch's
 * current_stream, through the exchange API, else stream_fallback), or
 * NULL: the default stream. */
static int producer_stream(PyObject *obj, const DLTensor *t, void **stream)
{
  const dl_exchange_api *api = exchange_api(obj, NULL);
  *stream = NULL;
  if (api && api->current_stream) return api->current_stream(kDLCUDA, t->device.device_id, stream) ? -1 : 0;
  if (!stream_fallback || stream_fallback == Py_None) return 0;
  PyObject *r = PyObject_CallFunctionObjArgs(stream_fallback, obj, NULL);
  if (!r) return -1;
  if (r != Py_None) *stream = PyLong_AsVoidPtr(r);
  Py_DECREF(r);
  return PyErr_Occurred() ? -1 : 0;
}

/* Read the runtime scalars (a tuple, None for "the template value") into
 * vals and check them (luaptx_kernel_scalars): TypeError for a value of
 * the wrong type, ValueError otherwise, naming the kernel and the scalar. */
static int scalars_of(py_kernel *k, PyObject *tuple, luaptx_scalar *vals, int *n)
{
  *n = (int)PyTuple_Size(tuple);
  if (*n > LPX_BIND_SCALARS) { PyErr_Format(PyExc_TypeError, "kernel \"%s\": too many scalars", k->name); return -1; }
  for (int j = 0; j < *n; j++) {
    PyObject *v = PyTuple_GetItem(tuple, j);
    memset(&vals[j], 0, sizeof vals[j]);
    if (v == Py_None) continue;
    if (PyBool_Check(v)) { PyErr_Format(PyExc_TypeError, "kernel \"%s\" (%s): scalar %d is a bool; valid: an int or a float", k->name, k->where, j + 1); return -1; }
    if (PyIndex_Check(v)) {
      PyObject *i = PyNumber_Index(v);
      if (!i) return -1;
      int over = 0;
      long long x = PyLong_AsLongLongAndOverflow(i, &over);
      if (over > 0) { vals[j].kind = LUAPTX_SCALAR_UINT; vals[j].i = (int64_t)PyLong_AsUnsignedLongLong(i); }
      else { vals[j].kind = LUAPTX_SCALAR_INT; vals[j].i = x; }
      Py_DECREF(i);
      if (over < 0 || PyErr_Occurred()) {   /* beyond any integer type */
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "kernel \"%s\" (%s): scalar %d is %s; valid: an integer of 64 bits", k->name, k->where,
                     j + 1, over < 0 ? "below -2^63" : "above 2^64-1");
        return -1;
      }
      continue;
    }
    vals[j].kind = LUAPTX_SCALAR_FLOAT;
    vals[j].f = PyFloat_AsDouble(v);
    if (vals[j].f == -1.0 && PyErr_Occurred()) return -1;
  }
  py_state *st = state_of(k->state);
  char msg[1024];
  pthread_mutex_lock(&st->lock);
  int rc = luaptx_kernel_scalars(k->K, vals, *n);
  if (rc) snprintf(msg, sizeof msg, "%s", luaptx_error(st->S));
  pthread_mutex_unlock(&st->lock);
  if (rc) bind_error(k, rc, msg);
  return rc ? -1 : 0;
}

/* check_scalars(kernel, scalars): the checks of a launch's runtime scalars. */
static PyObject *py_check_scalars(PyObject *self, PyObject *args)
{
  PyObject *cap, *scalars;
  luaptx_scalar vals[LPX_BIND_SCALARS];
  int n;
  (void)self;
  if (!PyArg_ParseTuple(args, "OO!", &cap, &PyTuple_Type, &scalars)) return NULL;
  py_kernel *k = kernel_of(cap);
  if (!k || scalars_of(k, scalars, vals, &n)) return NULL;
  Py_RETURN_NONE;
}

/* launch(kernel, tensors, alloc, stream[, scalars]) -> tuple of the outputs. Given
 * the inputs only, the outputs are allocated like the first input (its
 * type's DLPack exchange API, else alloc(dtype, shape, first input));
 * stream: None (CUDA tensors: their producer's current stream, else the
 * default stream), or the CUDA stream as an int (also given to __dlpack__);
 * scalars: the runtime scalars (a tuple, None entries for template values). */
static PyObject *py_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
  luaptx_scalar vals[LPX_BIND_SCALARS];
  int nvals = 0;
  (void)self;
  /* METH_FASTCALL: no argument tuple, no format string, per call */
  if (nargs < 4 || nargs > 5 || !PyTuple_Check(args[1]) || (nargs == 5 && !PyTuple_Check(args[4])))
    return PyErr_Format(PyExc_TypeError, "launch(kernel, tensors tuple, alloc, stream[, scalars tuple])");
  PyObject *cap = args[0], *tensors = args[1], *alloc = args[2], *stream = args[3], *scalars = nargs == 5 ? args[4] : NULL;
  py_kernel *k = kernel_of(cap);
  if (!k) return NULL;
  if (scalars && scalars_of(k, scalars, vals, &nvals)) return NULL;
  py_state *st = state_of(k->state);
  Py_ssize_t n = PyTuple_Size(tensors);
  int total = k->nin + k->nout;
  if (n != total && !(n == k->nin && alloc != Py_None)) {
    PyErr_Format(PyExc_TypeError, "kernel \"%s\" (%s) takes %d input(s), then %d output(s) (left out: allocated and returned); got %zd tensor(s)",
                 k->name, k->where, k->nin, k->nout, n);
    return NULL;
  }
  py_taken tk[MAX_TENSORS];
  for (int i = 0; i < total; i++) memset(&tk[i], 0, offsetof(py_taken, own));
  PyObject *outs = PyTuple_New(k->nout);
  int rc = outs ? gather(k, st, tensors, alloc, stream, tk, outs) : -1;
  void *s = NULL;
  if (rc == 0 && stream != Py_None) s = PyLong_AsVoidPtr(stream);
  else if (rc == 0 && total && tk[0].t->device.device_type == kDLCUDA) rc = producer_stream(PyTuple_GetItem(tensors, 0), tk[0].t, &s);
  if (rc == 0) {
    DLTensor *ts[MAX_TENSORS];
    for (int i = 0; i < total; i++) ts[i] = tk[i].t;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&st->lock);
    rc = nvals ? luaptx_launch_dlpack_scalars(k->K, ts, total, vals, nvals, s) : luaptx_launch_dlpack(k->K, ts, total, s);
    pthread_mutex_unlock(&st->lock);
    Py_END_ALLOW_THREADS
    if (rc) launch_error(k, st, tk, (int)n);
  }
  for (int i = 0; i < total; i++) release(&tk[i]);
  if (rc) { Py_XDECREF(outs); return NULL; }
  return outs;
}



/* c_launch_times(kernel, tensors, iters) -> list of the C API launch's
 * time per call in seconds, the tensors taken once: the baseline that
 * bench/python_overhead.py subtracts. */
static PyObject *py_c_launch_times(PyObject *self, PyObject *args)
{
  PyObject *cap, *tensors;
  int iters;
  (void)self;
  if (!PyArg_ParseTuple(args, "OO!i", &cap, &PyTuple_Type, &tensors, &iters)) return NULL;
  py_kernel *k = kernel_of(cap);
  if (!k) return NULL;
  int total = k->nin + k->nout;
  if (PyTuple_Size(tensors) != total || iters < 1) return PyErr_Format(PyExc_ValueError, "c_launch_times: give all %d tensors and iters >= 1", total);
  py_taken tk[MAX_TENSORS];
  memset(tk, 0, sizeof tk);
  PyObject *outs = PyTuple_New(k->nout), *times = PyList_New(iters);
  int rc = outs && times ? gather(k, k->st, tensors, Py_None, Py_None, tk, outs) : -1;
  DLTensor *ts[MAX_TENSORS];
  for (int i = 0; i < total && rc == 0; i++) ts[i] = tk[i].t;
  for (int i = 0; i < iters && rc == 0; i++) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    rc = luaptx_launch_dlpack(k->K, ts, total, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    PyList_SetItem(times, i, PyFloat_FromDouble((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9));
    if (rc) lua_fail(k->st);
  }
  for (int i = 0; i < total; i++) release(&tk[i]);
  Py_XDECREF(outs);
  if (rc) { Py_XDECREF(times); return NULL; }
  return times;
}

/* ---------------------------------------------------------- XLA's FFI
 * Built when jax's headers were found at build time (setup.py defines
 * LUAPTX_XLA): handlers for jax.ffi.ffi_call. The string attribute
 * "kernel" is a key of the XLA registry (above); operands then
 * results are the kernel's tensors, launched on the emulator (cpu) or on
 * XLA's CUDA stream. */
#ifdef LUAPTX_XLA
#include "xla/ffi/api/c_api.h"

static const struct { XLA_FFI_DataType xla; uint8_t code, bits; } XLA_TYPES[] = {
  { XLA_FFI_DataType_F16, kDLFloat, 16 }, { XLA_FFI_DataType_F32, kDLFloat, 32 }, { XLA_FFI_DataType_F64, kDLFloat, 64 },
  { XLA_FFI_DataType_BF16, kDLBfloat, 16 }, { XLA_FFI_DataType_S8, kDLInt, 8 }, { XLA_FFI_DataType_S16, kDLInt, 16 },
  { XLA_FFI_DataType_S32, kDLInt, 32 }, { XLA_FFI_DataType_S64, kDLInt, 64 }, { XLA_FFI_DataType_U8, kDLUInt, 8 },
  { XLA_FFI_DataType_U16, kDLUInt, 16 }, { XLA_FFI_DataType_U32, kDLUInt, 32 }, { XLA_FFI_DataType_U64, kDLUInt, 64 },
};

/* An XLA error with a message (copied by XLA). */
static XLA_FFI_Error *xla_error(const XLA_FFI_Api *api, const char *msg)
{
  XLA_FFI_Error_Create_Args a = { XLA_FFI_Error_Create_Args_STRUCT_SIZE, NULL, msg, XLA_FFI_Error_Code_INVALID_ARGUMENT };
  return api->XLA_FFI_Error_Create(&a);
}

/* A DLTensor viewing an XLA buffer on device type dev. */
static int xla_tensor(const XLA_FFI_Buffer *b, int dev, DLTensor *t)
{
  memset(t, 0, sizeof *t);
  t->data = b->data;
  t->device.device_type = dev;
  t->ndim = (int32_t)b->rank;
  t->shape = b->dims;
  t->dtype.lanes = 1;
  for (size_t i = 0; i < sizeof XLA_TYPES / sizeof *XLA_TYPES; i++)
    if (XLA_TYPES[i].xla == b->dtype) { t->dtype.code = XLA_TYPES[i].code; t->dtype.bits = XLA_TYPES[i].bits; return 0; }
  t->dtype.code = 255;
  return 0;
}

/* The string attribute `name` ("kernel", "batched"): its bytes, or NULL. */
static const XLA_FFI_ByteSpan *xla_attr(const XLA_FFI_Attrs *at, const char *name)
{
  size_t len = strlen(name);
  for (int64_t i = 0; i < at->size; i++) {
    const XLA_FFI_ByteSpan *n = at->names[i];
    if (at->types[i] == XLA_FFI_AttrType_STRING && n->len == len && memcmp(n->ptr, name, len) == 0) return at->attrs[i];
  }
  return NULL;
}

/* The registered kernel the attribute `name` names for device type dev;
 * NULL with *err set (a missing attribute, or a key not registered). */
static py_kernel *xla_kernel(const XLA_FFI_Api *api, const XLA_FFI_Attrs *at, const char *name, int dev, XLA_FFI_Error **err)
{
  const XLA_FFI_ByteSpan *key = xla_attr(at, name);
  py_kernel *k = key ? xla_find(key->ptr, key->len, dev) : NULL;
  if (k) return k;
  char msg[512];
  if (!key) snprintf(msg, sizeof msg, "luaptx: the ffi_call has no %s attribute (call it through luaptx.jax.call)", name);
  else snprintf(msg, sizeof msg, "luaptx: kernel %.*s is not loaded for the %s platform in this process: load its script "
                "(luaptx.load, device=\"%s\") and register the kernel (luaptx.jax.register(kernel, **params))",
                (int)(key->len > 300 ? 300 : key->len), key->ptr, dev == kDLCUDA ? "CUDA" : "cpu", dev == kDLCUDA ? "cuda" : "emu");
  *err = xla_error(api, msg);
  return NULL;
}

/* The runtime scalars of k from the scalar attributes "scalar_NAME"
 * (luaptx.jax.call sets them) into vals; an error for a missing one. */
static XLA_FFI_Error *xla_scalars(const XLA_FFI_Api *api, const XLA_FFI_Attrs *at, const py_kernel *k, luaptx_scalar *vals)
{
  for (int j = 0; j < k->nscalars; j++) {
    char name[SYM_LEN + 8];
    int len = snprintf(name, sizeof name, "scalar_%s", k->scalars[j]);
    const XLA_FFI_Scalar *v = NULL;
    for (int64_t i = 0; i < at->size && !v; i++)
      if (at->types[i] == XLA_FFI_AttrType_SCALAR && at->names[i]->len == (size_t)len && memcmp(at->names[i]->ptr, name, (size_t)len) == 0) v = at->attrs[i];
    memset(&vals[j], 0, sizeof vals[j]);
    if (!v) continue;                        /* its template value, if any (the launch says when none) */
    switch (v->dtype) {
    case XLA_FFI_DataType_S8: vals[j].kind = LUAPTX_SCALAR_INT; vals[j].i = *(int8_t *)v->value; break;
    case XLA_FFI_DataType_S16: vals[j].kind = LUAPTX_SCALAR_INT; vals[j].i = *(int16_t *)v->value; break;
    case XLA_FFI_DataType_S32: vals[j].kind = LUAPTX_SCALAR_INT; vals[j].i = *(int32_t *)v->value; break;
    case XLA_FFI_DataType_S64: vals[j].kind = LUAPTX_SCALAR_INT; vals[j].i = *(int64_t *)v->value; break;
    case XLA_FFI_DataType_U8: vals[j].kind = LUAPTX_SCALAR_UINT; vals[j].i = *(uint8_t *)v->value; break;
    case XLA_FFI_DataType_U16: vals[j].kind = LUAPTX_SCALAR_UINT; vals[j].i = *(uint16_t *)v->value; break;
    case XLA_FFI_DataType_U32: vals[j].kind = LUAPTX_SCALAR_UINT; vals[j].i = *(uint32_t *)v->value; break;
    case XLA_FFI_DataType_U64: vals[j].kind = LUAPTX_SCALAR_UINT; vals[j].i = (int64_t)*(uint64_t *)v->value; break;
    case XLA_FFI_DataType_F32: vals[j].kind = LUAPTX_SCALAR_FLOAT; vals[j].f = *(float *)v->value; break;
    case XLA_FFI_DataType_F64: vals[j].kind = LUAPTX_SCALAR_FLOAT; vals[j].f = *(double *)v->value; break;
    default: return xla_error(api, "luaptx: a scalar attribute of an unsupported type (valid: integers, f32, f64)");
    }
  }
  return NULL;
}

/* Fold the leading `extra` dims of t (vmap's batch dims, row-major) into
 * one, so that a batched kernel sees (V, dims...): shape kept in dims. */
static void xla_fold(DLTensor *t, int extra, int64_t *dims)
{
  int64_t v = 1;
  for (int d = 0; d < extra; d++) v *= t->shape[d];
  dims[0] = v;
  for (int d = extra; d < t->ndim; d++) dims[d - extra + 1] = t->shape[d];
  t->ndim -= extra - 1;
  t->shape = dims;
}

/* Answer XLA's metadata query (the API version this handler speaks). */
static int xla_metadata(XLA_FFI_CallFrame *f)
{
  XLA_FFI_Extension_Base *e = f->extension_start;
  if (!e || e->type != XLA_FFI_Extension_Metadata) return 0;
  XLA_FFI_Metadata *m = ((XLA_FFI_Metadata_Extension *)e)->metadata;
  m->api_version.major_version = XLA_FFI_API_MAJOR;
  m->api_version.minor_version = XLA_FFI_API_MINOR;
  m->traits = 0;
  return 1;
}

/* The handler for device type dev: launch the kernel on the buffers.
 * Operands of a higher rank than the kernel's in_specs come from
 * jax.vmap (vmap_method "broadcast_all": every operand and result gains
 * the batch dims in front): their batch dims are folded into one leading
 * dim and the "batched" kernel runs once on them, its grid covering the
 * batch. */
static XLA_FFI_Error *xla_launch(XLA_FFI_CallFrame *f, int dev)
{
  if (xla_metadata(f) || f->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  const XLA_FFI_Api *api = f->api;
  XLA_FFI_Error *err = NULL;
  py_kernel *k = xla_kernel(api, &f->attrs, "kernel", dev, &err);
  int64_t n = f->args.size + f->rets.size;
  if (!k) return err;
  if (n > MAX_TENSORS) return xla_error(api, "luaptx: too many buffers");
  DLTensor ts[MAX_TENSORS], *tp[MAX_TENSORS];
  int64_t folded[MAX_TENSORS][MAX_DIMS + 1];
  for (int64_t i = 0; i < n; i++) {
    xla_tensor(i < f->args.size ? f->args.args[i] : f->rets.rets[i - f->args.size], dev, &ts[i]);
    tp[i] = &ts[i];
  }
  int extra = n && k->nin ? ts[0].ndim - k->specs[0].ndim : 0;
  if (extra > 0) {
    if (!xla_attr(&f->attrs, "batched")) return xla_error(api, "luaptx: batched operands but no batched kernel (luaptx.jax.call(..., batched=...))");
    py_kernel *kb = xla_kernel(api, &f->attrs, "batched", dev, &err);
    if (!kb) return err;
    for (int64_t i = 0; i < n; i++) {
      if (ts[i].ndim < extra || ts[i].ndim - extra + 1 > MAX_DIMS) return xla_error(api, "luaptx: a batched operand has too few or too many dims");
      xla_fold(&ts[i], extra, folded[i]);
    }
    k = kb;
  }
  void *stream = NULL;
  if (dev == kDLCUDA) {
    XLA_FFI_Stream_Get_Args sa = { XLA_FFI_Stream_Get_Args_STRUCT_SIZE, NULL, f->ctx, NULL };
    XLA_FFI_Error *e = api->XLA_FFI_Stream_Get(&sa);
    if (e) return e;
    stream = sa.stream;
  }
  luaptx_scalar vals[LPX_BIND_SCALARS];
  if (k->nscalars && (err = xla_scalars(api, &f->attrs, k, vals))) return err;
  py_state *st = state_of_unchecked(k);
  pthread_mutex_lock(&st->lock);
  if (luaptx_launch_dlpack_scalars(k->K, tp, (int)n, vals, k->nscalars, stream)) err = xla_error(api, luaptx_error(st->S));
  pthread_mutex_unlock(&st->lock);
  return err;
}

static XLA_FFI_Error *xla_cpu(XLA_FFI_CallFrame *f) { return xla_launch(f, kDLCPU); }
static XLA_FFI_Error *xla_cuda(XLA_FFI_CallFrame *f) { return xla_launch(f, kDLCUDA); }

/* xla_handlers() -> (cpu capsule, cuda capsule) for jax.ffi.register_ffi_target. */
static PyObject *py_xla_handlers(PyObject *self, PyObject *args)
{
  (void)self; (void)args;
  return Py_BuildValue("(NN)", PyCapsule_New((void *)xla_cpu, NULL, NULL), PyCapsule_New((void *)xla_cuda, NULL, NULL));
}
#define XLA_METHOD { "xla_handlers", py_xla_handlers, METH_NOARGS, "xla_handlers() -> (cpu, cuda) FFI handler capsules" },
#else
#define XLA_METHOD
#endif

/* ---------------------------------------------------------- the module */

static PyMethodDef METHODS[] = {
  { "open", py_open, METH_VARARGS, "open(device, lua_path, cache_dir, quiet) -> state" },
  { "load", py_load, METH_VARARGS, "load(state, path_or_chunk, chunkname or None)" },
  { "names", py_names, METH_VARARGS, "names(state) -> comma-separated kernel names" },
  { "device", py_device, METH_VARARGS, "device(state) -> the device's description" },
  { "kernel", py_kernel_get, METH_VARARGS, "kernel(state, name, params) -> kernel" },
  { "ptx", py_ptx, METH_VARARGS, "ptx(kernel) -> PTX text" },
  { "tune", py_tune, METH_VARARGS, "tune(kernel, request JSON) -> result JSON (luaptx_kernel_tune)" },
  { "specs", py_specs, METH_VARARGS, "specs(kernel) -> the boundary as text" },
  { "check", py_check, METH_VARARGS, "check(kernel) -> ptxas's report as key=value lines" },
  { "xla_register", py_xla_register, METH_VARARGS, "xla_register(key, kernel) -> 'cpu' or 'cuda': the kernel XLA's handler runs for key" },
  { "launch", (PyCFunction)(void (*)(void))py_launch, METH_FASTCALL, "launch(kernel, tensors, alloc, stream[, scalars]) -> outputs" },
  { "bind_shapes", py_bind_shapes, METH_VARARGS, "bind_shapes(kernel, shapes, dtypes) -> the outputs' shapes (luaptx_kernel_bind, shapes only)" },
  { "check_scalars", py_check_scalars, METH_VARARGS, "check_scalars(kernel, scalars): TypeError/ValueError for a bad runtime scalar" },
  { "set_stream_fallback", py_set_stream_fallback, METH_O, "set_stream_fallback(fn): fn(cuda_tensor) -> CUstream int or None, for types without the DLPack C exchange API" },
  { "c_launch_times", py_c_launch_times, METH_VARARGS, "c_launch_times(kernel, tensors, iters) -> seconds per C launch" },
  XLA_METHOD
  { NULL, NULL, 0, NULL },
};

static struct PyModuleDef MODULE = { PyModuleDef_HEAD_INIT, "luaptx._core", "luaptx's C extension over luaptx.h", -1, METHODS, NULL, NULL, NULL, NULL };

/* Module init: the functions and LuaError. */
PyMODINIT_FUNC PyInit__core(void)
{
  PyObject *m = PyModule_Create(&MODULE);
  if (!m) return NULL;
  s_dlpack = PyUnicode_InternFromString("__dlpack__");
  s_xc_attr = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  s_requires_grad = PyUnicode_InternFromString("requires_grad");
  s_empty = PyTuple_New(0);
  s_kw_versioned = Py_BuildValue("{s(ii)}", "max_version", 1, 0);
  if (!s_dlpack || !s_xc_attr || !s_requires_grad || !s_empty || !s_kw_versioned) { Py_DECREF(m); return NULL; }
  LuaError = PyErr_NewExceptionWithDoc("luaptx.LuaError", "An error raised by Lua (the kernel script, tracing, the device), with its message.", PyExc_RuntimeError, NULL);
  if (!LuaError || PyModule_AddObject(m, "LuaError", LuaError)) { Py_DECREF(m); return NULL; }
  if (PyModule_AddStringConstant(m, "version", LUAPTX_VERSION)) { Py_DECREF(m); return NULL; }
  Py_INCREF(LuaError);
  return m;
}
