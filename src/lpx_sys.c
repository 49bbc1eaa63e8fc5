/* The system layer: programs run from an argv with posix_spawn (no shell
 * ever parses a path), their output captured through pipes; files written
 * atomically with O_EXCL temporaries; private directories checked for
 * owner and mode; reads that refuse links, FIFOs and devices. */
#define _GNU_SOURCE
#include "lpx_sys.h"
#include "lpx_internal.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct lpx_proc {
  lpx_buf out[2];      /* standard output, standard error */
  int status;          /* exit code, or 128 + signal */
  int timed_out;
};

/* ============================================================ processes */

/* Does environment entry e set the variable that edit names? */
static int env_same_name(const char *e, const char *edit)
{
  size_t n = strcspn(edit, "=");
  return strncmp(e, edit, n) == 0 && e[n] == '=';
}

/* The child's environment: ours, minus every name an edit mentions, plus
 * the edits of the form NAME=VALUE (a bare NAME unsets). */
static char **env_build(const char *const *edits)
{
  size_t n = 0, m = 0, k = 0;
  while (environ && environ[n]) n++;
  while (edits && edits[m]) m++;
  char **out = malloc((n + m + 1) * sizeof *out);
  if (!out) return NULL;
  for (size_t i = 0; i < n; i++) {
    size_t j = 0;
    while (j < m && !env_same_name(environ[i], edits[j])) j++;
    if (j == m) out[k++] = environ[i];
  }
  for (size_t j = 0; j < m; j++)
    if (strchr(edits[j], '=')) out[k++] = (char *)edits[j];
  out[k] = NULL;
  return out;
}

/* Spawn attributes: default signal dispositions and an empty mask in the
 * child; its own process group when it may have to be killed as a whole. */
static void spawn_attrs(posix_spawnattr_t *a, int own_group)
{
  sigset_t none, dflt;
  sigemptyset(&none);
  sigemptyset(&dflt);
  sigaddset(&dflt, SIGPIPE);
  sigaddset(&dflt, SIGINT);
  sigaddset(&dflt, SIGQUIT);
  sigaddset(&dflt, SIGTERM);
  posix_spawnattr_init(a);
  posix_spawnattr_setsigmask(a, &none);
  posix_spawnattr_setsigdefault(a, &dflt);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (own_group) { flags |= POSIX_SPAWN_SETPGROUP; posix_spawnattr_setpgroup(a, 0); }
  posix_spawnattr_setflags(a, flags);
}

/* Start argv with pipes[0] as its stdin and pipes[1]/[2] for its output. */
static int proc_spawn(lpx_ctx *ctx, const char *const *argv, const char *const *env, const char *cwd,
                      int pipes[3][2], int merge, int own_group, pid_t *pid)
{
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  char **envp = env_build(env);
  if (!envp) return lpx_fail(ctx, "out of memory");
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipes[0][0], 0);
  posix_spawn_file_actions_adddup2(&fa, pipes[1][1], 1);
  posix_spawn_file_actions_adddup2(&fa, merge ? pipes[1][1] : pipes[2][1], 2);
  if (cwd && cwd[0]) posix_spawn_file_actions_addchdir_np(&fa, cwd);
  spawn_attrs(&attr, own_group);
  int rc = posix_spawnp(pid, argv[0], &fa, &attr, (char *const *)argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  free(envp);
  if (rc == 0) return 0;
  if (cwd && cwd[0] && rc == ENOENT && lpx_fs_kind(cwd) != LPX_FS_DIR)
    return lpx_fail(ctx, "cannot run %s: the working directory %s does not exist", argv[0], cwd);
  return lpx_fail(ctx, "cannot run %s: %s", argv[0], strerror(rc));
}

/* Close both ends of the three pipes (those still open). */
static void pipes_close(int pipes[3][2])
{
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++)
      if (pipes[i][j] >= 0) { close(pipes[i][j]); pipes[i][j] = -1; }
}

