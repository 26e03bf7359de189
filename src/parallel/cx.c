/* Gradient compression inside the strategies: the parts dp.c and model_parallel.c share
 * (cx.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/cx.h"

dd_status dd_cx_parse_args(const dd_strategy_args *a, dd_compress_cfg *c) {
    const char *spec = dd_strategy_arg(a, "compress");
    if (spec && dd_compress_parse(c, spec) != DD_OK) return DD_ERR_ARG; /* names --compress */
    const char *ef = dd_strategy_arg(a, "error-feedback");
    if (!ef) return DD_OK;
    if (strcmp(ef, "on") != 0 && strcmp(ef, "off") != 0)
        return dd_error(DD_ERR_ARG, "--error-feedback: expected on or off, got '%s'", ef);
    if (!spec && !a->resume)
        return dd_error(DD_ERR_ARG, "--error-feedback needs --compress (plain float32 gradients lose nothing)");
    if (!spec)
        return dd_error(DD_ERR_ARG, "--error-feedback needs --compress: %s was trained without it (plain float32 "
                                    "gradients lose nothing)",
                        a->resume);
    /* a lossless compressor (none, fp32) keeps no residual: the option would be ignored */
    dd_compressor *cp = NULL;
    const int lossy = dd_compress_create(c, &cp) == DD_OK && dd_compress_lossy(cp);
    dd_compress_destroy(&cp);
    if (!lossy)
        return dd_error(DD_ERR_ARG, "--error-feedback applies to lossy compressors only; %s loses nothing", c->name);
    c->error_feedback = !strcmp(ef, "on");
    return DD_OK;
}

void dd_cx_cfg_pack(const dd_compressor *cp, double *v) {
    const dd_compress_cfg *c = dd_compress_config(cp);
    v[0] = dd_compress_has_ef(cp); /* resolved: -1 (auto) and 1 are the same here */
    v[1] = c->density;
    v[2] = (double)c->chunk;
    v[3] = c->stochastic;
    v[4] = c->sampled;
    v[5] = c->sample;
    v[6] = c->rank;
    v[7] = c->momentum;
    v[8] = c->clip;
    v[9] = c->masking;
    v[10] = c->warmup;
    v[11] = (double)c->seed;
}

static void sect(char *buf, size_t cap, const char *prefix, const char *what) { snprintf(buf, cap, "%s.%s", prefix, what); }

dd_status dd_cx_save_cfg(dd_ckpt_writer *w, const dd_compressor *cp, const char *prefix) {
    const dd_compress_cfg *cc = dd_compress_config(cp);
    double cv[DD_CX_CFG_N];
    dd_cx_cfg_pack(cp, cv);
    char name[64], spec[512];
    sect(name, sizeof name, prefix, "name");
    DD_TRY(dd_ckpt_add_str(w, name, cc->name));
    dd_compress_spec(cc, spec, sizeof spec);
    DD_TRY(dd_ckpt_add_str(w, "compress.spec", spec)); /* what --resume continues with */
    sect(name, sizeof name, prefix, "cfg");
    return dd_ckpt_add(w, name, cv, sizeof cv);
}

dd_status dd_cx_cfg_match(const dd_ckpt_reader *r, const dd_compressor *cp, const char *prefix, int log, int *same) {
    const dd_compress_cfg *cc = dd_compress_config(cp);
    char sname[64], scfg[64];
    sect(sname, sizeof sname, prefix, "name");
    sect(scfg, sizeof scfg, prefix, "cfg");
    *same = 0;
    if (!dd_ckpt_has(r, sname)) {
        if (log)
            dd_log(DD_LOG_INFO, "the checkpoint has no compression state for this layout: %s starts with a zero residual",
                   cc->name);
        return DD_OK;
    }
    const char *name = NULL;
    DD_TRY(dd_ckpt_get_str(r, sname, &name));
    const void *d = NULL;
    size_t bytes = 0;
    double cv[DD_CX_CFG_N], mine[DD_CX_CFG_N];
    DD_TRY(dd_ckpt_get(r, scfg, &d, &bytes));
    if (bytes != sizeof cv)
        return dd_error(DD_ERR_FORMAT, "checkpoint section %s: %zu bytes, expected %zu", scfg, bytes, sizeof cv);
    memcpy(cv, d, sizeof cv);
    dd_cx_cfg_pack(cp, mine);
    /* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison,cert-exp42-c,cert-flp37-c): the very same bits (no padding in double[]) */
    if (strcmp(name, cc->name) != 0 || memcmp(cv, mine, sizeof cv) != 0) {
        if (log)
            dd_log(DD_LOG_WARN, "the checkpoint's compression state is for %s with other settings: %s starts with a zero "
                   "residual", name, cc->name);
        return DD_OK;
    }
    *same = 1;
    return DD_OK;
}

void dd_cx_gathered_free(dd_cx_gathered *g) {
    free(g->st);
    free(g->sh);
    free(g->cnt);
    memset(g, 0, sizeof *g);
}

