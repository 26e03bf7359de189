/* Fault injection (SQLite style, docs/testing.md): forced into every source of a
 * DD_FAULT=ON build (make fault, into build-fault/) with -include, this header routes the
 * library's and the command's allocation calls (malloc, calloc, realloc, strdup,
 * aligned_alloc) and file-writing calls (fopen for writing, fwrite, fclose, write, fsync,
 * rename) through counters in tests/fault/fault.c. With DD_FAULT_ALLOC=N (or
 * DD_FAULT_IO=N) in the environment the N-th such call fails once, as the system would
 * fail it (NULL, or -1/EOF with errno EIO): the code under test must turn it into a clean
 * error. DD_FAULT_REPORT=FILE receives "alloc IO FIRED" at exit (calls counted, whether
 * the fault fired), so that a driver knows when N passed the scenario's last call.
 * Calls inside other libraries (cJSON, ZeroMQ, FFTW, MPI) are not counted. The ordinary
 * build never includes this file. */
#ifndef DD_FAULT_H
#define DD_FAULT_H

/* No system header here: this file comes before a source's own feature macros
 * (_GNU_SOURCE), so it declares with basic types only (FILE is glibc's struct _IO_FILE,
 * ssize_t is long on the LP64 targets this build supports); the system headers' own
 * prototypes, renamed by the macros below, then declare the same functions. */
#include <stddef.h>
struct _IO_FILE;

void *dd_fault_malloc(size_t n);
void *dd_fault_calloc(size_t a, size_t b);
void *dd_fault_realloc(void *p, size_t n);
void *dd_fault_aligned_alloc(size_t al, size_t n);
char *dd_fault_strdup(const char *s);
struct _IO_FILE *dd_fault_fopen(const char *path, const char *mode);
size_t dd_fault_fwrite(const void *p, size_t s, size_t n, struct _IO_FILE *f);
int dd_fault_fclose(struct _IO_FILE *f);
long dd_fault_write(int fd, const void *p, size_t n);
int fclose(struct _IO_FILE *f); /* stdio.h names it in attributes (__attr_dealloc_fclose) */
int dd_fault_fsync(int fd);
int dd_fault_rename(const char *a, const char *b);

#ifndef DD_FAULT_IMPL
#define malloc(n) dd_fault_malloc(n)
#define calloc(a, b) dd_fault_calloc(a, b)
#define realloc(p, n) dd_fault_realloc(p, n)
#define aligned_alloc(a, n) dd_fault_aligned_alloc(a, n)
#define strdup(s) dd_fault_strdup(s)
#define fopen(p, m) dd_fault_fopen(p, m)
#define fwrite(p, s, n, f) dd_fault_fwrite(p, s, n, f)
#define fclose(f) dd_fault_fclose(f)
#define write(fd, p, n) dd_fault_write(fd, p, n)
#define fsync(fd) dd_fault_fsync(fd)
#define rename(a, b) dd_fault_rename(a, b)
#endif

#endif
