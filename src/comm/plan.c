/* Planning at scale: the alpha-beta-gamma cost model of the allreduce algorithms (each
 * algorithm's own, taken from its registry entry: src/comm/ar_*.c), link presets, the
 * data-parallel step model with bucketed overlap (a closed-form D/D/1 queue of bucket
 * reductions behind the backward pass), the scaling table with a recommendation, its
 * JSON form, and the calibration of alpha, beta and gamma on the machine it runs on (ring
 * exchange steps + a timed float32 sum), stored as JSON. Formulas and preset sources:
 * docs/comm.md. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "comm/allreduce_impl.h"
#include "distdpd/plan.h"

/* ---- presets --------------------------------------------------------------------- */

typedef struct {
    const char *name;
    dd_link link;
    const char *source;
} preset;

/* gamma for CPU ranks: a float32 sum streams 12 bytes of memory per 4 bytes of data;
 * at ~15 GB/s per core that is ~0.2 ns per byte (calibration replaces it). */
#define GAMMA_CPU (1.0 / 5e9)

static const preset k_presets[] = {
    {"ethernet-10g", {15e-6, 1.0 / 1.15e9, GAMMA_CPU, 15e-6, 1.0 / 1.15e9},
     "10 Gb/s Ethernet, MPI over TCP: ~15 us per message (kernel TCP stack, switch hop), "
     "9.2 Gb/s goodput (1.15 GB/s) of the 10 Gb/s line rate"},
    {"ethernet-100g", {10e-6, 1.0 / 10e9, GAMMA_CPU, 10e-6, 1.0 / 10e9},
     "100 Gb/s Ethernet, MPI over TCP (no RoCE): ~10 us per message, 80 Gb/s goodput "
     "(10 GB/s; needs several streams)"},
    {"infiniband-hdr", {1.5e-6, 1.0 / 24e9, GAMMA_CPU, 1.5e-6, 1.0 / 24e9},
     "InfiniBand HDR 200 Gb/s (ConnectX-6): ~1.1 us OSU latency + software, 1.5 us per "
     "message; 24 GB/s of the 25 GB/s line rate (OSU bandwidth)"},
    {"nvlink", {2e-6, 1.0 / 230e9, 1.0 / 1e12, 2e-6, 1.0 / 230e9},
     "NVLink 3 inside a DGX A100 node (NCCL): ~2 us per step, 230 GB/s allreduce bus "
     "bandwidth (nccl-tests); reduction on the GPU (~1 TB/s)"},
    {"shm", {1e-6, 1.0 / 5e9, GAMMA_CPU, 1e-6, 1.0 / 10e9},
     "shared memory inside a CPU node (Open MPI vader, copy in + copy out): ~1 us per "
     "message, 10 GB/s one way, 5 GB/s per direction when both directions copy at once "
     "(the two copies share cores and memory); calibrate to replace"},
};
#define N_PRESETS (sizeof k_presets / sizeof k_presets[0])

static const char *const k_preset_names[] = {"ethernet-10g", "ethernet-100g", "infiniband-hdr",
                                             "nvlink", "shm", NULL};

const char *const *dd_plan_link_names(void) { return k_preset_names; }

dd_status dd_plan_link_preset(const char *name, dd_link *out) {
    for (size_t i = 0; name && i < N_PRESETS; i++)
        if (strcmp(name, k_presets[i].name) == 0) {
            *out = k_presets[i].link;
            return DD_OK;
        }
    return dd_error(DD_ERR_ARG,
                    "link '%s': expected ethernet-10g, ethernet-100g, infiniband-hdr, nvlink or shm",
                    name ? name : "(null)");
}

const char *dd_plan_link_source(const char *name) {
    for (size_t i = 0; name && i < N_PRESETS; i++)
        if (strcmp(name, k_presets[i].name) == 0) return k_presets[i].source;
    return "";
}

/* ---- allreduce model ------------------------------------------------------------- */

static int link_ok(const dd_link *l) { return dd_ar_link_ok(l); }

/* The cost model of the algorithm's registry entry (src/comm/ar_*.c), or of the one its
 * model_as names (mpi: the fastest of ring, tree and rhd). */
double dd_plan_allreduce_time(dd_allreduce_algo a, const dd_link *inter, const dd_link *intra,
                              int ranks_per_node, int p, double bytes) {
    if (!link_ok(inter) || p < 1 || !(bytes >= 0) || !isfinite(bytes)) return -1;
    if (p == 1 || bytes == 0) return 0;
    const dd_allreduce_def *d = dd_allreduce_def_of(a);
    if (d && d->model_as) d = dd_allreduce_def_of(d->model_as(inter, intra, ranks_per_node, p, bytes));
    if (!d || !d->cost) return -1;
    return d->cost(inter, intra, ranks_per_node, p, bytes);
}

/* ---- step model ------------------------------------------------------------------ */

void dd_plan_cfg_default(dd_plan_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->ranks = 64;
    (void)dd_plan_link_preset("ethernet-10g", &cfg->link);
    (void)dd_plan_link_preset("shm", &cfg->intra);
    cfg->ranks_per_node = 8;
    cfg->backward_frac = 2.0 / 3.0;
    cfg->bucket_bytes = 0;
    cfg->overlap = 1;
}