/* Milliseconds left until deadline (a CLOCK_MONOTONIC second count), or -1 for none. */
static int ms_left(double deadline)
{
  if (deadline <= 0) return -1;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double left = deadline - ((double)ts.tv_sec + ts.tv_nsec * 1e-9);
  return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* Read what fd has into b; close it at end of file. */
static void pump_read(struct pollfd *pf, lpx_buf *b)
{
  char chunk[16384];
  ssize_t got = read(pf->fd, chunk, sizeof chunk);
  if (got > 0) { lpx_buf_put(b, chunk, (size_t)got); return; }
  if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
  close(pf->fd);
  pf->fd = -1;
}

/* Write the next part of the input; close the pipe when done or refused. */
static void pump_write(struct pollfd *pf, const char *input, size_t len, size_t *done)
{
  ssize_t put = *done < len ? write(pf->fd, input + *done, len - *done) : 0;
  if (put > 0) *done += (size_t)put;
  if (put < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (put <= 0 || *done >= len) { close(pf->fd); pf->fd = -1; }
}

/* Feed the input and collect the output until both outputs close or the
 * deadline passes; returns 1 on time-out. */
static int proc_pump(lpx_proc *p, struct pollfd pf[3], const char *input, size_t len, double deadline)
{
  size_t done = 0;
  while (pf[0].fd >= 0 || pf[1].fd >= 0 || pf[2].fd >= 0) {
    int rc = poll(pf, 3, ms_left(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return rc == 0;
    if (pf[0].fd >= 0 && pf[0].revents) pump_write(&pf[0], input, len, &done);
    for (int i = 1; i < 3; i++)
      if (pf[i].fd >= 0 && pf[i].revents) pump_read(&pf[i], &p->out[i - 1]);
  }
  return 0;
}

/* Wait for the child and record its status (128 + signal when killed). */
static void proc_reap(lpx_proc *p, pid_t pid)
{
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  p->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

/* Make the three pipes, close-on-exec (dup2 in the child clears it). */
static int pipes_open(lpx_ctx *ctx, int pipes[3][2])
{
  for (int i = 0; i < 3; i++) {
    if (pipe2(pipes[i], O_CLOEXEC) == 0) continue;
    pipes_close(pipes);
    return lpx_fail(ctx, "cannot create a pipe: %s", strerror(errno));
  }
  fcntl(pipes[0][1], F_SETFL, O_NONBLOCK);
  return 0;
}

/* The absolute CLOCK_MONOTONIC time timeout_s from now (0: no deadline). */
static double deadline_after(double timeout_s)
{
  if (!(timeout_s > 0)) return 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9 + timeout_s;
}

/* Run a program to completion: argv[0] is searched on PATH when it has no
 * '/'; env edits apply on top of our environment; stdin gets input; stdout
 * and stderr are captured (merged when merge_stderr); timeout_s > 0 kills
 * the program's process group when it runs longer. NULL when it cannot start. */
lpx_proc *lpx_proc_run(lpx_ctx *ctx, const char *const *argv, const char *const *env, const char *cwd,
                       const char *input, size_t input_len, int merge_stderr, double timeout_s)
{
  if (!argv || !argv[0] || !argv[0][0]) { lpx_fail(ctx, "cannot run a program: empty argument list"); return NULL; }
  lpx_proc *p = calloc(1, sizeof *p);
  int pipes[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
  if (!p) { lpx_fail(ctx, "out of memory"); return NULL; }
  if (pipes_open(ctx, pipes)) { free(p); return NULL; }
  sigset_t pipe_sig, old;
  sigemptyset(&pipe_sig);
  sigaddset(&pipe_sig, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_sig, &old);
  pid_t pid;
  int own_group = timeout_s > 0;
  if (proc_spawn(ctx, argv, env, cwd, pipes, merge_stderr, own_group, &pid)) {
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pipes_close(pipes);
    free(p);
    return NULL;
  }
  struct pollfd pf[3] = { { pipes[0][1], POLLOUT, 0 }, { pipes[1][0], POLLIN, 0 }, { pipes[2][0], POLLIN, 0 } };
  close(pipes[0][0]); close(pipes[1][1]); close(pipes[2][1]);
  if (input_len == 0) { close(pf[0].fd); pf[0].fd = -1; }
  if (merge_stderr) { close(pf[2].fd); pf[2].fd = -1; }
  p->timed_out = proc_pump(p, pf, input, input_len, deadline_after(timeout_s));
  if (p->timed_out) kill(own_group ? -pid : pid, SIGKILL);
  for (int i = 0; i < 3; i++) if (pf[i].fd >= 0) close(pf[i].fd);
  proc_reap(p, pid);
  struct timespec zero = { 0, 0 };
  while (sigtimedwait(&pipe_sig, NULL, &zero) > 0) {}
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return p;
}

/* The program's exit code (128 + signal when a signal ended it). */
int lpx_proc_status(const lpx_proc *p) { return p->status; }

/* Did the program run past its time limit (and was killed)? */
int lpx_proc_timed_out(const lpx_proc *p) { return p->timed_out; }

/* What the program wrote: stream 1 its standard output, 2 its standard error. */
const char *lpx_proc_output(const lpx_proc *p, int stream, size_t *len)
{
  const lpx_buf *b = &p->out[stream == 2 ? 1 : 0];
  if (len) *len = b->n;
  return b->p ? b->p : "";
}

/* Release a finished program's record. */
void lpx_proc_free(lpx_proc *p)
{
  if (!p) return;
  lpx_buf_free(&p->out[0]);
  lpx_buf_free(&p->out[1]);
  free(p);
}

/* ============================================================ files */

/* What path is, without following a final symbolic link. */
int lpx_fs_kind(const char *path)
{
  struct stat st;
  if (lstat(path, &st) != 0) return LPX_FS_MISSING;
  if (S_ISLNK(st.st_mode)) return LPX_FS_LINK;
  if (S_ISDIR(st.st_mode)) return LPX_FS_DIR;
  return S_ISREG(st.st_mode) ? LPX_FS_FILE : LPX_FS_OTHER;
}

/* mkdir one component; an existing directory (or link to one) is fine. */
static int mkdir_one(lpx_ctx *ctx, const char *path, int mode)
{
  struct stat st;
  if (mkdir(path, (mode_t)mode) == 0) return 0;
  if (errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
  if (errno == EEXIST) return lpx_fail(ctx, "cannot create directory %s: it exists and is not a directory", path);
  return lpx_fail(ctx, "cannot create directory %s: %s", path, strerror(errno));
}

/* Create path and its missing parents with mode (like mkdir -p, no shell). */
int lpx_fs_mkdirs(lpx_ctx *ctx, const char *path, int mode)
{
  char buf[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return lpx_fail(ctx, "cannot create directory: bad path length (%zu bytes)", n);
  memcpy(buf, path, n + 1);
  while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
  for (char *s = buf + 1; *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    int rc = mkdir_one(ctx, buf, mode);
    *s = '/';
    if (rc) return rc;
  }
  return mkdir_one(ctx, buf, mode);
}

/* Why st (of path) is not safe to trust as ours, or NULL when it is. */
static const char *untrusted_why(const struct stat *st)
{
  if (st->st_uid != geteuid()) return "it is owned by another user";
  if (st->st_mode & (S_IWGRP | S_IWOTH)) return "it is writable by group or others";
  return NULL;
}

/* Why st lets a user other than us (or root) change the code it holds, or
 * NULL: it must be ours or root's, and writable by no one else (a group
 * may write it only when that group is our own primary group). */
static const char *code_why(const struct stat *st)
{
  if (st->st_uid != geteuid() && st->st_uid != 0) return "it is owned by another user";
  if (st->st_mode & S_IWOTH) return "it is writable by others";
  if ((st->st_mode & S_IWGRP) && st->st_gid != getegid()) return "it is writable by its group";
  return NULL;
}

/* Check that the file or directory at path (links followed) is safe to
 * load code from: nobody but us or root can change it. */
int lpx_fs_trusted_code(lpx_ctx *ctx, const char *path)
{
  struct stat st;
  if (stat(path, &st) != 0) return lpx_fail(ctx, "%s cannot be examined: %s", path, strerror(errno));
  const char *why = code_why(&st);
  return why ? lpx_fail(ctx, "%s: %s", path, why) : 0;
}

/* Create (0700) or check a directory only we may write: not a link, ours,
 * not writable by group or others. */
int lpx_fs_private_dir(lpx_ctx *ctx, const char *path)
{
  struct stat st;
  if (lpx_fs_mkdirs(ctx, path, 0700)) return -1;
  if (lstat(path, &st) != 0) return lpx_fail(ctx, "cannot use directory %s: %s", path, strerror(errno));
  if (S_ISLNK(st.st_mode)) return lpx_fail(ctx, "refusing directory %s: it is a symbolic link", path);
  if (!S_ISDIR(st.st_mode)) return lpx_fail(ctx, "refusing directory %s: it is not a directory", path);
  const char *why = untrusted_why(&st);
  if (why) return lpx_fail(ctx, "refusing directory %s: %s (it must be yours, mode 0700)", path, why);
  return 0;
}

/* Why an ancestor directory st lets another user swap what lies below it,
 * or NULL: it must be ours or root's, and writable by group or others only
 * when sticky (like /tmp, where nobody may rename another's entries). */
static const char *ancestor_why(const struct stat *st)
{
  if (st->st_uid != geteuid() && st->st_uid != 0) return "it is owned by another user";
  if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX)) return "it is writable by group or others";
  return NULL;
}

/* Check one ancestor: a link must be ours or root's, and the directory it
 * names (or it is) must pass ancestor_why. */
static int check_ancestor(lpx_ctx *ctx, const char *dir, const char *path)
{
  struct stat ls, st;
  if (lstat(dir, &ls) != 0 || stat(dir, &st) != 0)
    return lpx_fail(ctx, "refusing directory %s: its parent %s cannot be examined: %s", path, dir, strerror(errno));
  const char *why = S_ISLNK(ls.st_mode) && ls.st_uid != geteuid() && ls.st_uid != 0
                  ? "it is a symbolic link owned by another user" : ancestor_why(&st);
  if (why) return lpx_fail(ctx, "refusing directory %s: its parent %s could let another user replace it: %s", path, dir, why);
  return 0;
}

/* Check that no other user can replace path by renaming or relinking one
 * of its ancestors (as ssh checks the directories above ~/.ssh). */
int lpx_fs_trusted_parents(lpx_ctx *ctx, const char *path)
{
  char buf[PATH_MAX], cwd[PATH_MAX];
  int n = path[0] == '/' ? snprintf(buf, sizeof buf, "%s", path)
        : getcwd(cwd, sizeof cwd) ? snprintf(buf, sizeof buf, "%s/%s", cwd, path) : -1;
  if (n < 0 || (size_t)n >= sizeof buf) return lpx_fail(ctx, "refusing directory %s: its absolute path cannot be formed", path);
  if (check_ancestor(ctx, "/", path)) return -1;
  for (char *s = buf + 1; *s; s++) {
    if (*s != '/' || s[-1] == '/' || !s[1]) continue;
    *s = '\0';
    int rc = check_ancestor(ctx, buf, path);
    *s = '/';
    if (rc) return rc;
  }
  return 0;
}

/* Write all of data to fd; 0 on success. */
static int write_all(int fd, const char *data, size_t len)
{
  while (len) {
    ssize_t put = write(fd, data, len);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return -1;
    data += put;
    len -= (size_t)put;
  }
  return 0;
}

/* Replace path atomically: a fresh O_EXCL temporary beside it (so nothing
 * planted there is followed), written, given mode, then renamed over path. */
int lpx_fs_write_file(lpx_ctx *ctx, const char *path, const char *data, size_t len, int mode)
{
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof tmp)
    return lpx_fail(ctx, "cannot write %s: path too long", path);
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) return lpx_fail(ctx, "cannot write %s: %s", path, strerror(errno));
  int bad = fchmod(fd, (mode_t)(mode ? mode : 0600)) != 0 || write_all(fd, data, len) != 0;
  bad |= close(fd) != 0;
  if (!bad && rename(tmp, path) == 0) return 0;
  int err = errno;
  unlink(tmp);
  return lpx_fail(ctx, "cannot write %s: %s", path, strerror(err));
}

/* A file the user named being written (lpx_fs_out_open). */
struct lpx_fs_out {
  int fd;
  char path[PATH_MAX];
  char tmp[PATH_MAX];   /* the temporary renamed over path when done; "" when writing path itself */
  int err;              /* the first write error (errno), 0 if none */
  int is_stdout;        /* fd 1 (not closed): the text is held in held until committed */
  lpx_buf held;
};

/* The permission bits a replacement of the existing regular file st gets:
 * its own when it is ours (a chmod the user made survives), else 0600. */
static mode_t out_mode(const struct stat *st, int exists)
{
  return exists && st->st_uid == geteuid() ? (st->st_mode & 0777) : 0600;
}

/* Open fd for out: a fresh O_EXCL temporary beside the path (0600, or the
 * replaced file's own mode), or, for an existing FIFO or character device,
 * the path itself (O_NOFOLLOW). */
static int out_open_fd(lpx_ctx *ctx, lpx_fs_out *o, const struct stat *st, int exists)
{
  if (exists && !S_ISREG(st->st_mode)) {
    o->fd = open(o->path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  } else {
    int n = snprintf(o->tmp, sizeof o->tmp, "%s.tmp-XXXXXX", o->path);
    errno = ENAMETOOLONG;
    o->fd = n > 0 && (size_t)n < sizeof o->tmp ? mkostemp(o->tmp, O_CLOEXEC) : -1;
    if (o->fd >= 0 && fchmod(o->fd, out_mode(st, exists)) != 0) { close(o->fd); unlink(o->tmp); o->fd = -1; }
    if (o->fd < 0) o->tmp[0] = '\0';
  }
  return o->fd < 0 ? lpx_fail(ctx, "cannot write %s: %s", o->path, strerror(errno)) : 0;
}

/* Why path cannot be an output (st: its lstat when exists), or NULL: a
 * link is refused, never followed; so are directories, block devices and
 * sockets; a new or regular file needs a writable directory to hold it. */
static const char *out_refusal(const char *path, const struct stat *st, int exists, char *why, size_t cap)
{
  if (!path[0]) return "the path is empty";
  if (exists && S_ISLNK(st->st_mode)) return "it is a symbolic link (not followed; name the file itself)";
  if (exists && S_ISDIR(st->st_mode)) return "it is a directory";
  if (exists && !S_ISREG(st->st_mode) && !S_ISFIFO(st->st_mode) && !S_ISCHR(st->st_mode))
    return "it is a block device or a socket; name a file, a FIFO or a character device";
  if (exists && !S_ISREG(st->st_mode)) return NULL;
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  int n = slash ? (int)(slash - path) : 1;
  snprintf(dir, sizeof dir, "%.*s", n ? n : 1, slash ? path : ".");
  struct stat ds;
  if (stat(dir, &ds) != 0) { snprintf(why, cap, "its directory %s: %s", dir, strerror(errno)); return why; }
  if (!S_ISDIR(ds.st_mode)) { snprintf(why, cap, "%s is not a directory", dir); return why; }
  if (access(dir, W_OK | X_OK) != 0) { snprintf(why, cap, "its directory %s: %s", dir, strerror(errno)); return why; }
  return NULL;
}

/* Check, before any work, that lpx_fs_out_open(path) would accept path,
 * creating nothing: 0, or -1 with "cannot write PATH: reason". NULL
 * (standard output) is fine. */
int lpx_fs_out_check(lpx_ctx *ctx, const char *path)
{
  struct stat st;
  char buf[PATH_MAX + 64];
  if (!path) return 0;
  if (strlen(path) + 16 > PATH_MAX) return lpx_fail(ctx, "cannot write %s: path too long", path);
  int exists = lstat(path, &st) == 0;
  const char *why = out_refusal(path, &st, exists, buf, sizeof buf);
  return why ? lpx_fail(ctx, "cannot write %s: %s", path[0] ? path : "''", why) : 0;
}

/* Start writing a file the user named, the one way every output path of
 * the CLI is written: a regular file gets the text through a fresh
 * temporary beside it (0600, or the replaced file's mode when it is ours),
 * renamed over the path when lpx_fs_out_close commits it (so a failed run
 * leaves the old file as it was); an existing FIFO or character device
 * (/dev/null, /dev/stdout) is written in place; a symbolic link at the
 * path is refused, never followed, as are directories, block devices and
 * sockets. Path NULL is standard output, which gets the text once it is
 * committed (nothing when it is not). NULL on error. */
lpx_fs_out *lpx_fs_out_open(lpx_ctx *ctx, const char *path)
{
  struct stat st;
  if (!path) {
    lpx_fs_out *o = calloc(1, sizeof *o);
    if (!o) { lpx_fail(ctx, "out of memory"); return NULL; }
    *o = (lpx_fs_out){ .fd = 1, .path = "standard output", .is_stdout = 1 };
    return o;
  }
  if (lpx_fs_out_check(ctx, path)) return NULL;
  int exists = lstat(path, &st) == 0;
  lpx_fs_out *o = calloc(1, sizeof *o);
  if (!o) { lpx_fail(ctx, "out of memory"); return NULL; }
  memcpy(o->path, path, strlen(path) + 1);
  if (out_open_fd(ctx, o, &st, exists)) { free(o); return NULL; }
  return o;
}

/* Append data to an output; a write error is kept for lpx_fs_out_close. */
void lpx_fs_out_write(lpx_fs_out *o, const char *data, size_t len)
{
  if (o->err) return;
  if (o->is_stdout ? lpx_buf_put(&o->held, data, len) != 0 : write_all(o->fd, data, len) != 0)
    o->err = o->is_stdout ? ENOMEM : errno ? errno : EIO;
}

/* Finish an output: commit != 0 puts the text in place (the temporary
 * renamed over the path), else the temporary is removed and the path left
 * as it was. 0, or -1 with the reason (a write error, a full disk). */
int lpx_fs_out_close(lpx_ctx *ctx, lpx_fs_out *o, int commit)
{
  int err = o->err;
  if (o->is_stdout && commit && !err && o->held.n && write_all(1, o->held.p, o->held.n)) err = errno;
  lpx_buf_free(&o->held);
  if (!o->is_stdout && close(o->fd) != 0 && !err) err = errno;
  if (commit && !err && o->tmp[0] && rename(o->tmp, o->path) != 0) err = errno;
  if (o->tmp[0] && (!commit || err)) unlink(o->tmp);
  int rc = commit && err ? lpx_fail(ctx, "cannot write %s: %s", o->path, strerror(err)) : 0;
  free(o);
  return rc;
}

/* Write data to a file the user named (lpx_fs_out_open: a temporary
 * renamed into place, a FIFO or device written in place, no link
 * followed): the text goes out straight from the C buffer, with no Lua
 * copy of it. */
int lpx_fs_write_output(lpx_ctx *ctx, const char *path, const char *data, size_t len)
{
  lpx_fs_out *o = lpx_fs_out_open(ctx, path);
  if (!o) return -1;
  lpx_fs_out_write(o, data, len);
  return lpx_fs_out_close(ctx, o, 1);
}

/* Read the rest of fd into *buf (capacity *cap, *len bytes so far),
 * growing it when the file is longer than it said. */
static int read_rest(int fd, char **buf, size_t *cap, size_t *len)
{
  for (;;) {
    if (*len + 1 >= *cap && lpx_grow((void **)buf, cap, *len + 65536, 1)) { errno = ENOMEM; return -1; }
    ssize_t got = read(fd, *buf + *len, *cap - *len - 1);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) return 0;
    *len += (size_t)got;
  }
}

/* Read a whole file, links followed as fopen does, into a fresh
 * NUL-terminated buffer (free it with lpx_fs_free) of its size, so a big
 * input is read once into memory it fits, not grown by doubling; NULL
 * with "path: reason" in the context. */
char *lpx_fs_read_file(lpx_ctx *ctx, const char *path, size_t *len)
{
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) { lpx_fail(ctx, "%s: %s", path, strerror(errno)); return NULL; }
  size_t cap = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536;
  char *buf = malloc(cap);
  *len = 0;
  if (!buf || read_rest(fd, &buf, &cap, len) != 0) {
    int err = buf ? errno : ENOMEM;
    free(buf);
    close(fd);
    lpx_fail(ctx, "%s: %s", path, strerror(err));
    return NULL;
  }
  close(fd);
  buf[*len] = '\0';
  return buf;
}

/* Free a buffer lpx_fs_read_file returned. */
void lpx_fs_free(char *buf) { free(buf); }

/* Monotonic wall-clock time in milliseconds (what the runtime's phase
 * timings and the verdicts of pyptx.tools.verify read). */
double lpx_clock_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The directory for temporaries: $TMPDIR when set to an absolute path, else /tmp. */
static const char *temp_root(void)
{
  const char *t = getenv("TMPDIR");
  return t && t[0] == '/' ? t : "/tmp";
}

/* Create a fresh 0600 temporary file holding data, named luaptx-XXXXXX<suffix>;
 * its path goes to path[cap]. */
int lpx_fs_temp_file(lpx_ctx *ctx, const char *suffix, const char *data, size_t len, char *path, size_t cap)
{
  suffix = suffix ? suffix : "";
  if (snprintf(path, cap, "%s/luaptx-XXXXXX%s", temp_root(), suffix) >= (int)cap)
    return lpx_fail(ctx, "cannot create a temporary file: path too long");
  int fd = mkostemps(path, (int)strlen(suffix), O_CLOEXEC);
  if (fd < 0) return lpx_fail(ctx, "cannot create a temporary file in %s: %s", temp_root(), strerror(errno));
  int bad = write_all(fd, data, len) != 0;
  bad |= close(fd) != 0;
  if (!bad) return 0;
  unlink(path);
  return lpx_fail(ctx, "cannot write the temporary file %s: %s", path, strerror(errno));
}

/* Create a fresh 0700 temporary directory; its path goes to path[cap]. */
int lpx_fs_temp_dir(lpx_ctx *ctx, char *path, size_t cap)
{
  if (snprintf(path, cap, "%s/luaptx-XXXXXX", temp_root()) >= (int)cap)
    return lpx_fail(ctx, "cannot create a temporary directory: path too long");
  if (mkdtemp(path)) return 0;
  return lpx_fail(ctx, "cannot create a temporary directory in %s: %s", temp_root(), strerror(errno));
}

/* The directory holding the running program (from /proc/self/exe, links
 * resolved) into path[cap]: where a build keeps its tools (build/venv). */
int lpx_fs_exe_dir(lpx_ctx *ctx, char *path, size_t cap)
{
  ssize_t n = cap > 1 ? readlink("/proc/self/exe", path, cap - 1) : -1;
  if (n < 0) return lpx_fail(ctx, "cannot find the running program: %s", strerror(errno));
  if ((size_t)n >= cap - 1) return lpx_fail(ctx, "cannot find the running program: path too long");
  path[n] = 0;
  char *slash = strrchr(path, '/');
  if (!slash) return lpx_fail(ctx, "cannot find the running program: %s is not a path", path);
  *(slash == path ? slash + 1 : slash) = 0;
  return 0;
}

/* The absolute path of an existing file or directory, links resolved
 * (realpath(3)), into out[cap]. */
int lpx_fs_real_path(lpx_ctx *ctx, const char *path, char *out, size_t cap)
{
  char buf[PATH_MAX];
  if (!realpath(path, buf)) return lpx_fail(ctx, "%s: %s", path, strerror(errno));
  if (strlen(buf) >= cap) return lpx_fail(ctx, "%s: path too long", path);
  memcpy(out, buf, strlen(buf) + 1);
  return 0;
}

static __thread int remove_errno;
static __thread char remove_failed[512];

/* nftw callback: remove one entry (children first, links never followed). */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  if (remove(path) == 0 || errno == ENOENT) return 0;
  remove_errno = errno;
  snprintf(remove_failed, sizeof remove_failed, "%s", path);
  return 1;
}

/* Remove path and everything below it; a missing path is not an error. */
int lpx_fs_remove_tree(lpx_ctx *ctx, const char *path)
{
  if (lpx_fs_kind(path) == LPX_FS_MISSING) return 0;
  remove_errno = 0;
  if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0) return 0;
  if (!remove_errno) return lpx_fail(ctx, "cannot remove %s: %s", path, strerror(errno));
  return lpx_fail(ctx, "cannot remove %s: %s", remove_failed, strerror(remove_errno));
}

/* Open a regular file for reading without following a link or blocking on
 * a FIFO; with check_owner it must be ours and not writable by others.
 * Returns the descriptor, -2 when path does not exist, -1 on refusal. */
int lpx_fs_open_regular(lpx_ctx *ctx, const char *path, int check_owner)
{
  struct stat st;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return -2;
  if (fd < 0 && errno == ELOOP) return lpx_fail(ctx, "refusing %s: it is a symbolic link", path);
  if (fd < 0) return lpx_fail(ctx, "cannot open %s: %s", path, strerror(errno));
  const char *why = fstat(fd, &st) != 0 ? "it cannot be examined"
                  : !S_ISREG(st.st_mode) ? (S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file")
                  : check_owner ? untrusted_why(&st) : NULL;
  if (why) { close(fd); return lpx_fail(ctx, "refusing %s: %s", path, why); }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

/* ------------------------------------------------------------------ CPUs */

/* Read a small cgroup file (never following a link or blocking) into buf;
 * its length, or -1. */
static ssize_t cgroup_read(const char *path, char *buf, size_t cap)
{
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n >= 0) buf[n] = '\0';
  return n;
}

/* A decimal number at *s (digits only), moving *s past it; -1 if none or too big. */
static int64_t cgroup_number(const char **s)
{
  const char *p = *s;
  int64_t v = 0;
  if (*p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (*p - '0');
  }
  *s = p;
  return v;
}

/* The CPUs one cgroup v2 cpu.max file allows, rounded up ("150000 100000":
 * 2); 0 when it sets no limit ("max 100000"), is missing or unreadable. */
static int64_t cpu_max_file(const char *path)
{
  char buf[64];
  if (cgroup_read(path, buf, sizeof buf) <= 0) return 0;
  const char *s = buf;
  int64_t quota = cgroup_number(&s);
  if (quota <= 0 || *s++ != ' ') return 0;
  int64_t period = cgroup_number(&s);
  if (period <= 0 || (*s && *s != '\n')) return 0;
  int64_t cpus = quota / period + (quota % period != 0);
  return cpus > INT32_MAX ? INT32_MAX : cpus;
}

/* The CPUs a cgroup v1 cpu.cfs_quota_us file (path) and the
 * cpu.cfs_period_us beside it allow, rounded up; 0 when the quota is -1
 * (no limit), missing or unreadable. */
static int64_t cfs_quota_file(const char *path)
{
  char buf[64], period_path[PATH_MAX + 32];
  size_t n = strlen(path);
  if (n < 8 || n - 8 + sizeof "period_us" > sizeof period_path) return 0;
  memcpy(period_path, path, n - 8);
  memcpy(period_path + n - 8, "period_us", sizeof "period_us");   /* cpu.cfs_quota_us -> cpu.cfs_period_us */
  if (cgroup_read(path, buf, sizeof buf) <= 0) return 0;
  const char *s = buf;
  int64_t quota = cgroup_number(&s);
  if (quota <= 0 || (*s && *s != '\n') || cgroup_read(period_path, buf, sizeof buf) <= 0) return 0;
  s = buf;
  int64_t period = cgroup_number(&s);
  if (period <= 0 || (*s && *s != '\n')) return 0;
  int64_t cpus = quota / period + (quota % period != 0);
  return cpus > INT32_MAX ? INT32_MAX : cpus;
}

/* The bytes one cgroup v2 memory.max file allows; 0 when "max" or unreadable. */
static int64_t memory_max_file(const char *path)
{
  char buf[64];
  if (cgroup_read(path, buf, sizeof buf) <= 0) return 0;
  const char *s = buf;
  int64_t bytes = cgroup_number(&s);
  return bytes > 0 && (!*s || *s == '\n') ? bytes : 0;
}

/* The smallest limit the file `name` sets in cgroup rel ("/a/b") under
 * root or in any cgroup above it (read reads one file, 0: no limit); 0
 * when none limits or rel climbs up. */
static int64_t cgroup_fewest(const char *root, const char *rel, const char *name, int64_t (*read_one)(const char *))
{
  char dir[PATH_MAX], file[PATH_MAX + 32];
  if (strstr(rel, "/..") || strncmp(rel, "..", 2) == 0) return 0;
  int n = snprintf(dir, sizeof dir, "%s/%s", root, rel);
  if (n < 0 || (size_t)n >= sizeof dir) return 0;
  size_t top = strlen(root);
  int64_t fewest = 0;
  for (;;) {
    while (n > (int)top && dir[n - 1] == '/') dir[--n] = '\0';
    snprintf(file, sizeof file, "%s/%s", dir, name);
    int64_t c = read_one(file);
    if (c > 0 && (fewest == 0 || c < fewest)) fewest = c;
    char *slash = strrchr(dir, '/');
    if (n <= (int)top || !slash || slash < dir + top) return fewest;
    *slash = '\0';
    n = (int)(slash - dir);
  }
}

/* The fewest CPUs the cpu.max files of cgroup rel ("/a/b") under root and
 * of each cgroup above it allow; 0 when none limits (or rel climbs up). */
int32_t lpx_cgroup_cpus(const char *root, const char *rel)
{
  return (int32_t)cgroup_fewest(root, rel, "cpu.max", cpu_max_file);
}

/* The fewest CPUs the cgroup v1 CFS quotas (cpu.cfs_quota_us over
 * cpu.cfs_period_us) of cgroup rel under root (the cpu controller's mount)
 * and of each cgroup above it allow; 0 when none limits. */
int32_t lpx_cgroup1_cpus(const char *root, const char *rel)
{
  return (int32_t)cgroup_fewest(root, rel, "cpu.cfs_quota_us", cfs_quota_file);
}

/* The fewest bytes the memory.max files of cgroup rel under root and above
 * it allow; 0 when none limits. */
int64_t lpx_cgroup_memory(const char *root, const char *rel)
{
  return cgroup_fewest(root, rel, "memory.max", memory_max_file);
}

/* Does the controller list of a /proc/self/cgroup line (the text from
 * list up to ':') name controller? */
static int names_controller(const char *list, const char *controller)
{
  size_t n = strlen(controller);
  for (const char *p = list;;) {
    size_t len = strcspn(p, ",:\n");
    if (len == n && strncmp(p, controller, n) == 0) return 1;
    if (p[len] != ',') return 0;
    p += len + 1;
  }
}

/* This process's cgroup path for a controller into out: v2's ("0::/a/b")
 * when controller is NULL, else the v1 hierarchy naming it
 * ("4:cpu,cpuacct:/a/b"); 0, or -1 when there is none. */
static int self_cgroup(const char *controller, char *out, size_t cap)
{
  char buf[8192];
  int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    char *list = strchr(line, ':'), *path = list ? strchr(list + 1, ':') : NULL;
    if (!path || (size_t)(path - line) > strcspn(line, "\n")) continue;
    if (controller ? !names_controller(list + 1, controller) : strncmp(line, "0::", 3) != 0) continue;
    size_t len = strcspn(path + 1, "\n");
    if (len >= cap) return -1;
    memcpy(out, path + 1, len);
    out[len] = '\0';
    return 0;
  }
  return -1;
}

/* The CPUs this process's affinity mask holds (0 when unknown). */
static int32_t affinity_cpus(void)
{
  for (int ncpu = 1024; ncpu <= (1 << 16); ncpu *= 4) {
    cpu_set_t *set = CPU_ALLOC(ncpu);
    if (!set) return 0;
    size_t size = CPU_ALLOC_SIZE(ncpu);
    int ok = sched_getaffinity(0, size, set) == 0, count = ok ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    if (ok) return count;
    if (errno != EINVAL) return 0;
  }
  return 0;
}

/* How many CPUs this process may use: the CPUs of its affinity mask (a
 * Slurm job's --cpus-per-task, taskset), lowered by a CPU quota of its
 * cgroup or one above it (a container's --cpus): cgroup v2's cpu.max, or
 * v1's CFS quota; at least 1. The one answer for every default thread
 * count (emulator, parallel compiles). */
int32_t lpx_cpu_count(void)
{
  int32_t n = affinity_cpus();
  if (n <= 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    n = online > 0 && online < INT32_MAX ? (int32_t)online : 1;
  }
  char rel[4096];
  int32_t v2 = self_cgroup(NULL, rel, sizeof rel) == 0 ? lpx_cgroup_cpus("/sys/fs/cgroup", rel) : 0;
  int32_t v1 = self_cgroup("cpu", rel, sizeof rel) == 0 ? lpx_cgroup1_cpus("/sys/fs/cgroup/cpu", rel) : 0;
  if (v2 > 0 && v2 < n) n = v2;
  if (v1 > 0 && v1 < n) n = v1;
  return n > 0 ? n : 1;
}

/* The host memory this process may use: the machine's physical memory,
 * lowered to a cgroup v2 memory.max of its cgroup or one above it. */
int64_t lpx_host_memory(void)
{
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t n = pages > 0 && page > 0 && pages < INT64_MAX / page ? (int64_t)pages * page : (int64_t)1 << 32;
  char rel[4096];
  int64_t max = self_cgroup(NULL, rel, sizeof rel) == 0 ? lpx_cgroup_memory("/sys/fs/cgroup", rel) : 0;
  return max > 0 && max < n ? max : n;
}