dd_status dd_cx_gather(const dd_compressor *cp, dd_comm *c, dd_cx_gathered *g) {
    const int R = dd_comm_size(c), me = dd_comm_rank(c);
    dd_cx_gathered_free(g);
    size_t m = 0, ns = 0;
    DD_TRY(dd_compress_state_export(cp, NULL, &m));
    DD_TRY(dd_compress_shared_export(cp, NULL, &ns));
    g->cnt = calloc(4 * (size_t)R, sizeof *g->cnt);
    uint64_t mine[2] = {m, ns}, *all = calloc(2 * (size_t)R, sizeof *all);
    float *st = malloc((m ? m : 1) * sizeof(float)), *sh = malloc((ns ? ns : 1) * sizeof(float));
    size_t *bc = calloc(2 * (size_t)R, sizeof *bc);
    dd_status s = g->cnt && all && st && sh && bc ? DD_OK : dd_error(DD_ERR_NOMEM, "out of memory for the compression state");
    if (s == DD_OK) {
        g->off = g->cnt + R;
        g->scnt = g->off + R;
        g->soff = g->scnt + R;
        s = R > 1 ? dd_comm_allgather(c, mine, sizeof mine, all) : DD_OK;
        if (R == 1) memcpy(all, mine, sizeof mine);
    }
    for (int q = 0; s == DD_OK && q < R; q++) {
        g->cnt[q] = (size_t)all[2 * q];
        g->off[q] = g->total;
        g->total += g->cnt[q];
        g->scnt[q] = (size_t)all[2 * q + 1];
        g->soff[q] = g->stotal;
        g->stotal += g->scnt[q];
    }
    if (s == DD_OK && me == 0) {
        g->st = malloc((g->total ? g->total : 1) * sizeof(float));
        g->sh = malloc((g->stotal ? g->stotal : 1) * sizeof(float));
        if (!g->st || !g->sh) s = dd_error(DD_ERR_NOMEM, "out of memory for the compression state (%zu floats)", g->total);
    }
    if (s == DD_OK) s = dd_compress_state_export(cp, st, &m);
    if (s == DD_OK) s = dd_compress_shared_export(cp, sh, &ns);
    for (int pass = 0; s == DD_OK && pass < 2; pass++) {
        const size_t *cn = pass ? g->scnt : g->cnt, *of = pass ? g->soff : g->off;
        for (int q = 0; q < R; q++) {
            bc[q] = cn[q] * sizeof(float);
            bc[R + q] = of[q] * sizeof(float);
        }
        if (R > 1) s = dd_comm_gatherv(c, pass ? sh : st, pass ? g->sh : g->st, bc, bc + R, 0);
        else if (bc[0]) memcpy(pass ? g->sh : g->st, pass ? sh : st, bc[0]);
    }
    free(all);
    free(st);
    free(sh);
    free(bc);
    if (s != DD_OK) {
        dd_cx_gathered_free(g);
        return dd_error_prefix(s, "gathering the compression state: ");
    }
    g->ok = 1;
    return DD_OK;
}

/* ---------------------------------------------------------------- epoch figures */

void dd_cx_epoch_start(dd_cx_epoch *e, uint64_t steps, uint64_t sent, const dd_compressor *cp) {
    dd_compress_stats cs;
    dd_compress_stats_get(cp, &cs);
    e->steps0 = steps;
    e->sent0 = sent;
    e->elem0 = cs.elements;
    e->payload0 = cs.payload_bytes;
    e->ctime0 = cs.compress_s + cs.decompress_s;
    e->prev_steps = 0;
    memset(e->prev, 0, sizeof e->prev);
    e->ckpt_ok = 0;
}

/* This rank's figures of the epoch so far (bytes sent, compressed elements, payload
 * bytes, compression seconds), plus, on rank 0, those before the resumed checkpoint. */
static void figures(const dd_cx_epoch *e, int rank, uint64_t sent, const dd_compressor *cp, double v[4]) {
    dd_compress_stats cs;
    dd_compress_stats_get(cp, &cs);
    v[0] = (double)(sent - e->sent0);
    v[1] = (double)(cs.elements - e->elem0);
    v[2] = (double)(cs.payload_bytes - e->payload0);
    v[3] = cs.compress_s + cs.decompress_s - e->ctime0;
    if (rank == 0)
        for (int k = 0; k < 4; k++) v[k] += e->prev[k];
}

dd_status dd_cx_epoch_gather(dd_cx_epoch *e, dd_comm *c, uint64_t steps, uint64_t sent, const dd_compressor *cp) {
    if (e->ckpt_ok) return DD_OK;
    double v[4];
    figures(e, dd_comm_rank(c), sent, cp, v);
    if (dd_comm_size(c) > 1) {
        dd_status s = dd_comm_allreduce(c, DD_ALLREDUCE_RING, v, 4, DD_F64);
        if (s != DD_OK) return dd_error_prefix(s, "epoch statistics for the checkpoint: ");
    }
    e->ckpt[0] = dd_comm_size(c);
    e->ckpt[1] = (double)(e->prev_steps + (steps - e->steps0));
    for (int k = 0; k < 4; k++) e->ckpt[2 + k] = v[k];
    e->ckpt_ok = 1;
    return DD_OK;
}

