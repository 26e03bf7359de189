/* Parameter tables and flat arenas.
 *
 * A model describes its parameters as a table of named tensors (name, shape, offset).
 * Parameters, gradients and optimiser state each live in ONE contiguous, 64-byte aligned
 * float arena laid out by that table; layers get views (arena + offset). Backward passes
 * add into the gradient arena, so zeroing all gradients is one memset.
 *
 * Everything above the model (allreduce buckets, gradient compression, checkpoints,
 * parameter-server shards, optimisers) works on the table and the flat arenas only.
 *
 * Layout rules (stable; checkpoints may rely on them):
 * - entries are kept in the order they were added ("layer order"); entry i has index i;
 * - each entry starts at a multiple of DD_PARAM_ALIGN floats (64 bytes);
 * - the padding floats between entries are zero in every arena and no layer touches them;
 * - table.total (the arena length) is a multiple of DD_PARAM_ALIGN.
 */
#ifndef DISTDPD_PARAM_H
#define DISTDPD_PARAM_H

#include <stddef.h>

#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DD_PARAM_MAX_NDIM 4   /* a tensor has 1..4 dimensions */
#define DD_PARAM_NAME_MAX 64  /* names are 1..63 characters (PyTorch state_dict style) */
#define DD_PARAM_ALIGN 16     /* entry offsets are multiples of 16 floats = 64 bytes */
#define DD_PARAM_MAX_STATE 4  /* at most 4 optimiser state arenas (AdamW uses 2) */

/* One named parameter tensor. */
typedef struct {
    char name[DD_PARAM_NAME_MAX];      /* e.g. "gru.weight_ih_l0" */
    int ndim;                          /* 1..DD_PARAM_MAX_NDIM */
    size_t shape[DD_PARAM_MAX_NDIM];   /* row-major (C order) shape; unused dims are 1 */
    size_t offset;                     /* first float in the arena; multiple of DD_PARAM_ALIGN */
    size_t size;                       /* number of floats = product of shape */
} dd_param_entry;

/* The table. Plain data: read the fields directly; change it only through the API. */
typedef struct {
    dd_param_entry *entries; /* count entries in layer order (owned; freed by _free) */
    size_t count;            /* number of entries */
    size_t cap;              /* allocated entries */
    size_t total;            /* arena length in floats, padding included; multiple of 16 */
    size_t nparams;          /* number of parameters = sum of entry sizes (no padding) */
} dd_param_table;

/* An empty table (no allocation). */
void dd_param_table_init(dd_param_table *t);
/* Frees the entries and leaves an empty table. Safe on an empty or freed table. */
void dd_param_table_free(dd_param_table *t);

/* Appends a tensor. name: 1..63 characters, unique in the table; ndim: 1..4;
 * shape[0..ndim-1] >= 1. On success *offset (may be NULL) receives the entry's offset in
 * floats. Errors: DD_ERR_ARG (bad name, ndim or shape; duplicate name), DD_ERR_NOMEM. */
dd_status dd_param_table_add(dd_param_table *t, const char *name, int ndim, const size_t *shape,
                             size_t *offset);

/* Index of the entry called `name` in layer order, or -1 when there is none. */
long dd_param_table_index(const dd_param_table *t, const char *name);
/* The entry called `name`, or NULL when there is none. The pointer is valid until the
 * next dd_param_table_add or dd_param_table_free. */
const dd_param_entry *dd_param_table_find(const dd_param_table *t, const char *name);
/* Like dd_param_table_find but reports DD_ERR_ARG "no parameter named 'x'" when absent. */
dd_status dd_param_table_lookup(const dd_param_table *t, const char *name, const dd_param_entry **e);

/* Flat arenas for one table: parameters, gradients and up to DD_PARAM_MAX_STATE optimiser
 * state arenas, each `n` floats, zero-filled and 64-byte aligned (dd_calloc). The arena
 * keeps a pointer to the table, which must outlive it and must not grow afterwards. */
typedef struct {
    const dd_param_table *table;     /* layout (not owned) */
    size_t n;                        /* floats per arena = table->total */
    float *params;                   /* parameters (owned) */
    float *grads;                    /* gradients (owned); backward passes add into it */
    float *state[DD_PARAM_MAX_STATE]; /* optimiser state arenas (owned), NULL if absent */
    int nstate;                      /* number of state arenas allocated */
} dd_param_arena;

/* Allocates params and grads for table t (zeroed). On failure nothing is left allocated.
 * Errors: DD_ERR_ARG (empty table), DD_ERR_NOMEM. The caller frees with _destroy. */
dd_status dd_param_arena_create(dd_param_arena *a, const dd_param_table *t);
/* Allocates `nstate` (1..DD_PARAM_MAX_STATE) extra zeroed arenas of the same size into
 * a->state[0..nstate-1], replacing (and freeing) any earlier ones. Errors: DD_ERR_ARG,
 * DD_ERR_NOMEM (then a->nstate == 0). */
dd_status dd_param_arena_alloc_state(dd_param_arena *a, int nstate);
/* Zeroes the gradient arena: one memset of n floats. */
void dd_param_arena_zero_grads(dd_param_arena *a);
/* Frees all arenas and zeroes the struct. Safe to call twice. */
void dd_param_arena_destroy(dd_param_arena *a);
/* View of the tensor `name` inside any arena laid out by t (params, grads, state), or
 * NULL when there is no such name. */
float *dd_param_view(const dd_param_table *t, float *arena, const char *name);

/* Initialisation helpers. The PyTorch defaults are all uniform(-k, k):
 *   nn.GRU / nn.LSTM: every weight and bias, k = 1/sqrt(hidden_size);
 *   nn.Linear / nn.Conv1d: weight (kaiming_uniform with a = sqrt(5)) and bias,
 *   k = 1/sqrt(fan_in), fan_in = in_features, or (in_channels/groups) * kernel_size.
 * The values come from dd_rng, so the same seed gives the same parameters everywhere
 * (but not the same numbers as torch's generator). */

/* p[i] = uniform(-k, k) for i < n; k >= 0. */
void dd_param_uniform(float *p, size_t n, double k, dd_rng *rng);
/* 1/sqrt(fan_in) (fan_in >= 1). */
double dd_param_bound(size_t fan_in);
/* Fills the entry `name` of the arena `arena` (laid out by t) with uniform(-k, k).
 * Errors: DD_ERR_ARG when there is no such entry. */
dd_status dd_param_init_uniform(const dd_param_table *t, float *arena, const char *name, double k,
                                dd_rng *rng);

/* Xavier/Glorot uniform for a (rows, cols) weight: uniform(-k, k), k = sqrt(6/(rows+cols))
 * (torch.nn.init.xavier_uniform_ with gain 1: fan_in = cols, fan_out = rows). */
void dd_param_xavier_uniform(float *p, size_t rows, size_t cols, dd_rng *rng);
/* A (rows, cols) row-major matrix with orthonormal rows (rows <= cols) or columns
 * (rows >= cols), from the QR factorisation of a Gaussian draw with R's diagonal made
 * positive: torch.nn.init.orthogonal_ with gain 1 (same distribution, not the same numbers).
 * Errors: DD_ERR_ARG (empty), DD_ERR_NOMEM. */
dd_status dd_param_orthogonal(float *p, size_t rows, size_t cols, dd_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
