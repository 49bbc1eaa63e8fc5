/* Coverage records behind docs/emulator-coverage.md: with
 * LUAPTX_EMU_COVERAGE naming a file, every program the emulator decodes
 * appends its distinct instruction forms to it, one "row<TAB>form" line
 * each (spec/emu_coverage.lua runs the specs with it and writes the page). */
#include "emu.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t cover_lock = PTHREAD_MUTEX_INITIALIZER;
static int cover_fd = -2;   /* -2: the variable not read yet; -1: off */

/* Open the file $LUAPTX_EMU_COVERAGE names for appending (once); a
 * non-regular file, or one owned by another user, is refused. */
static int cover_open(lpx_ctx *ctx)
{
  const char *path = getenv("LUAPTX_EMU_COVERAGE");
  if (!path || !*path) { cover_fd = -1; return 0; }
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  int err = errno;
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) { cover_fd = fd; return 0; }
  if (fd >= 0) { close(fd); err = 0; }
  return lpx_fail(ctx, "LUAPTX_EMU_COVERAGE=%s: cannot append to it (%s); valid: a path to a regular file of yours, or unset",
                  path, err ? strerror(err) : "not a regular file owned by this user");
}

/* Order form ids (qsort). */
static int by_id(const void *a, const void *b)
{
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Append "row<TAB>form" for each distinct form of p, in one write. */
static int cover_write(const emu_prog *p)
{
  int32_t *ids = malloc((p->ninsts + 1) * sizeof *ids);
  lpx_buf b = { 0, 0, 0 };
  size_t n = 0;
  if (!ids) return -1;
  for (size_t i = 0; i < p->ninsts; i++)
    if (p->insts[i].item >= 0 && p->insts[i].op >= 0) ids[n++] = p->f->items[p->insts[i].item].form;
  qsort(ids, n, sizeof *ids, by_id);
  lpx_ctx *ctx = p->m->ctx;
  for (size_t i = 0; i < n; i++) {
    if (i && ids[i] == ids[i - 1]) continue;
    const lpx_form_info *fo = lpx_form_get(ctx, ids[i]);
    if (fo) lpx_buf_printf(&b, "%s\t%s\n", lpx_isa_row_name(fo->op), fo->text);
  }
  ssize_t w = b.n ? write(cover_fd, b.p, b.n) : 0;
  free(ids);
  lpx_buf_free(&b);
  return w < 0 ? -1 : 0;
}

/* Record the forms of a decoded program when coverage is on. */
int lpx_emu_cover(const emu_prog *p)
{
  int rc = 0;
  pthread_mutex_lock(&cover_lock);
  if (cover_fd == -2) rc = cover_open(p->m->ctx);
  if (!rc && cover_fd >= 0 && cover_write(p))
    rc = lpx_fail(p->m->ctx, "LUAPTX_EMU_COVERAGE: writing the record failed (%s)", strerror(errno));
  pthread_mutex_unlock(&cover_lock);
  return rc;
}