dd_status dd_cx_epoch_save(const dd_cx_epoch *e, dd_ckpt_writer *w) {
    return e->ckpt_ok ? dd_ckpt_add(w, "dp.epoch_comm", e->ckpt, sizeof e->ckpt) : DD_OK;
}

dd_status dd_cx_epoch_load(dd_cx_epoch *e, const dd_ckpt_reader *r, dd_comm *c, uint64_t steps, uint64_t sent,
                           const dd_compressor *cp) {
    dd_cx_epoch_start(e, steps, sent, cp);
    if (!dd_ckpt_has(r, "dp.epoch_comm")) return DD_OK;
    const void *d = NULL;
    size_t bytes = 0;
    double x[6];
    DD_TRY(dd_ckpt_get(r, "dp.epoch_comm", &d, &bytes));
    if (bytes != sizeof x)
        return dd_error(DD_ERR_FORMAT, "checkpoint section dp.epoch_comm: %zu bytes, expected %zu", bytes, sizeof x);
    memcpy(x, d, sizeof x);
    if (!(x[0] >= 1 && x[1] >= 0 && x[1] < 1e15))
        return dd_error(DD_ERR_FORMAT, "checkpoint section dp.epoch_comm: %g ranks, %g steps", x[0], x[1]);
    e->prev_steps = (uint64_t)x[1];
    const int size = dd_comm_size(c);
    if (dd_comm_rank(c) == 0) { /* sums over x[0] ranks, as if over this many */
        const double scale = x[0] == size ? 1.0 : (double)size / x[0];
        for (int k = 0; k < 4; k++) e->prev[k] = x[2 + k] * scale;
    }
    return DD_OK;
}

dd_status dd_cx_epoch_end(dd_cx_epoch *e, dd_comm *c, uint64_t steps, uint64_t sent, const dd_compressor *cp,
                          double out[3]) {
    const double nsteps = (double)(e->prev_steps + (steps - e->steps0));
    double v[4];
    const int size = dd_comm_size(c);
    figures(e, dd_comm_rank(c), sent, cp, v);
    dd_cx_epoch_start(e, steps, sent, cp);
    if (size > 1) {
        dd_status s = dd_comm_allreduce(c, DD_ALLREDUCE_RING, v, 4, DD_F64);
        if (s != DD_OK) return dd_error_prefix(s, "epoch statistics: ");
    }
    out[0] = nsteps > 0 ? v[0] / size / nsteps : 0.0; /* per rank and step */
    out[1] = cp && v[2] > 0 ? 4.0 * v[1] / v[2] : 1.0;
    out[2] = v[3] / size;
    return DD_OK;
}

/* ---------------------------------------------------------------- reporting */

dd_status dd_cx_report(const dd_compressor *cp, cJSON *o) {
    char spec[512] = "none";
    if (cp) dd_compress_spec(dd_compress_config(cp), spec, sizeof spec);
    cJSON_AddStringToObject(o, "compress", spec);
    if (!cp) return DD_OK;
    dd_compress_stats cs;
    dd_compress_stats_get(cp, &cs);
    double ns = cs.steps ? (double)cs.steps : 1.0;
    cJSON *k = cJSON_AddObjectToObject(o, "rank0_compression");
    if (!k) return DD_ERR_NOMEM;
    cJSON_AddBoolToObject(k, "error_feedback", dd_compress_has_ef(cp));
    cJSON_AddNumberToObject(k, "compression_ratio", dd_compress_ratio(&cs));
    cJSON_AddNumberToObject(k, "payload_bytes_per_step", (double)cs.payload_bytes / ns);
    cJSON_AddNumberToObject(k, "bytes_sent_per_step", (double)cs.bytes_sent / ns);
    cJSON_AddNumberToObject(k, "compress_s_per_step", cs.compress_s / ns);
    cJSON_AddNumberToObject(k, "decompress_s_per_step", cs.decompress_s / ns);
    cJSON_AddNumberToObject(k, "comm_s_per_step", cs.comm_s / ns);
    return DD_OK;
}

void dd_cx_print_summary(const dd_compressor *cp, double steps, FILE *f) {
    if (!cp) return;
    const double n = steps > 0 ? steps : 1.0;
    dd_compress_stats cs;
    dd_compress_stats_get(cp, &cs);
    fprintf(f, "compression: %s%s: ratio %.1fx against float32, %.0f bytes sent per step, compress+decompress "
               "%.3f ms/step (rank 0)\n",
            dd_compress_config(cp)->name, dd_compress_has_ef(cp) ? " with error feedback" : "", dd_compress_ratio(&cs),
            (double)cs.bytes_sent / n, 1e3 * (cs.compress_s + cs.decompress_s) / n);
}

void dd_cx_print_epoch(const dd_compressor *cp, const dd_epoch_record *rec, uint64_t steps, FILE *f) {
    if (!cp || !rec || !steps) return;
    fprintf(f, "           compression %s: ratio %.1fx, %.0f bytes sent per rank per step, compress+decompress "
               "%.3f ms/step\n",
            dd_compress_config(cp)->name, rec->compression_ratio, rec->comm_bytes_per_step,
            1e3 * rec->compress_time_s / (double)steps);
}