static double ar_time(const dd_plan_cfg *cfg, dd_allreduce_algo a, int p, double bytes) {
    return dd_plan_allreduce_time(a, &cfg->link, &cfg->intra, cfg->ranks_per_node, p, bytes);
}

/* grad_bytes as an argument so that compression can shrink it */
static double exposed(const dd_plan_cfg *cfg, dd_allreduce_algo a, int p, double G, double b) {
    if (p < 2 || G <= 0) return 0;
    if (!cfg->overlap || b >= G) {
        double t = ar_time(cfg, a, p, G);
        /* one bucket: it can only start when backward ends */
        return t;
    }
    double tb = cfg->compute_s * cfg->backward_frac;
    double k = ceil(G / b);           /* buckets: k-1 of b bytes, the last one smaller */
    double last = G - (k - 1) * b;
    double s = ar_time(cfg, a, p, b), dlt = tb * b / G;
    /* D/D/1 queue: bucket j (0-based) ready at (j+1) dlt, served for s */
    double fin = s >= dlt ? dlt + (k - 1) * s : (k - 1) * dlt + s;
    fin = fmax(fin, tb) + ar_time(cfg, a, p, last);
    return fmax(0.0, fin - tb);
}

double dd_plan_exposed_comm(const dd_plan_cfg *cfg, dd_allreduce_algo a, int p,
                            double bucket_bytes) {
    if (!cfg || bucket_bytes <= 0) return -1;
    return exposed(cfg, a, p, 4.0 * cfg->params, bucket_bytes);
}

static const double k_buckets[] = {64e3, 256e3, 1e6, 4e6, 16e6, 25e6, 64e6};
#define N_BUCKETS (sizeof k_buckets / sizeof k_buckets[0])

/* Best efficiency of algorithm a at p over the bucket candidates (or the given size). */
static double best_eff(const dd_plan_cfg *cfg, dd_allreduce_algo a, int p, double G, double *bucket) {
    double best = -1, bb = G;
    double c = cfg->compute_s;
    if (cfg->bucket_bytes > 0 || !cfg->overlap) {
        bb = cfg->bucket_bytes > 0 ? fmin(cfg->bucket_bytes, G) : G;
        best = c / (c + exposed(cfg, a, p, G, bb));
    } else {
        /* the best efficiency, then the largest bucket within 0.1 % of it (fewer, larger
         * messages when they cost nothing) */
        double e[N_BUCKETS + 1], chosen = -1;
        bb = 0;
        for (size_t i = 0; i <= N_BUCKETS; i++) {
            double b = i < N_BUCKETS ? k_buckets[i] : G;
            e[i] = b > G ? -1 : c / (c + exposed(cfg, a, p, G, b));
            if (e[i] > best) best = e[i];
        }
        for (size_t i = 0; i <= N_BUCKETS; i++) {
            double b = i < N_BUCKETS ? k_buckets[i] : G;
            if (b <= G && e[i] >= best - 1e-3 && b >= bb) {
                bb = b;
                chosen = e[i];
            }
        }
        best = chosen;
    }
    if (bucket) *bucket = bb;
    return best;
}

static dd_status cfg_check(const dd_plan_cfg *cfg) {
    if (!cfg) return dd_error(DD_ERR_ARG, "plan: cfg is NULL");
    if (!(cfg->params >= 1) || !isfinite(cfg->params) || cfg->params > 1e13)
        return dd_error(DD_ERR_ARG, "plan: params = %g must be in [1, 1e13]", cfg->params);
    if (cfg->ranks < 1 || cfg->ranks > (1 << 24))
        return dd_error(DD_ERR_ARG, "plan: ranks = %d must be in [1, 16777216]", cfg->ranks);
    if (!(cfg->compute_s > 0) || !isfinite(cfg->compute_s))
        return dd_error(DD_ERR_ARG, "plan: compute time per step = %g s must be finite and > 0",
                        cfg->compute_s);
    if (!(cfg->backward_frac >= 0 && cfg->backward_frac <= 1))
        return dd_error(DD_ERR_ARG, "plan: backward_frac = %g must be in [0, 1]", cfg->backward_frac);
    if (cfg->ranks_per_node < 1)
        return dd_error(DD_ERR_ARG, "plan: ranks_per_node = %d must be >= 1", cfg->ranks_per_node);
    if (!(cfg->bucket_bytes >= 0) || !isfinite(cfg->bucket_bytes))
        return dd_error(DD_ERR_ARG, "plan: bucket_bytes = %g must be >= 0", cfg->bucket_bytes);
    if (!link_ok(&cfg->link))
        return dd_error(DD_ERR_ARG, "plan: link alpha/beta/gamma must be finite and >= 0");
    if (!link_ok(&cfg->intra))
        return dd_error(DD_ERR_ARG, "plan: intra-node link alpha/beta/gamma must be finite and >= 0");
    return DD_OK;
}

/* 1 when the planner may recommend algorithm a: it is modelled in its own right (not
 * through another's model, as mpi: recommend an explicit algorithm). */
static int recommendable(int a) {
    const dd_allreduce_def *d = dd_allreduce_def_of((dd_allreduce_algo)a);
    return d && !d->model_as;
}

