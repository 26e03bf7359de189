/* File helpers for the data module: path joining, directory creation, whole-file reads
 * and atomic writes (write PATH.tmp, fsync, rename), plus the split-count rule. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_internal.h"

dd_status dd_path_join(char *dst, size_t cap, const char *dir, const char *name) {
    int k;
    if (!dir || !dir[0])
        k = snprintf(dst, cap, "%s", name);
    else if (dir[strlen(dir) - 1] == '/')
        k = snprintf(dst, cap, "%s%s", dir, name);
    else
        k = snprintf(dst, cap, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= cap) return dd_error(DD_ERR_ARG, "path too long: %s/%s", dir, name);
    return DD_OK;
}

dd_status dd_path_cat(char *dst, size_t cap, const char *a, const char *b) {
    int k = snprintf(dst, cap, "%s%s", a, b);
    if (k < 0 || (size_t)k >= cap) return dd_error(DD_ERR_ARG, "path too long: %s%s", a, b);
    return DD_OK;
}

int dd_path_is_dir(const char *path) {
    struct stat st;
    int e = errno;
    int r = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    errno = e;
    return r;
}

int dd_path_is_file(const char *path) {
    struct stat st;
    int e = errno;
    int r = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    errno = e;
    return r;
}

const char *dd_path_base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

dd_status dd_mkdir_p(const char *dir) {
    char buf[DD_PATH_MAX];
    size_t len = strlen(dir);
    if (len == 0) return DD_OK;
    if (len >= sizeof buf) return dd_error(DD_ERR_ARG, "path too long: %s", dir);
    memcpy(buf, dir, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return dd_error(DD_ERR_IO, "cannot create directory %s: %s", buf, strerror(errno));
        if (!dd_path_is_dir(buf))
            return dd_error(DD_ERR_IO, "cannot create directory %s: a file is in the way", buf);
        buf[i] = c;
    }
    return DD_OK;
}

dd_status dd_mkdir_parent(const char *path) {
    char buf[DD_PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return DD_OK;
    size_t len = (size_t)(slash - path);
    if (len >= sizeof buf) return dd_error(DD_ERR_ARG, "path too long: %s", path);
    memcpy(buf, path, len);
    buf[len] = '\0';
    return dd_mkdir_p(buf);
}

/* read() that retries on EINTR. */
static ssize_t read_some(int fd, void *buf, size_t n) {
    for (;;) {
        ssize_t r = read(fd, buf, n);
        if (r >= 0 || errno != EINTR) return r;
    }
}

dd_status dd_read_all(const char *path, size_t max_len, char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    DD_TRY(dd_open_regular(path, &fd, &size));
    dd_status st = DD_OK;
    char *b = NULL;
    if (size > max_len) {
        st = dd_error(DD_ERR_FORMAT, "%s: file too large: %llu bytes (at most %zu)", path,
                      (unsigned long long)size, max_len);
        goto cleanup;
    }
    /* Exactly the size fstat reported (+1 for the NUL); grown only if the file grows
     * while it is read. */
    size_t cap = (size_t)size + 1, used = 0;
    b = dd_calloc(cap, 1);
    if (!b) {
        st = DD_ERR_NOMEM;
        goto cleanup;
    }
    for (;;) {
        if (used + 1 == cap) {
            char probe;
            ssize_t r = read_some(fd, &probe, 1);
            if (r < 0) {
                st = dd_error(DD_ERR_IO, "cannot read %s: %s", path, strerror(errno));
                goto cleanup;
            }
            if (r == 0) break;
            if (used + 1 > max_len) {
                st = dd_error(DD_ERR_FORMAT, "%s: file too large: more than %zu bytes", path,
                              max_len);
                goto cleanup;
            }
            size_t ncap = cap < max_len / 2 ? 2 * cap : max_len + 1;
            char *nb = dd_calloc(ncap, 1);
            if (!nb) {
                st = DD_ERR_NOMEM;
                goto cleanup;
            }
            memcpy(nb, b, used);
            dd_free(b);
            b = nb;
            cap = ncap;
            b[used++] = probe;
            continue;
        }
        ssize_t r = read_some(fd, b + used, cap - 1 - used);
        if (r < 0) {
            st = dd_error(DD_ERR_IO, "cannot read %s: %s", path, strerror(errno));
            goto cleanup;
        }
        if (r == 0) break;
        used += (size_t)r;
    }
    b[used] = '\0';
    *buf = b;
    *len = used;
    b = NULL;
cleanup:
    dd_free(b);
    close(fd);
    return st;
}

dd_status dd_lines_open(dd_lines *r, const char *path) {
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->path = path;
    DD_TRY(dd_open_regular(path, &r->fd, NULL));
    r->buf = malloc(DD_LINE_MAX + 1);
    if (!r->buf) {
        dd_lines_close(r);
        return dd_error(DD_ERR_NOMEM, "out of memory reading %s", path);
    }
    r->buf[0] = '\0';
    return DD_OK;
}

void dd_lines_close(dd_lines *r) {
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    free(r->buf);
    r->buf = NULL;
}

