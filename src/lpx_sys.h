/* luaptx system layer: running programs from an argv (never through a
 * shell) and creating files and directories nobody else can tamper with.
 * Handed to LuaJIT's ffi.cdef like lpx_core.h: plain one-line declarations. */
#ifndef LPX_SYS_H
#define LPX_SYS_H
#include "lpx_core.h"

typedef struct lpx_proc lpx_proc;
typedef struct lpx_fs_out lpx_fs_out;

/* What lpx_fs_kind reports for a path (never following a final symlink). */
enum { LPX_FS_MISSING = 0, LPX_FS_FILE = 1, LPX_FS_DIR = 2, LPX_FS_LINK = 3, LPX_FS_OTHER = 4 };

lpx_proc *lpx_proc_run(lpx_ctx *ctx, const char *const *argv, const char *const *env, const char *cwd, const char *input, size_t input_len, int merge_stderr, double timeout_s);
int lpx_proc_status(const lpx_proc *p);
int lpx_proc_timed_out(const lpx_proc *p);
const char *lpx_proc_output(const lpx_proc *p, int stream, size_t *len);
void lpx_proc_free(lpx_proc *p);

int lpx_fs_kind(const char *path);
int lpx_fs_mkdirs(lpx_ctx *ctx, const char *path, int mode);
int lpx_fs_private_dir(lpx_ctx *ctx, const char *path);
int lpx_fs_trusted_parents(lpx_ctx *ctx, const char *path);
int lpx_fs_trusted_code(lpx_ctx *ctx, const char *path);
int lpx_fs_write_file(lpx_ctx *ctx, const char *path, const char *data, size_t len, int mode);
int lpx_fs_temp_file(lpx_ctx *ctx, const char *suffix, const char *data, size_t len, char *path, size_t cap);
int lpx_fs_temp_dir(lpx_ctx *ctx, char *path, size_t cap);
int lpx_fs_exe_dir(lpx_ctx *ctx, char *path, size_t cap);
int lpx_fs_real_path(lpx_ctx *ctx, const char *path, char *out, size_t cap);
int lpx_fs_remove_tree(lpx_ctx *ctx, const char *path);
int lpx_fs_open_regular(lpx_ctx *ctx, const char *path, int check_owner);
int lpx_fs_out_check(lpx_ctx *ctx, const char *path);
lpx_fs_out *lpx_fs_out_open(lpx_ctx *ctx, const char *path);
void lpx_fs_out_write(lpx_fs_out *o, const char *data, size_t len);
int lpx_fs_out_close(lpx_ctx *ctx, lpx_fs_out *o, int commit);
int lpx_fs_write_output(lpx_ctx *ctx, const char *path, const char *data, size_t len);
char *lpx_fs_read_file(lpx_ctx *ctx, const char *path, size_t *len);
void lpx_fs_free(char *buf);
double lpx_clock_ms(void);
int32_t lpx_cpu_count(void);
int32_t lpx_cgroup_cpus(const char *root, const char *rel);
int32_t lpx_cgroup1_cpus(const char *root, const char *rel);
int64_t lpx_cgroup_memory(const char *root, const char *rel);
int64_t lpx_host_memory(void);

#endif