static void fill_row(const dd_plan_cfg *cfg, double G, int p, dd_plan_row *row) {
    row->ranks = p;
    row->best = 0;
    for (int a = 0; a < dd_allreduce_count(); a++) {
        row->allreduce_s[a] = ar_time(cfg, (dd_allreduce_algo)a, p, G);
        row->efficiency[a] = best_eff(cfg, (dd_allreduce_algo)a, p, G, &row->bucket_bytes[a]);
        if (!recommendable(a)) continue;
        if (row->efficiency[a] > row->efficiency[row->best] + 1e-12) row->best = a;
    }
}

dd_status dd_plan_run(const dd_plan_cfg *cfg, dd_plan_result *out) {
    DD_TRY(cfg_check(cfg));
    memset(out, 0, sizeof *out);
    out->cfg = *cfg;
    double G = 4.0 * cfg->params;
    out->grad_bytes = G;
    int n = 0, placed = 0;
    for (int p = 8; p <= 4096; p *= 2) {
        if (!placed && cfg->ranks < p) {
            out->target_row = n;
            fill_row(cfg, G, cfg->ranks, &out->rows[n++]);
            placed = 1;
        }
        if (!placed && cfg->ranks == p) {
            out->target_row = n;
            placed = 1;
        }
        fill_row(cfg, G, p, &out->rows[n++]);
    }
    if (!placed) {
        out->target_row = n;
        fill_row(cfg, G, cfg->ranks, &out->rows[n++]);
    }
    out->nrows = n;
    const dd_plan_row *t = &out->rows[out->target_row];
    out->algo = t->best;
    out->bucket_bytes = t->bucket_bytes[t->best];
    out->efficiency = t->efficiency[t->best];
    out->step_s = cfg->compute_s / out->efficiency;
    /* latency bound: alpha terms vs the whole allreduce of the best bucket */
    dd_plan_cfg lat = *cfg;
    lat.link.beta = lat.link.beta1 = lat.link.gamma = 0;
    lat.intra.beta = lat.intra.beta1 = lat.intra.gamma = 0;
    double full = ar_time(cfg, (dd_allreduce_algo)out->algo, cfg->ranks, out->bucket_bytes);
    double al = ar_time(&lat, (dd_allreduce_algo)out->algo, cfg->ranks, out->bucket_bytes);
    out->latency_bound = full > 0 && al > 0.5 * full;
    /* compression: gradient bytes / ratio, same compute */
    out->compression_ratio = 0;
    if (out->efficiency >= 0.9) {
        out->compression_ratio = 1;
    } else {
        for (int k = 1; k <= 10; k++) { /* ratios 2, 4, ..., 1024 (cert-flp30-c: no float counter) */
            const double r = (double)(1 << k);
            double best = 0;
            for (int a = 0; a < dd_allreduce_count(); a++)
                if (recommendable(a)) best = fmax(best, best_eff(cfg, (dd_allreduce_algo)a, cfg->ranks, G / r, NULL));
            if (best >= 0.9) {
                out->compression_ratio = r;
                break;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        const dd_plan_row *rw = &out->rows[i];
        double e = rw->efficiency[rw->best];
        if (rw->ranks >= 8 && e >= 0.9 && rw->ranks > out->max_ranks_90) out->max_ranks_90 = rw->ranks;
        if (rw->ranks >= 8 && e >= 0.5 && rw->ranks > out->max_ranks_50) out->max_ranks_50 = rw->ranks;
    }
    return DD_OK;
}

/* ---- JSON ------------------------------------------------------------------------ */

static cJSON *link_json(const dd_link *l, const char *name) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (name) cJSON_AddStringToObject(o, "name", name);
    cJSON_AddNumberToObject(o, "alpha_s", l->alpha);
    cJSON_AddNumberToObject(o, "beta_s_per_byte", l->beta);
    cJSON_AddNumberToObject(o, "gamma_s_per_byte", l->gamma);
    cJSON_AddNumberToObject(o, "alpha_oneway_s", l->alpha1);
    cJSON_AddNumberToObject(o, "beta_oneway_s_per_byte", l->beta1);
    cJSON_AddNumberToObject(o, "bandwidth_bytes_per_s", l->beta > 0 ? 1.0 / l->beta : 0.0);
    return o;
}

dd_status dd_plan_json(const dd_plan_result *r, const char *link_name, const char *intra_name,
                       char **json) {
    if (!r || !json) return dd_error(DD_ERR_ARG, "dd_plan_json: NULL argument");
    *json = NULL;
    cJSON *root = cJSON_CreateObject(), *in = NULL, *rows = NULL, *rec = NULL;
    if (!root) goto nomem;
    in = cJSON_AddObjectToObject(root, "inputs");
    if (!in) goto nomem;
    cJSON_AddNumberToObject(in, "params", r->cfg.params);
    cJSON_AddNumberToObject(in, "grad_bytes", r->grad_bytes);
    cJSON_AddNumberToObject(in, "ranks", r->cfg.ranks);
    cJSON_AddNumberToObject(in, "ranks_per_node", r->cfg.ranks_per_node);
    cJSON_AddNumberToObject(in, "compute_s", r->cfg.compute_s);
    cJSON_AddNumberToObject(in, "backward_frac", r->cfg.backward_frac);
    cJSON_AddNumberToObject(in, "bucket_bytes", r->cfg.bucket_bytes);
    cJSON_AddBoolToObject(in, "overlap", r->cfg.overlap != 0);
    cJSON_AddItemToObject(in, "link", link_json(&r->cfg.link, link_name));
    cJSON_AddItemToObject(in, "intra_link", link_json(&r->cfg.intra, intra_name));
    rows = cJSON_AddArrayToObject(root, "table");
    if (!rows) goto nomem;
    for (int i = 0; i < r->nrows; i++) {
        const dd_plan_row *w = &r->rows[i];
        cJSON *o = cJSON_CreateObject(), *ar, *ef, *bk;
        if (!o) goto nomem;
        cJSON_AddItemToArray(rows, o);
        cJSON_AddNumberToObject(o, "ranks", w->ranks);
        ar = cJSON_AddObjectToObject(o, "allreduce_s");
        ef = cJSON_AddObjectToObject(o, "efficiency");
        bk = cJSON_AddObjectToObject(o, "bucket_bytes");
        if (!ar || !ef || !bk) goto nomem;
        for (int a = 0; a < dd_allreduce_count(); a++) {
            const char *nm = dd_allreduce_name((dd_allreduce_algo)a);
            cJSON_AddNumberToObject(ar, nm, w->allreduce_s[a]);
            cJSON_AddNumberToObject(ef, nm, w->efficiency[a]);
            cJSON_AddNumberToObject(bk, nm, w->bucket_bytes[a]);
        }
        cJSON_AddStringToObject(o, "best", dd_allreduce_name((dd_allreduce_algo)w->best));
    }
    rec = cJSON_AddObjectToObject(root, "recommendation");
    if (!rec) goto nomem;
    cJSON_AddNumberToObject(rec, "ranks", r->cfg.ranks);
    cJSON_AddStringToObject(rec, "allreduce", dd_allreduce_name((dd_allreduce_algo)r->algo));
    cJSON_AddNumberToObject(rec, "bucket_bytes", r->bucket_bytes);
    cJSON_AddNumberToObject(rec, "efficiency", r->efficiency);
    cJSON_AddNumberToObject(rec, "step_s", r->step_s);
    cJSON_AddBoolToObject(rec, "latency_bound", r->latency_bound != 0);
    cJSON_AddNumberToObject(rec, "compression_ratio_for_90pct", r->compression_ratio);
    cJSON_AddNumberToObject(rec, "max_ranks_efficiency_90", r->max_ranks_90);
    cJSON_AddNumberToObject(rec, "max_ranks_efficiency_50", r->max_ranks_50);
    *json = cJSON_Print(root);
    cJSON_Delete(root);
    if (!*json) return dd_error(DD_ERR_NOMEM, "dd_plan_json: out of memory");
    return DD_OK;
nomem:
    cJSON_Delete(root);
    return dd_error(DD_ERR_NOMEM, "dd_plan_json: out of memory");
}

/* ---- measurement ----------------------------------------------------------------- */

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The lower quartile of v (sorted in place). Timing noise on a shared machine is
 * one-sided (a rank preempted by another job makes a repeat slower, never faster), so a
 * low quantile estimates the undisturbed time better than the median: with a quarter of
 * the repeats disturbed (as seen here, docs/comm.md) the median is still hit often. */
static double lower_quartile(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return v[(n - 1) / 4];
}

/* Element-wise maximum over ranks of t[0..n) (a repeat takes as long as its slowest
 * rank), then the lower quartile over the repeats. */
static dd_status max_quartile(dd_comm *c, double *t, int n, double *out) {
    if (c->is_mpi && c->size > 1) {
        int rc = MPI_Allreduce(MPI_IN_PLACE, t, n, MPI_DOUBLE, MPI_MAX, c->mc);
        if (rc != MPI_SUCCESS) return dd_comm_mpi_error(rc, "calibration: MPI_Allreduce(MAX)");
    }
    *out = lower_quartile(t, n);
    return DD_OK;
}

dd_status dd_plan_measure(dd_comm *c, const dd_allreduce_algo *algos, int nalgo,
                          const size_t *bytes, int nsizes, int reps, double *seconds) {
    if (!c || !algos || !bytes || !seconds)
        return dd_error(DD_ERR_ARG, "dd_plan_measure: NULL argument");
    if (reps < 1 || reps > 100000 || nalgo < 1 || nsizes < 1)
        return dd_error(DD_ERR_ARG, "dd_plan_measure: reps = %d, nalgo = %d, nsizes = %d must be >= 1",
                        reps, nalgo, nsizes);
    size_t maxb = 0;
    for (int i = 0; i < nsizes; i++) maxb = bytes[i] > maxb ? bytes[i] : maxb;
    if (maxb / sizeof(float) > INT_MAX) return dd_error(DD_ERR_ARG, "dd_plan_measure: size too large");
    size_t n = maxb / sizeof(float), cells = (size_t)nalgo * (size_t)nsizes;
    dd_status s = DD_OK;
    float *buf = malloc((n ? n : 1) * sizeof *buf), *orig = malloc((n ? n : 1) * sizeof *orig);
    double *t = malloc(cells * (size_t)reps * sizeof *t);
    if (!buf || !orig || !t) {
        s = dd_error(DD_ERR_NOMEM, "dd_plan_measure: out of memory (%zu bytes)", maxb);
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) orig[i] = 1e-3f * (float)(i % 1000);
    for (int r = -1; r < reps; r++)
        for (int a = 0; a < nalgo; a++)
            for (int i = 0; i < nsizes; i++) {
                size_t k = bytes[i] / sizeof(float);
                /* an untimed call of the same algorithm and size first: a timed call
                 * follows one like it, as a gradient bucket's allreduce follows the
                 * previous bucket's (not a call of another size: on MPICH a 64 KB call
                 * right after a 4 MB one takes 1.5-2x as long; docs/comm.md) */
                memcpy(buf, orig, k * sizeof *buf);
                if ((s = dd_comm_allreduce(c, algos[a], buf, k, DD_F32)) != DD_OK) goto cleanup;
                memcpy(buf, orig, k * sizeof *buf);
                if ((s = dd_comm_barrier(c)) != DD_OK) goto cleanup;
                double t0 = dd_comm_wtime();
                if ((s = dd_comm_allreduce(c, algos[a], buf, k, DD_F32)) != DD_OK) goto cleanup;
                if (r >= 0) t[((size_t)a * (size_t)nsizes + (size_t)i) * (size_t)reps + (size_t)r] =
                    dd_comm_wtime() - t0;
            }
    for (size_t j = 0; j < cells; j++)
        if ((s = max_quartile(c, t + j * (size_t)reps, reps, &seconds[j])) != DD_OK) goto cleanup;
cleanup:
    free(buf);
    free(orig);
    free(t);
    return s;
}

/* Steps chained back to back per timed repeat, as inside an algorithm (no barrier
 * between them, so barrier exit skew does not count as latency). */
#define CHAIN 4

/* One timed repeat: CHAIN steps of `bytes` bytes back to back after a barrier, each step
 * what an algorithm's step does (src/comm/allreduce.c), on data as fresh as theirs:
 *  - the calls: MPI_Irecv + MPI_Isend, then the polled wait with the timeout
 *    (dd_comm_waitall), not MPI_Waitall or MPI_Send / MPI_Recv;
 *  - the data: what a step sends was written just before by this rank (the caller's
 *    gradients for the first step, the sum of the previous step after that), so `work`
 *    is refilled from `src` before the barrier (untimed) and every step sends what the
 *    previous one summed into.
 * The second point is the one that matters on MPICH (ch4:ucx, single-copy transfers of
 * large messages, the receiver reading the sender's memory): sending a buffer this rank
 * has just written costs about twice as much as resending an untouched one (256 KB:
 * 23 vs 11 us at 2 ranks), and the ping-pong of untouched buffers used before
 * predicted a 1 MB ring allreduce at a third of its measured time (docs/comm.md).
 * Open MPI's copy-in / copy-out shared memory shows no such difference.
 * Exchange (oneway = 0): every rank receives from its left neighbour into rb while
 * sending its current block to its right, then sums rb into the next block, which the
 * next step sends: step k sends work block k and sums into block k + 1 (CHAIN + 1 blocks
 * of `bytes`, all refilled from `src` before the barrier). That is a ring's
 * reduce-scatter (step k sends the block it reduced at step k - 1 and reduces into one
 * it has not sent); the sums are timed separately. Summing into the block just sent
 * instead (as this did before 2026-12-03) is not what any algorithm does, and on MPICH
 * it is what the single-copy transfer makes expensive: the peer has just read that
 * block, and writing it back right after costs (on the AMD EPYC Zen 5 KVM guest, 16 KB
 * .. 1 MB) 0.50 ns/B against 0.07 ns/B for the same sum repeated or on private data
 * (gamma 7x too high, every prediction of ring, tree and rhd +40 .. +150 %;
 * docs/comm.md, "Calibration"). Open MPI (copy-in / copy-out) shows no difference.
 * One-way (oneway = 1): ping-pong between ranks 0 and 1
 * (each rank alternately sending `work` and receiving into it, like the steps of a
 * binomial reduce followed by a broadcast that forwards what it received) while the
 * other ranks wait. *t_step: this rank's time per step without the sums; *t_add: per
 * sum. */
static dd_status time_once(dd_comm *c, size_t bytes, int oneway, int tag, const char *src, char *rb,
                           char *work, double *t_step, double *t_add) {
    int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
    for (int k = 0; k <= (oneway ? 0 : CHAIN); k++) memcpy(work + (size_t)k * bytes, src, bytes);
    int rc = MPI_Barrier(c->mc);
    if (rc != MPI_SUCCESS) return dd_comm_mpi_error(rc, "calibration: MPI_Barrier");
    dd_status s = DD_OK;
    double t0 = MPI_Wtime(), tsum = 0;
    for (int k = 0; k < CHAIN && s == DD_OK; k++) {
        if (oneway) {
            int peer = c->rank ^ 1; /* pairs (0,1), (2,3), ...; an odd last rank waits */
            if (peer >= c->size) break;
            int sending = (c->rank & 1) == (k % 2 == 0); /* odd -> even, then back */
            MPI_Request rq = MPI_REQUEST_NULL;
            rc = sending ? MPI_Isend(work, (int)bytes, MPI_BYTE, peer, tag, c->mc, &rq)
                         : MPI_Irecv(work, (int)bytes, MPI_BYTE, peer, tag, c->mc, &rq);
            if (rc != MPI_SUCCESS) return dd_comm_mpi_error(rc, "calibration: one-way step");
            s = dd_comm_waitall(1, &rq, NULL, "calibration: one-way step");
            continue;
        }
        char *blk = work + (size_t)k * bytes; /* block k: sent now; block k + 1: reduced into */
        s = dd_comm_sendrecv_bytes(c->mc, blk, bytes, right, rb, bytes, left, tag, "calibration: exchange");
        if (s == DD_OK) {
            double ta = MPI_Wtime();
            dd_comm_sum(blk + bytes, rb, bytes / sizeof(float), DD_F32);
            tsum += MPI_Wtime() - ta;
        }
    }
    if (s != DD_OK) return s;
    *t_step = (MPI_Wtime() - t0 - tsum) / CHAIN;
    *t_add = tsum / CHAIN;
    return DD_OK;
}

/* Weighted least squares of t = alpha + beta n minimising relative error, with alpha and
 * beta clamped at >= 0. */
static void fit_ab(const double *n, const double *t, int k, double *alpha, double *beta,
                   double *rel_rms) {
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < k; i++) {
        double w = 1.0 / (t[i] * t[i]);
        sw += w;
        sx += w * n[i];
        sy += w * t[i];
        sxx += w * n[i] * n[i];
        sxy += w * n[i] * t[i];
    }
    double det = sw * sxx - sx * sx, a = 0, b = 0;
    if (det > 0) {
        b = (sw * sxy - sx * sy) / det;
        a = (sy - b * sx) / sw;
    }
    if (b < 0) { /* latency only */
        b = 0;
        a = sy / sw;
    }
    if (a < 0) { /* bandwidth only: minimise sum w (b n - t)^2 */
        a = 0;
        b = sxx > 0 ? sxy / sxx : 0;
    }
    double e2 = 0;
    for (int i = 0; i < k; i++) {
        double r = (a + b * n[i] - t[i]) / t[i];
        e2 += r * r;
    }
    *alpha = a;
    *beta = b;
    *rel_rms = sqrt(e2 / k);
}