dd_status dd_lines_next(dd_lines *r, char **line, size_t *len, int *got) {
    *got = 0;
    *line = NULL;
    *len = 0;
    for (;;) {
        /* buf[end] is a NUL sentinel: strcspn stops at CR, LF, a NUL inside the data or
         * the end of what has been read. */
        size_t k = strcspn(r->buf + r->beg, "\r\n");
        size_t pos = r->beg + k;
        if (pos < r->end && r->buf[pos] == '\0')
            return dd_error(DD_ERR_FORMAT, "%s:%zu: NUL byte in a text file (binary data?)", r->path,
                            r->line + 1);
        int need_more = pos == r->end || (r->buf[pos] == '\r' && pos + 1 == r->end);
        if (!need_more || r->eof) {
            if (r->beg == r->end) return DD_OK; /* end of file */
            r->line++;
            *line = r->buf + r->beg;
            *len = k;
            size_t next = pos;
            if (pos < r->end) {
                char c = r->buf[pos];
                r->buf[pos] = '\0';
                next = pos + 1;
                if (c == '\r' && next < r->end && r->buf[next] == '\n') next++;
            }
            r->beg = next;
            *got = 1;
            return DD_OK;
        }
        /* The line is not complete in the buffer: keep its start, read more. */
        if (r->beg > 0) {
            memmove(r->buf, r->buf + r->beg, r->end - r->beg);
            r->end -= r->beg;
            r->beg = 0;
        }
        if (r->end >= DD_LINE_MAX)
            return dd_error(DD_ERR_FORMAT, "%s:%zu: line longer than %zu bytes (not a text file?)",
                            r->path, r->line + 1, (size_t)DD_LINE_MAX);
        ssize_t n = read_some(r->fd, r->buf + r->end, DD_LINE_MAX - r->end);
        if (n < 0) return dd_error(DD_ERR_IO, "cannot read %s: %s", r->path, strerror(errno));
        if (n == 0) r->eof = 1;
        r->end += (size_t)n;
        r->buf[r->end] = '\0';
    }
}

const char *dd_quote(char *out, size_t cap, const char *p, size_t len, size_t max_in) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i = 0;
    if (cap < 8) {
        if (cap) out[0] = '\0';
        return out;
    }
    for (; i < len && i < max_in; i++) {
        unsigned char c = (unsigned char)p[i];
        size_t need = c >= 0x20 && c < 0x7f ? (c == '\\' ? 2 : 1) : 4;
        if (o + need + 4 > cap) break; /* room for "..." and the NUL */
        if (c == '\\') {
            out[o++] = '\\';
            out[o++] = '\\';
        } else if (need == 1) {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (i < len) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}

dd_status dd_afile_open(dd_afile *a, const char *path) {
    memset(a, 0, sizeof *a);
    DD_TRY(dd_path_cat(a->path, sizeof a->path, path, ""));
    DD_TRY(dd_path_cat(a->tmp, sizeof a->tmp, path, ".tmp"));
    DD_TRY(dd_mkdir_parent(path));
    a->f = fopen(a->tmp, "wb");
    if (!a->f) return dd_error(DD_ERR_IO, "cannot create %s: %s", a->tmp, strerror(errno));
    a->pending = 1;
    a->iobuf = malloc(1 << 20);
    if (a->iobuf) setvbuf(a->f, a->iobuf, _IOFBF, 1 << 20);
    return DD_OK;
}

dd_status dd_afile_werr(const dd_afile *a) {
    return dd_error(DD_ERR_IO, "write %s: %s", a->tmp, strerror(errno ? errno : EIO));
}

dd_status dd_afile_close(dd_afile *a) {
    if (!a->f) return DD_OK;
    dd_status st = DD_OK;
    errno = 0;
    if (fflush(a->f) != 0 || ferror(a->f)) st = dd_afile_werr(a);
    if (st == DD_OK && fsync(fileno(a->f)) != 0)
        st = dd_error(DD_ERR_IO, "fsync %s: %s", a->tmp, strerror(errno));
    if (fclose(a->f) != 0 && st == DD_OK) st = dd_afile_werr(a);
    a->f = NULL;
    free(a->iobuf);
    a->iobuf = NULL;
    return st;
}

dd_status dd_afile_rename(dd_afile *a) {
    if (rename(a->tmp, a->path) != 0)
        return dd_error(DD_ERR_IO, "cannot rename %s to %s: %s", a->tmp, a->path, strerror(errno));
    a->pending = 0;
    return DD_OK;
}

dd_status dd_afile_commit(dd_afile *a) {
    dd_status st = dd_afile_close(a);
    if (st == DD_OK) st = dd_afile_rename(a);
    if (st != DD_OK) {
        dd_afile_abort(a);
        return st;
    }
    dd_fsync_parent(a->path);
    return DD_OK;
}

void dd_afile_abort(dd_afile *a) {
    if (a->f) fclose(a->f);
    a->f = NULL;
    free(a->iobuf);
    a->iobuf = NULL;
    if (a->pending) unlink(a->tmp);
    a->pending = 0;
}

void dd_fsync_parent(const char *path) {
    char dir[DD_PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else {
        size_t len = (size_t)(slash - path);
        if (len == 0) len = 1; /* "/file" */
        if (len >= sizeof dir) return;
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

void dd_split_counts(size_t n, const double r[3], size_t cnt[3]) {
    double nd = (double)n;
    double a = floor(nd * r[0] * (1.0 + 1e-12));
    double b = floor(nd * r[1] * (1.0 + 1e-12));
    if (!(a >= 0)) a = 0;
    if (a > nd) a = nd;
    if (!(b >= 0)) b = 0;
    if (b > nd - a) b = nd - a;
    cnt[0] = (size_t)a;
    cnt[1] = (size_t)b;
    cnt[2] = n - cnt[0] - cnt[1];
}

int dd_host_le(void) {
    const uint32_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}

void dd_cloc_push(dd_cloc *l) {
    l->c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    l->old = l->c ? uselocale(l->c) : (locale_t)0;
}

void dd_cloc_pop(dd_cloc *l) {
    if (!l->c) return;
    uselocale(l->old);
    freelocale(l->c);
    l->c = (locale_t)0;
}