/* Points of at least this many bytes enter the alpha-beta fits. */
#define FIT_MIN_BYTES 16384.0

static void fit_points(const double *bytes, const double *secs, int n, double *alpha,
                       double *beta, double *rms) {
    double x[DD_CALIB_MAX_POINTS], y[DD_CALIB_MAX_POINTS];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (bytes[i] >= FIT_MIN_BYTES && secs[i] > 0) {
            x[k] = bytes[i];
            y[k] = secs[i];
            k++;
        }
    fit_ab(x, y, k, alpha, beta, rms);
}

dd_status dd_plan_calibrate(dd_comm *c, double reps_scale, dd_plan_calib *out) {
    if (!c || !out) return dd_error(DD_ERR_ARG, "dd_plan_calibrate: NULL argument");
    if (c->size < 2 || !c->is_mpi)
        return dd_error(DD_ERR_ARG,
                        "calibration needs at least 2 ranks (this run has %d): run under "
                        "mpirun -np 2 or more",
                        c->size);
    if (!(reps_scale > 0) || !isfinite(reps_scale) || reps_scale > 100)
        return dd_error(DD_ERR_ARG, "dd_plan_calibrate: reps_scale = %g must be in (0, 100]", reps_scale);
    memset(out, 0, sizeof *out);
    static const size_t sizes[] = {8, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304};
    static const int reps0[] = {201, 201, 151, 101, 61, 41, 21, 11};
    enum { NS = sizeof sizes / sizeof sizes[0], MAXREPS = 2000 };
    const size_t big = sizes[NS - 1];
    dd_status s = DD_OK;
    /* dst: the CHAIN + 1 working blocks of an exchange repeat (time_once) */
    char *sb = malloc(big), *rb = malloc(big), *dst = malloc((CHAIN + 1) * big);
    double *t = malloc(3 * NS * (size_t)MAXREPS * sizeof *t), tadd[NS];
    int reps[NS], maxreps = 0;
    if (!sb || !rb || !dst || !t) {
        s = dd_error(DD_ERR_NOMEM, "calibration: out of memory");
        goto cleanup;
    }
    /* float32 data of moderate size (no overflow or subnormals in the repeated sums);
     * time_once refills the working blocks from it before every repeat */
    for (size_t i = 0; i < big / sizeof(float); i++) ((float *)(void *)sb)[i] = 1e-3f * (float)(i % 1000);
    memset(rb, 0, big);
    for (int i = 0; i < NS; i++) {
        reps[i] = (int)ceil(reps0[i] * reps_scale);
        if (reps[i] < 3) reps[i] = 3;
        if (reps[i] > MAXREPS) reps[i] = MAXREPS;
        if (reps[i] > maxreps) maxreps = reps[i];
        out->bytes[i] = (double)sizes[i];
    }
    /* Repeats interleaved over sizes and modes (a burst of background load then touches
     * every size a little instead of one size entirely); two warm-up passes. */
    int tag = dd_comm_next_tag(c);
    double *tx = t, *ta = t + NS * MAXREPS, *t1 = t + 2 * NS * MAXREPS, dummy;
    for (int r = -2; r < maxreps; r++)
        for (int i = 0; i < NS; i++) {
            if (r >= reps[i]) continue;
            int k = i * MAXREPS + (r < 0 ? 0 : r);
            double d1, d2;
            /* each timed repeat right after an untimed one of the same size and kind, as
             * dd_plan_measure times a call after one like it */
            if ((s = time_once(c, sizes[i], 0, tag, sb, rb, dst, &d1, &d2)) != DD_OK ||
                (s = time_once(c, sizes[i], 0, tag, sb, rb, dst, &tx[k], &ta[k])) != DD_OK ||
                (s = time_once(c, sizes[i], 1, tag, sb, rb, dst, &d1, &d2)) != DD_OK ||
                (s = time_once(c, sizes[i], 1, tag, sb, rb, dst, &t1[k], &dummy)) != DD_OK)
                goto cleanup;
        }
    for (int i = 0; i < NS; i++) {
        int k = i * MAXREPS;
        if ((s = max_quartile(c, tx + k, reps[i], &out->seconds[i])) != DD_OK ||
            (s = max_quartile(c, ta + k, reps[i], &tadd[i])) != DD_OK ||
            (s = max_quartile(c, t1 + k, reps[i], &out->seconds1[i])) != DD_OK)
            goto cleanup;
    }
    out->npoints = NS;
    out->latency_s = out->seconds[0];
    out->fit_min_bytes = FIT_MIN_BYTES;
    fit_points(out->bytes, out->seconds, NS, &out->link.alpha, &out->link.beta, &out->fit_rel_rms);
    fit_points(out->bytes, out->seconds1, NS, &out->link.alpha1, &out->link.beta1, &out->fit1_rel_rms);
    /* gamma: t_add = gamma n through the origin, least squares on relative error */
    double num = 0, den = 0;
    for (int i = 0; i < NS; i++)
        if (sizes[i] >= FIT_MIN_BYTES && tadd[i] > 0) {
            num += out->bytes[i] / tadd[i];
            den += out->bytes[i] * out->bytes[i] / (tadd[i] * tadd[i]);
        }
    out->link.gamma = den > 0 ? num / den : 0;
    out->ranks = c->size;
    char host[64] = "";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    /* rank 0's host name and the time everywhere */
    int rc = MPI_Bcast(host, (int)sizeof host, MPI_CHAR, 0, c->mc);
    if (rc != MPI_SUCCESS) {
        s = dd_comm_mpi_error(rc, "calibration: MPI_Bcast");
        goto cleanup;
    }
    snprintf(out->host, sizeof out->host, "%s", host);
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(out->date, sizeof out->date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    rc = MPI_Bcast(out->date, (int)sizeof out->date, MPI_CHAR, 0, c->mc);
    if (rc != MPI_SUCCESS) s = dd_comm_mpi_error(rc, "calibration: MPI_Bcast");
cleanup:
    free(sb);
    free(rb);
    free(dst);
    free(t);
    return s;
}

/* ---- calibration file ------------------------------------------------------------ */

dd_status dd_plan_calib_save(const dd_plan_calib *cal, const char *path) {
    if (!cal || !path) return dd_error(DD_ERR_ARG, "dd_plan_calib_save: NULL argument");
    dd_status s = DD_OK;
    char *text = NULL, tmp[4096];
    FILE *f = NULL;
    cJSON *root = cJSON_CreateObject(), *pts;
    if (!root) goto nomem;
    cJSON_AddStringToObject(root, "format", "distdpd-calibration");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddStringToObject(root, "host", cal->host);
    cJSON_AddStringToObject(root, "date", cal->date);
    cJSON_AddNumberToObject(root, "ranks", cal->ranks);
    cJSON_AddStringToObject(root, "method",
                            "exchange: ring step (Isend right + Irecv left on every rank, polled wait, "
                            "sending data just written, summing into the block the next step sends); "
                            "one-way: pairs (0,1), (2,3).. ping-pong "
                            "forwarding what was received; lower quartile of repeats of the maximum over "
                            "ranks; t = alpha + beta n "
                            "fitted on relative error over points >= fit_min_bytes; gamma: float32 "
                            "sum of 1 MB");
    cJSON_AddNumberToObject(root, "alpha_s", cal->link.alpha);
    cJSON_AddNumberToObject(root, "beta_s_per_byte", cal->link.beta);
    cJSON_AddNumberToObject(root, "alpha_oneway_s", cal->link.alpha1);
    cJSON_AddNumberToObject(root, "beta_oneway_s_per_byte", cal->link.beta1);
    cJSON_AddNumberToObject(root, "gamma_s_per_byte", cal->link.gamma);
    cJSON_AddNumberToObject(root, "latency_s", cal->latency_s);
    cJSON_AddNumberToObject(root, "bandwidth_bytes_per_s", cal->link.beta > 0 ? 1.0 / cal->link.beta : 0.0);
    cJSON_AddNumberToObject(root, "bandwidth_oneway_bytes_per_s", cal->link.beta1 > 0 ? 1.0 / cal->link.beta1 : 0.0);
    cJSON_AddNumberToObject(root, "fit_rel_rms", cal->fit_rel_rms);
    cJSON_AddNumberToObject(root, "fit_oneway_rel_rms", cal->fit1_rel_rms);
    cJSON_AddNumberToObject(root, "fit_min_bytes", cal->fit_min_bytes);
    pts = cJSON_AddArrayToObject(root, "points");
    if (!pts) goto nomem;
    for (int i = 0; i < cal->npoints && i < DD_CALIB_MAX_POINTS; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o) goto nomem;
        cJSON_AddItemToArray(pts, o);
        cJSON_AddNumberToObject(o, "bytes", cal->bytes[i]);
        cJSON_AddNumberToObject(o, "seconds", cal->seconds[i]);
        cJSON_AddNumberToObject(o, "seconds_oneway", cal->seconds1[i]);
    }
    text = cJSON_Print(root);
    if (!text) goto nomem;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        s = dd_error(DD_ERR_ARG, "calibration file path too long: %s", path);
        goto cleanup;
    }
    f = fopen(tmp, "w");
    if (!f) {
        s = dd_error(DD_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
        goto cleanup;
    }
    int bad = fputs(text, f) < 0 || fputc('\n', f) == EOF || fflush(f) != 0 || fsync(fileno(f)) != 0;
    if (fclose(f) != 0) bad = 1;
    f = NULL;
    if (bad || rename(tmp, path) != 0) {
        s = dd_error(DD_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        remove(tmp);
    }
cleanup:
    free(text);
    cJSON_Delete(root);
    return s;
nomem:
    s = dd_error(DD_ERR_NOMEM, "dd_plan_calib_save: out of memory");
    goto cleanup;
}

static dd_status get_num(const cJSON *root, const char *path, const char *key, double lo, double hi,
                         double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return dd_error(DD_ERR_FORMAT, "%s: missing field '%s'", path, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' must be a number", path, key);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return dd_error(DD_ERR_FORMAT, "%s: field '%s' = %g out of range [%g, %g]", path, key,
                        v->valuedouble, lo, hi);
    *out = v->valuedouble;
    return DD_OK;
}

dd_status dd_plan_calib_load(const char *path, dd_plan_calib *out) {
    if (!path || !out) return dd_error(DD_ERR_ARG, "dd_plan_calib_load: NULL argument");
    memset(out, 0, sizeof *out);
    dd_status s = DD_OK;
    cJSON *root = NULL;
    char *text = NULL;
    DD_TRY(dd_read_text(path, &text, NULL));
    root = cJSON_Parse(text);
    if (!root || !cJSON_IsObject(root)) {
        s = dd_error(DD_ERR_FORMAT, "%s: not a JSON object", path);
        goto cleanup;
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "distdpd-calibration") != 0) {
        s = dd_error(DD_ERR_FORMAT, "%s: field 'format' must be \"distdpd-calibration\"", path);
        goto cleanup;
    }
    double ranks = 0;
    if ((s = get_num(root, path, "alpha_s", 0, 10, &out->link.alpha)) != DD_OK ||
        (s = get_num(root, path, "beta_s_per_byte", 0, 1, &out->link.beta)) != DD_OK ||
        (s = get_num(root, path, "gamma_s_per_byte", 0, 1, &out->link.gamma)) != DD_OK ||
        (s = get_num(root, path, "ranks", 1, INT_MAX, &ranks)) != DD_OK)
        goto cleanup;
    out->ranks = (int)ranks;
    /* one-way values are optional (a full-duplex link: the same as the exchange's) */
    out->link.alpha1 = out->link.alpha;
    out->link.beta1 = out->link.beta;
    if (cJSON_GetObjectItemCaseSensitive(root, "alpha_oneway_s") &&
        (s = get_num(root, path, "alpha_oneway_s", 0, 10, &out->link.alpha1)) != DD_OK)
        goto cleanup;
    if (cJSON_GetObjectItemCaseSensitive(root, "beta_oneway_s_per_byte") &&
        (s = get_num(root, path, "beta_oneway_s_per_byte", 0, 1, &out->link.beta1)) != DD_OK)
        goto cleanup;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "fit_rel_rms");
    if (cJSON_IsNumber(v)) out->fit_rel_rms = v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(root, "fit_oneway_rel_rms");
    if (cJSON_IsNumber(v)) out->fit1_rel_rms = v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(root, "fit_min_bytes");
    if (cJSON_IsNumber(v)) out->fit_min_bytes = v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(root, "latency_s");
    if (cJSON_IsNumber(v)) out->latency_s = v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(root, "host");
    if (cJSON_IsString(v)) snprintf(out->host, sizeof out->host, "%s", v->valuestring);
    v = cJSON_GetObjectItemCaseSensitive(root, "date");
    if (cJSON_IsString(v)) snprintf(out->date, sizeof out->date, "%s", v->valuestring);
    const cJSON *pts = cJSON_GetObjectItemCaseSensitive(root, "points"), *it;
    int k = 0;
    cJSON_ArrayForEach(it, pts) {
        if (k >= DD_CALIB_MAX_POINTS) break;
        double b = 0, t = 0;
        char where[1100];
        snprintf(where, sizeof where, "%.1000s: points[%d]", path, k);
        if ((s = get_num(it, where, "bytes", 0, 1e12, &b)) != DD_OK ||
            (s = get_num(it, where, "seconds", 0, 1e6, &t)) != DD_OK)
            goto cleanup;
        const cJSON *t1 = cJSON_GetObjectItemCaseSensitive(it, "seconds_oneway");
        out->bytes[k] = b;
        out->seconds[k] = t;
        out->seconds1[k] = cJSON_IsNumber(t1) ? t1->valuedouble : 0;
        k++;
    }
    out->npoints = k;
cleanup:
    cJSON_Delete(root);
    free(text);
    return s;
}
