/* The federated-averaging coordinator (fed-server, docs/federated.md): benches connect
 * out to its ROUTER socket (CURVE, ZAP allow list); each round it samples a fraction of
 * the connected benches, sends them the global weights, gathers their updates within a
 * timeout, aggregates them (fed.h: mean, median, trimmed mean, Krum), adds the
 * differential-privacy noise, steps the server optimiser, has every bench evaluate the
 * new global model on its own test split (only squared-error sums come back) and writes
 * one metrics.jsonl line and the last/best checkpoints of its run directory. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cjson/cJSON.h>

#include "distdpd/fednet.h"
#include "distdpd/model.h"
#include "distdpd/secagg.h"

#define WHO "fed-server"

typedef struct {
    uint8_t rid[256];
    size_t rid_n;
    char name[96];  /* the allow file's label of its key (or its peer string) */
    char peer[192];
    int alive;
    int gone;       /* declared gone for its silence (not left, not replaced): taken back when heard again */
    uint32_t index;
    int64_t heard;  /* ms of the last message */
    uint64_t frames;
    /* the round in progress */
    int sampled, answered;
    float *delta, *dc;
    double loss, norm;
    uint64_t upd_frames;
    int sa_answered; /* --secure: answered the secure-aggregation round in progress */
    /* evaluation in progress */
    int eval_pending, eval_done;
    double err, ref;
} bench_t;

typedef struct {
    const dd_fed_server_opts *o;
    const dd_fed_algo *algo;
    void *ctx, *router;
    dd_net_zap *zap;
    uint32_t max_payload;
    size_t n;            /* parameters */
    bench_t *b;
    int nb, cap;
    uint64_t round;      /* the round in progress (0 before the first) */
    uint64_t eval_round; /* the evaluation in progress (0 none) */
    int open;            /* the round's updates are being gathered */
    dd_secagg_server *sa;/* --secure: the round's secure aggregation */
    char *cfg_json;
    dd_nbuf buf;
    /* per-round counters */
    uint64_t bytes_up, bytes_down, bytes_eval, late, refused;
} srv_t;

static bench_t *find(srv_t *s, const dd_net_msg *m) {
    for (int i = 0; i < s->nb; i++)
        if (s->b[i].alive && s->b[i].rid_n == m->rid_n && memcmp(s->b[i].rid, m->rid, m->rid_n) == 0) return &s->b[i];
    return NULL;
}

/* A bench declared gone for its silence that is heard again (a bench starved of CPU, a
 * network stall longer than --dead-ms) is a member again: its later messages are served
 * (a late update of a closed round is discarded as any late update). */
static bench_t *revive(srv_t *s, const dd_net_msg *m) {
    for (int i = 0; i < s->nb; i++) {
        bench_t *b = &s->b[i];
        if (b->gone && b->rid_n == m->rid_n && memcmp(b->rid, m->rid, m->rid_n) == 0) {
            b->alive = 1;
            b->gone = 0;
            dd_log(DD_LOG_WARN, WHO ": bench %s is heard again: a member again", b->name);
            return b;
        }
    }
    return NULL;
}

static size_t send_to(srv_t *s, const uint8_t *rid, size_t rid_n, int type, const void *p, size_t len) {
    dd_net_send(s->router, rid, rid_n, type, s->round, 0, p, (uint32_t)len);
    return DD_NET_HEADER + len;
}

static void refuse(srv_t *s, const dd_net_msg *m, const char *why) {
    s->refused++;
    dd_log(DD_LOG_WARN, WHO ": refused a message from %s: %s", m->peer, why);
    if (m->rid_n) send_to(s, m->rid, m->rid_n, DD_MSG_ERR, why, strlen(why));
}

static int alive_count(const srv_t *s) {
    int k = 0;
    for (int i = 0; i < s->nb; i++) k += s->b[i].alive;
    return k;
}

static void on_hello(srv_t *s, const dd_net_msg *m) {
    dd_fed_hello h;
    if (dd_fed_dec_hello(m->payload, m->h.len, &h) != DD_OK) {
        refuse(s, m, dd_last_error());
        return;
    }
    bench_t *b = find(s, m);
    if (!b) {
        /* a bench that reconnects under the same key label replaces its old connection */
        const char *at = strchr(m->peer, '@');
        char name[96];
        snprintf(name, sizeof name, "%.*s", at ? (int)(at - m->peer) : (int)strlen(m->peer), m->peer);
        for (int i = 0; i < s->nb; i++)
            if (s->b[i].alive && strcmp(s->b[i].name, name) == 0) {
                dd_log(DD_LOG_WARN, WHO ": bench %s reconnected from %s: its old connection is dropped", name, m->peer);
                s->b[i].alive = 0;
            }
        /* a bench that left (bye), went silent or reconnected under this key label takes
         * its old slot and index back: coming back does not fill the table (before, each
         * return took a new slot, and after 256 no bench could join any more). It is in no
         * round or evaluation in progress (it was sent none). */
        for (int i = 0; i < s->nb && !b; i++)
            if (!s->b[i].alive && strcmp(s->b[i].name, name) == 0) b = &s->b[i];
        if (b) {
            memcpy(b->rid, m->rid, m->rid_n);
            b->rid_n = m->rid_n;
            snprintf(b->peer, sizeof b->peer, "%s", m->peer);
            b->alive = 1;
            b->gone = 0;
            b->sampled = b->answered = b->sa_answered = 0;
            b->eval_pending = b->eval_done = 0;
            dd_log(DD_LOG_INFO, WHO ": bench %s joined again from %s (%llu training samples)", b->name, m->peer,
                   (unsigned long long)h.samples);
        } else {
            if (s->o->secure && s->nb >= DD_SECAGG_MAX_ID) {
                refuse(s, m, "too many benches for secure aggregation (ids 1..255)");
                return;
            }
            if (s->nb == s->cap) {
                if (s->cap >= DD_FED_MAX_CLIENTS) {
                    refuse(s, m, "too many benches");
                    return;
                }
                int nc = s->cap ? 2 * s->cap : 16;
                bench_t *q = realloc(s->b, (size_t)nc * sizeof *q);
                if (!q) {
                    refuse(s, m, "out of memory");
                    return;
                }
                s->b = q;
                s->cap = nc;
            }
            b = &s->b[s->nb];
            memset(b, 0, sizeof *b);
            b->index = (uint32_t)s->nb++;
            memcpy(b->rid, m->rid, m->rid_n);
            b->rid_n = m->rid_n;
            snprintf(b->name, sizeof b->name, "%s", name);
            snprintf(b->peer, sizeof b->peer, "%s", m->peer);
            b->delta = malloc(s->n * sizeof(float));
            b->dc = s->algo->control ? malloc(s->n * sizeof(float)) : NULL;
            if (!b->delta || (s->algo->control && !b->dc)) {
                s->nb--;
                free(b->delta);
                free(b->dc);
                refuse(s, m, "out of memory");
                return;
            }
            b->alive = 1;
            dd_log(DD_LOG_INFO, WHO ": bench %s joined from %s (%llu training samples)", b->name, m->peer,
                   (unsigned long long)h.samples);
        }
    }
    b->frames = h.samples;
    b->heard = dd_net_ms();
    dd_fed_welcome w = {.index = b->index, .nparams = s->n, .cfg_json = s->cfg_json};
    dd_fed_enc_welcome(&s->buf, &w);
    send_to(s, b->rid, b->rid_n, DD_MSG_FED_WELCOME, s->buf.p, s->buf.n);
}

static void on_update(srv_t *s, bench_t *b, const dd_net_msg *m) {
    dd_fed_update u;
    if (dd_fed_dec_update(m->payload, m->h.len, s->n, s->algo->control, &u) != DD_OK) {
        refuse(s, m, dd_last_error());
        return;
    }
    if (u.round < s->round || (u.round == s->round && (!b->sampled || !s->open))) {
        s->late++;
        dd_log(DD_LOG_WARN, WHO ": late update of round %llu from bench %s discarded (round %llu in progress)",
               (unsigned long long)u.round, b->name, (unsigned long long)s->round);
        return;
    }
    if (u.round > s->round) {
        char why[128];
        snprintf(why, sizeof why, "fed-update: round %llu is ahead of the coordinator's %llu", (unsigned long long)u.round,
                 (unsigned long long)s->round);
        refuse(s, m, why);
        return;
    }
    if (b->answered) {
        dd_log(DD_LOG_WARN, WHO ": second update of round %llu from bench %s ignored", (unsigned long long)u.round, b->name);
        return;
    }
    memcpy(b->delta, u.delta, s->n * sizeof(float));
    if (b->dc) memcpy(b->dc, u.dc, s->n * sizeof(float));
    b->loss = u.loss;
    b->norm = u.norm;
    b->upd_frames = u.frames;
    b->answered = 1;
    s->bytes_up += m->n;
}

static void on_eval_rep(srv_t *s, bench_t *b, const dd_net_msg *m) {
    dd_fed_eval_rep e;
    if (dd_fed_dec_eval_rep(m->payload, m->h.len, &e) != DD_OK) {
        refuse(s, m, dd_last_error());
        return;
    }
    if (e.round != s->eval_round || !b->eval_pending || b->eval_done) {
        s->late++;
        dd_log(DD_LOG_WARN, WHO ": late evaluation of round %llu from bench %s discarded", (unsigned long long)e.round, b->name);
        return;
    }
    b->err = e.err;
    b->ref = e.ref;
    b->eval_done = 1;
    s->bytes_eval += m->n;
}

static void on_secagg(srv_t *s, bench_t *b, const dd_net_msg *m) {
    if (!s->sa || !b->sampled || !s->open) {
        s->late++;
        dd_log(DD_LOG_WARN, WHO ": secure-aggregation message from bench %s outside its round discarded (round %llu)", b->name,
               (unsigned long long)s->round);
        return;
    }
    if (dd_secagg_server_receive(s->sa, b->index + 1, m->payload, m->h.len) != DD_OK) {
        refuse(s, m, dd_last_error());
        return;
    }
    b->sa_answered = 1;
    s->bytes_up += m->n;
}

/* Serves the socket for up to wait_ms (one message at most) and notices silent benches. */
static dd_status pump(srv_t *s, long wait_ms) {
    dd_net_msg m;
    int r = dd_net_recv(s->router, 1, wait_ms, s->max_payload, &m);
    if (r < 0) return DD_ERR_COMM;
    int64_t now = dd_net_ms();
    if (r > 0) {
        bench_t *b = m.ok ? find(s, &m) : NULL;
        if (!b && m.ok) b = revive(s, &m);
        if (b) b->heard = now;
        if (!m.ok) refuse(s, &m, m.err);
        else if (m.h.type == DD_MSG_FED_HELLO) on_hello(s, &m);
        else if (!b) refuse(s, &m, "not joined: send fed-hello first");
        else if (m.h.type == DD_MSG_PING) send_to(s, b->rid, b->rid_n, DD_MSG_PONG, NULL, 0);
        else if (m.h.type == DD_MSG_FED_UPDATE) on_update(s, b, &m);
        else if (m.h.type == DD_MSG_FED_EVAL_REP) on_eval_rep(s, b, &m);
        else if (m.h.type == DD_MSG_FED_SECAGG) on_secagg(s, b, &m);
        else if (m.h.type == DD_MSG_BYE) {
            dd_log(DD_LOG_WARN, WHO ": bench %s left", b->name);
            b->alive = 0;
        } else {
            char why[96];
            snprintf(why, sizeof why, "unexpected message type %s from a bench", dd_msg_type_name(m.h.type));
            refuse(s, &m, why);
        }
    }
    dd_net_msg_free(&m);
    for (int i = 0; i < s->nb; i++)
        if (s->b[i].alive && now - s->b[i].heard > s->o->dead_ms) {
            dd_log(DD_LOG_WARN, WHO ": bench %s silent for %d ms: it is gone (until heard again)", s->b[i].name,
                   s->o->dead_ms);
            s->b[i].alive = 0;
            s->b[i].gone = 1;
        }
    return DD_OK;
}

static int stopped(const srv_t *s) { return s->o->stop && *s->o->stop; }

static double nmse_db(double err, double ref) { return ref > 0 ? 10.0 * log10(err / ref) : NAN; }

/* ---- run directory ---- */
static dd_status write_config(const srv_t *s, const char *path) {
    const dd_fed_server_opts *o = s->o;
    cJSON *root = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(root, "federation");
    cJSON_AddStringToObject(root, "task", "pa");
    cJSON_AddStringToObject(root, "kind", "federated");
    if (o->command) cJSON_AddStringToObject(root, "command", o->command);
    cJSON_AddNumberToObject(root, "n_params", (double)s->n);
    cJSON_AddItemToObject(root, "config", cJSON_Parse(s->cfg_json));
    cJSON_AddStringToObject(f, "algo", s->algo->name);
    cJSON_AddNumberToObject(f, "mu", o->mu);
    cJSON_AddNumberToObject(f, "rounds", o->rounds);
    cJSON_AddNumberToObject(f, "fraction", o->fraction);
    cJSON_AddNumberToObject(f, "min_clients", o->min_clients);
    cJSON_AddNumberToObject(f, "min_completion", o->min_completion);
    cJSON_AddStringToObject(f, "local", o->local_kind == DD_FED_LOCAL_EPOCHS ? "epochs" : "steps");
    cJSON_AddNumberToObject(f, "local_n", o->local_n);
    cJSON_AddStringToObject(f, "server_opt", dd_fed_sopt_names[o->sopt.kind]);
    cJSON_AddNumberToObject(f, "server_lr", o->sopt.lr);
    cJSON_AddNumberToObject(f, "server_momentum", o->sopt.momentum);
    cJSON_AddStringToObject(f, "agg", dd_agg_name(o->agg.kind));
    cJSON_AddNumberToObject(f, "trim", o->agg.trim);
    cJSON_AddNumberToObject(f, "byzantine", o->agg.byzantine);
    cJSON_AddNumberToObject(f, "dp_clip", o->dp_clip);
    cJSON_AddNumberToObject(f, "dp_noise", o->dp_noise);
    cJSON_AddNumberToObject(f, "dp_delta", o->dp_delta);
    cJSON_AddBoolToObject(f, "secure", o->secure);
    if (o->secure) cJSON_AddNumberToObject(f, "secure_range", o->secure_range);
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) return dd_error(DD_ERR_NOMEM, "config.json");
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *fp = fopen(tmp, "w");
    int ok = fp && fprintf(fp, "%s\n", txt) > 0;
    if (fp) ok = (fclose(fp) == 0) && ok;
    free(txt);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return dd_error(DD_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    return DD_OK;
}

static dd_status check_opts(const dd_fed_server_opts *o) {
    if (!o->bind || !o->key_path || !o->allow_path || !o->out)
        return dd_error(DD_ERR_ARG, "fed-server needs --bind, --key, --allow and --out");
    if (o->rounds < 1) return dd_error(DD_ERR_ARG, "--rounds must be >= 1");
    if (!(o->fraction > 0 && o->fraction <= 1)) return dd_error(DD_ERR_ARG, "--fraction %g outside (0, 1]", o->fraction);
    if (!(o->min_completion > 0 && o->min_completion <= 1))
        return dd_error(DD_ERR_ARG, "--min-completion %g outside (0, 1]", o->min_completion);
    if (o->min_clients < 1 || o->min_clients > DD_FED_MAX_CLIENTS)
        return dd_error(DD_ERR_ARG, "--min-clients %d outside [1, %d]", o->min_clients, DD_FED_MAX_CLIENTS);
    if (o->cfg.task != DD_TRAIN_PA) return dd_error(DD_ERR_UNSUPPORTED, "federated training trains PA models only");
    if (o->dp_clip > 0 && o->agg.kind != DD_AGG_MEAN)
        return dd_error(DD_ERR_ARG, "--dp-clip with --agg %s: the Gaussian mechanism's sensitivity C holds for the sum (--agg mean)",
                        dd_agg_name(o->agg.kind));
    if (o->dp_clip > 0 && !(o->dp_noise > 0)) return dd_error(DD_ERR_ARG, "--dp-clip needs --dp-noise SIGMA > 0");
    if (o->dp_noise > 0 && !(o->dp_clip > 0)) return dd_error(DD_ERR_ARG, "--dp-noise needs --dp-clip C > 0");
    if (o->dp_clip > 0 && !(o->dp_delta > 0 && o->dp_delta < 1)) return dd_error(DD_ERR_ARG, "--dp-delta %g outside (0, 1)", o->dp_delta);
    int na;
    const dd_fed_algo *const *algos = dd_fed_algos(&na);
    if (o->secure) {
        if (o->agg.kind != DD_AGG_MEAN)
            return dd_error(DD_ERR_ARG, "--secure with --agg %s: the coordinator sees only the sum (--agg mean)", dd_agg_name(o->agg.kind));
        if (o->algo >= 0 && o->algo < na && algos[o->algo]->control)
            return dd_error(DD_ERR_ARG, "--secure with --algo %s: its control variates are not aggregated securely", algos[o->algo]->name);
        if (o->min_clients < 2) return dd_error(DD_ERR_ARG, "--secure needs --min-clients >= 2 (a sum of one update is that update)");
        if (!(o->secure_range > 0) || (o->secure_ring != 32 && o->secure_ring != 64))
            return dd_error(DD_ERR_ARG, "--secure: range %g must be > 0 and the ring 32 or 64 bits", o->secure_range);
    }
    if (o->algo < 0 || o->algo >= na) return dd_error(DD_ERR_ARG, "algorithm index %d out of range", o->algo);
    /* robust aggregation needs enough benches: refuse at once what can never work */
    int m_min = o->min_clients;
    if (dd_agg_check(&o->agg, m_min) != DD_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", dd_last_error());
        return dd_error(DD_ERR_ARG, "--agg %s with --min-clients %d: %s", dd_agg_name(o->agg.kind), m_min, why);
    }
    return DD_OK;
}

void dd_fed_server_defaults(dd_fed_server_opts *o) {
    memset(o, 0, sizeof *o);
    dd_train_cfg_default(&o->cfg, DD_TRAIN_PA);
    o->rounds = 10;
    o->fraction = 1.0;
    o->min_clients = 1;
    o->min_completion = 1.0;
    o->wait_s = 60;
    o->round_timeout_s = 300;
    o->eval_timeout_s = 60;
    o->dead_ms = 10000;
    o->local_kind = DD_FED_LOCAL_EPOCHS;
    o->local_n = 1;
    o->mu = 0.01;
    o->sopt = (dd_fed_sopt_cfg){.kind = 0, .lr = 1.0, .momentum = 0.9, .beta2 = 0.99, .eps = 1e-3};
    o->agg.kind = DD_AGG_MEAN;
    o->dp_delta = 1e-5;
    o->eval_every = 1;
    o->secure_ring = 32;
}

static void sample_benches(srv_t *s, uint64_t round, int want, int *idx, int *k) {
    int na = 0;
    for (int i = 0; i < s->nb; i++)
        if (s->b[i].alive) idx[na++] = i;
    dd_rng r;
    dd_rng_seed(&r, dd_hash64(s->o->sample_seed, round));
    if (want > na) want = na;
    for (int i = 0; i < want; i++) { /* partial Fisher-Yates */
        int j = i + (int)dd_rng_below(&r, (uint64_t)(na - i));
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    /* aggregation order: by bench name, so that a run does not depend on arrival order */
    for (int i = 1; i < want; i++)
        for (int j = i; j > 0 && strcmp(s->b[idx[j - 1]].name, s->b[idx[j]].name) > 0; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    *k = want;
}

static dd_status wait_for_benches(srv_t *s, int want, double wait_s) {
    int64_t end = dd_net_ms() + (int64_t)(wait_s * 1000);
    while (alive_count(s) < want) {
        if (stopped(s)) return dd_error(DD_ERR_ARG, "stopped by a signal while waiting for benches");
        if (dd_net_ms() > end)
            return dd_error(DD_ERR_TIMEOUT, "%d of the %d benches needed (--min-clients) connected within %g s", alive_count(s),
                            want, wait_s);
        DD_TRY(pump(s, 100));
    }
    return DD_OK;
}

/* Has every live bench evaluate w (their sums land in the bench table); *answered: how many
 * returned theirs in time. */
static dd_status evaluate(srv_t *s, const float *w, int *answered) {
    s->eval_round = s->round;
    dd_fed_eval e = {.round = s->round, .nparams = s->n};
    dd_fed_enc_eval(&s->buf, &e, w);
    int pending = 0;
    for (int i = 0; i < s->nb; i++) {
        bench_t *b = &s->b[i];
        b->eval_pending = b->eval_done = 0;
        if (!b->alive) continue;
        b->eval_pending = 1;
        pending++;
        s->bytes_eval += send_to(s, b->rid, b->rid_n, DD_MSG_FED_EVAL, s->buf.p, s->buf.n);
    }
    int64_t end = dd_net_ms() + (int64_t)(s->o->eval_timeout_s * 1000);
    for (;;) {
        int left = 0;
        for (int i = 0; i < s->nb; i++) left += s->b[i].alive && s->b[i].eval_pending && !s->b[i].eval_done;
        if (!left || dd_net_ms() > end) break;
        DD_TRY(pump(s, 50));
    }
    *answered = 0;
    for (int i = 0; i < s->nb; i++) *answered += s->b[i].eval_pending && s->b[i].eval_done;
    if (*answered < pending)
        dd_log(DD_LOG_WARN, WHO ": round %llu: %d of %d benches returned their evaluation within %g s",
               (unsigned long long)s->round, *answered, pending, s->o->eval_timeout_s);
    s->eval_round = 0;
    return DD_OK;
}

/* --secure: the sampled benches' updates summed by secure aggregation (secagg.h) over its
 * four rounds, each waited for up to the round timeout; agg = their unweighted mean and
 * *got = how many are in it, or *got = 0 and why[] when it could not finish (too few
 * answers for the threshold). */
static dd_status secure_round(srv_t *s, const int *idx, int k, float *agg, int *got, char *why, size_t cap) {
    const dd_fed_server_opts *o = s->o;
    *got = 0;
    uint32_t ids[DD_SECAGG_MAX_ID];
    for (int i = 0; i < k; i++) ids[i] = s->b[idx[i]].index + 1;
    dd_secagg_cfg cfg = {.session = s->round, .d = s->n, .n = k, .ring_bits = o->secure_ring, .range = o->secure_range};
    if (k < 2) {
        snprintf(why, cap, "secure aggregation needs at least 2 benches, %d sampled", k);
        return DD_OK;
    }
    DD_TRY(dd_secagg_server_new(&cfg, ids, &s->sa));
    dd_status st = DD_OK;
    for (int phase = 0; phase < 4; phase++) {
        for (int i = 0; i < s->nb; i++) s->b[i].sa_answered = 0;
        uint32_t mem[DD_SECAGG_MAX_ID];
        int nm = dd_secagg_server_members(s->sa, mem, DD_SECAGG_MAX_ID);
        int64_t end = dd_net_ms() + (int64_t)(o->round_timeout_s * 1000);
        for (;;) {
            int left = 0;
            for (int i = 0; i < nm; i++) left += s->b[mem[i] - 1].alive && s->b[mem[i] - 1].sampled && !s->b[mem[i] - 1].sa_answered;
            if (!left || stopped(s)) break;
            if (dd_net_ms() > end) {
                dd_log(DD_LOG_WARN, WHO ": round %llu: %d benches did not answer secure-aggregation round %s within %g s",
                       (unsigned long long)s->round, left, dd_secagg_state_name(dd_secagg_server_state(s->sa)), o->round_timeout_s);
                break;
            }
            if ((st = pump(s, 50)) != DD_OK) goto done;
        }
        if (dd_secagg_server_close(s->sa) != DD_OK) {
            snprintf(why, cap, "%s", dd_last_error());
            goto done;
        }
        if (dd_secagg_server_state(s->sa) == DD_SECAGG_DONE) break;
        nm = dd_secagg_server_members(s->sa, mem, DD_SECAGG_MAX_ID);
        for (int i = 0; i < nm; i++) {
            uint8_t *out = NULL;
            size_t len = 0;
            if ((st = dd_secagg_server_message(s->sa, mem[i], &out, &len)) != DD_OK) goto done;
            bench_t *b = &s->b[mem[i] - 1];
            s->bytes_down += send_to(s, b->rid, b->rid_n, DD_MSG_FED_SECAGG, out, len);
            free(out);
        }
    }
    if (dd_secagg_server_state(s->sa) == DD_SECAGG_DONE) {
        int ns = 0;
        if ((st = dd_secagg_server_result(s->sa, agg, &ns)) != DD_OK) goto done;
        for (size_t j = 0; j < s->n; j++) agg[j] /= (float)ns;
        *got = ns;
    }
done:
    dd_secagg_server_free(s->sa);
    s->sa = NULL;
    return st;
}

static void json_num(cJSON *o, const char *k, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

dd_status dd_fed_server_run(const dd_fed_server_opts *o) {
    DD_TRY(check_opts(o));
    srv_t S, *s = &S;
    memset(s, 0, sizeof S);
    s->o = o;
    int na;
    s->algo = dd_fed_algos(&na)[o->algo];
    dd_status st = DD_OK;
    dd_run_lock *lock = NULL;
    dd_model *model = NULL;
    float *w = NULL, *c = NULL, *agg = NULL, *dcsum = NULL;
    const float **upd = NULL;
    double *wts = NULL, *rdp = NULL, orders[256];
    int *idx = NULL, *sel = NULL, n_orders = 0;
    dd_fed_sopt *sopt = NULL;
    FILE *mf = NULL;
    char path[4300], sec[DD_NET_KEY_Z85 + 1];
    dd_train_cfg cfg = o->cfg;
    cfg.epochs = o->rounds; /* the checkpoints' "epoch" is the round */

    /* the run directory: ours alone, and new */
    if ((st = dd_run_lock_acquire(o->out, 1, &lock)) != DD_OK) goto done;
    snprintf(path, sizeof path, "%s/metrics.jsonl", o->out);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        st = dd_error(DD_ERR_ARG, "%s already holds a run (%s): give a new --out", o->out, path);
        goto done;
    }
    /* the model and its initial parameters (as train-pa initialises them) */
    if ((st = dd_model_create(cfg.model, &cfg.model_cfg, &model)) != DD_OK) goto done;
    cfg.model_cfg = *dd_model_config(model);
    if ((st = dd_train_cfg_check(&cfg)) != DD_OK) goto done;
    s->n = dd_model_params(model)->total;
    w = calloc(s->n, sizeof *w);
    agg = calloc(s->n, sizeof *agg);
    upd = calloc(DD_FED_MAX_CLIENTS, sizeof *upd);
    wts = calloc(DD_FED_MAX_CLIENTS, sizeof *wts);
    idx = calloc(DD_FED_MAX_CLIENTS, sizeof *idx);
    sel = calloc(DD_FED_MAX_CLIENTS, sizeof *sel);
    if (s->algo->control) {
        c = calloc(s->n, sizeof *c);
        dcsum = calloc(s->n, sizeof *dcsum);
    }
    if (!w || !agg || !upd || !wts || !idx || !sel || (s->algo->control && (!c || !dcsum))) {
        st = dd_error(DD_ERR_NOMEM, WHO ": %zu parameters", s->n);
        goto done;
    }
    if ((st = dd_model_init(model, w, cfg.seed)) != DD_OK) goto done;
    if ((st = dd_fed_sopt_create(&o->sopt, s->n, &sopt)) != DD_OK) goto done;
    if ((st = dd_train_cfg_to_json(&cfg, &s->cfg_json)) != DD_OK) goto done;
    snprintf(path, sizeof path, "%s/config.json", o->out);
    if ((st = write_config(s, path)) != DD_OK) goto done;
    if (o->dp_clip > 0) {
        n_orders = dd_rdp_default_orders(orders, 256);
        rdp = calloc((size_t)n_orders, sizeof *rdp);
        if (!rdp) {
            st = dd_error(DD_ERR_NOMEM, "rdp");
            goto done;
        }
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", o->out);
    if (!(mf = fopen(path, "w"))) {
        st = dd_error(DD_ERR_IO, "%s: %s", path, strerror(errno));
        goto done;
    }
    /* the socket */
    /* an update with a control delta, or a secure-aggregation message: the masked vector
     * (ring 64: 8 bytes a value) or the key shares of up to 255 benches (124 bytes each) */
    s->max_payload = (uint32_t)(dd_fed_update_bytes(s->n, 1) + (1u << 17));
    if ((st = dd_net_key_read(o->key_path, 1, sec)) != DD_OK) goto done;
    {
        dd_net_allow *allow = NULL;
        if ((st = dd_net_allow_load(o->allow_path, &allow)) != DD_OK) goto done;
        s->ctx = zmq_ctx_new();
        if (!s->ctx) {
            dd_net_allow_free(&allow);
            st = dd_error(DD_ERR_NOMEM, "zmq context");
            goto done;
        }
        if ((st = dd_net_zap_start(s->ctx, allow, o->allow_path, WHO, &s->zap)) != DD_OK) goto done;
        st = dd_net_router(s->ctx, o->bind, sec, (int64_t)s->max_payload + DD_NET_HEADER, &s->router);
        memset(sec, 0, sizeof sec);
        if (st) goto done;
    }
    dd_log(DD_LOG_INFO, WHO ": %s with %zu parameters, %d rounds, listening on %s", cfg.model, s->n, o->rounds, o->bind);
    if ((st = wait_for_benches(s, o->start_clients > o->min_clients ? o->start_clients : o->min_clients, o->wait_s)) != DD_OK)
        goto done;

    double best = INFINITY;
    dd_rng noise;
    {
        uint64_t seed = 0;
        if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = (uint64_t)dd_net_ms() ^ ((uint64_t)getpid() << 32);
        dd_rng_seed(&noise, seed);
    }
    for (int r = 1; r <= o->rounds && !stopped(s); r++) {
        double t0 = dd_now();
        s->round = (uint64_t)r;
        s->bytes_up = s->bytes_down = s->bytes_eval = s->late = s->refused = 0;
        if (alive_count(s) < o->min_clients && (st = wait_for_benches(s, o->min_clients, o->wait_s)) != DD_OK) goto done;
        const int connected = alive_count(s);
        int want = (int)ceil(o->fraction * connected - 1e-9), k = 0;
        if (want < o->min_clients) want = o->min_clients;
        sample_benches(s, (uint64_t)r, want, idx, &k);
        for (int i = 0; i < s->nb; i++) s->b[i].sampled = s->b[i].answered = 0;
        dd_fed_round rm = {.round = (uint64_t)r, .algo = (uint8_t)o->algo, .local_kind = (uint8_t)o->local_kind,
                           .local_n = (uint32_t)o->local_n, .mu = o->mu, .dp_clip = o->dp_clip, .nparams = s->n,
                           .secure = (uint8_t)o->secure, .sa_n = (uint32_t)k, .sa_ring = (uint32_t)o->secure_ring,
                           .sa_range = o->secure_range};
        dd_fed_enc_round(&s->buf, &rm, w, c);
        for (int i = 0; i < k; i++) {
            bench_t *b = &s->b[idx[i]];
            b->sampled = 1;
            s->bytes_down += send_to(s, b->rid, b->rid_n, DD_MSG_FED_ROUND, s->buf.p, s->buf.n);
        }
        int got = 0, aggregated = 0;
        double loss_sum = 0, frames_sum = 0, norm_max = 0;
        char why[256] = "";
        if (o->secure) { /* the benches' masked updates: only their sum */
            s->open = 1;
            st = secure_round(s, idx, k, agg, &got, why, sizeof why);
            s->open = 0;
            if (st) goto done;
            for (int i = 0; i < k; i++) s->b[idx[i]].answered = 0;
            goto aggregate;
        }
        /* gather the updates: until all sampled answered or are gone, or the timeout */
        s->open = 1;
        int64_t end = dd_net_ms() + (int64_t)(o->round_timeout_s * 1000);
        for (;;) {
            int left = 0;
            for (int i = 0; i < k; i++) left += s->b[idx[i]].alive && s->b[idx[i]].sampled && !s->b[idx[i]].answered;
            if (!left) break;
            if (dd_net_ms() > end) {
                dd_log(DD_LOG_WARN, WHO ": round %d: %d sampled benches did not answer within %g s", r, left, o->round_timeout_s);
                break;
            }
            if (stopped(s)) break;
            if ((st = pump(s, 50)) != DD_OK) goto done;
        }
        s->open = 0; /* what comes now is late */
        for (int i = 0; i < k; i++) {
            bench_t *b = &s->b[idx[i]];
            if (!b->answered) continue;
            upd[got] = b->delta;
            wts[got] = o->dp_clip > 0 ? 1.0 : (double)b->upd_frames;
            if (o->dp_clip > 0) dd_fed_clip(b->delta, s->n, o->dp_clip); /* enforce the bound whatever the bench did */
            if (isfinite(b->loss)) {
                loss_sum += b->loss * (double)b->upd_frames;
                frames_sum += (double)b->upd_frames;
            }
            if (!(b->norm <= norm_max)) norm_max = b->norm;
            got++;
        }
    aggregate:;
        int need = (int)ceil(o->min_completion * k - 1e-9);
        if (need < 1) need = 1;
        if (got < need) {
            if (!why[0])
                snprintf(why, sizeof why, "%d of %d sampled benches answered, --min-completion %g needs %d", got, k,
                         o->min_completion, need);
        } else if (o->secure) { /* NOLINT(bugprone-branch-clone): as the last branch, for another reason */
            aggregated = 1; /* agg holds the mean already */
        } else if (dd_agg_check(&o->agg, got) != DD_OK) {
            snprintf(why, sizeof why, "%s", dd_last_error());
        } else if ((st = dd_agg_run(&o->agg, got, s->n, upd, wts, agg, sel)) != DD_OK) {
            goto done;
        } else {
            aggregated = 1;
        }
        if (aggregated) {
            if (o->dp_clip > 0) { /* Gaussian noise sigma C on the sum, i.e. sigma C / n on the mean */
                const double sd = o->dp_noise * o->dp_clip / got;
                for (size_t i = 0; i < s->n; i++) agg[i] += (float)(sd * dd_rng_normal(&noise));
                double q = (double)k / connected, *tmp = calloc((size_t)n_orders, sizeof *tmp);
                if (!tmp || (st = dd_rdp_compute(q, o->dp_noise, 1, orders, n_orders, tmp)) != DD_OK) {
                    free(tmp);
                    if (!st) st = dd_error(DD_ERR_NOMEM, "rdp");
                    goto done;
                }
                for (int j = 0; j < n_orders; j++) rdp[j] += tmp[j];
                free(tmp);
            }
            dd_fed_sopt_step(sopt, w, agg);
            if (c) { /* SCAFFOLD: c += |S|/N mean(dc) */
                memset(dcsum, 0, s->n * sizeof *dcsum);
                for (int i = 0; i < k; i++)
                    if (s->b[idx[i]].answered)
                        for (size_t j = 0; j < s->n; j++) dcsum[j] += s->b[idx[i]].dc[j];
                const double f = 1.0 / connected;
                for (size_t j = 0; j < s->n; j++) c[j] += (float)(f * dcsum[j]);
            }
        }
        if (!aggregated) dd_log(DD_LOG_WARN, WHO ": round %d is not aggregated: %s", r, why);
        int finite = 1;
        for (size_t i = 0; i < s->n && finite; i++) finite = isfinite(w[i]);
        /* evaluation of the new global model on every bench's test split */
        int evaluated = 0, eval_n = 0;
        double err = 0, ref = 0;
        cJSON *line = cJSON_CreateObject(), *bn = NULL;
        if (finite && (r % o->eval_every == 0 || r == o->rounds)) {
            if ((st = evaluate(s, w, &eval_n)) != DD_OK) {
                cJSON_Delete(line);
                goto done;
            }
            evaluated = 1;
            bn = cJSON_CreateObject();
            for (int i = 0; i < s->nb; i++) /* in name order */
                s->b[i].eval_pending = s->b[i].eval_pending && s->b[i].eval_done;
            for (;;) {
                int next = -1;
                for (int i = 0; i < s->nb; i++)
                    if (s->b[i].eval_pending && (next < 0 || strcmp(s->b[i].name, s->b[next].name) < 0)) next = i;
                if (next < 0) break;
                bench_t *b = &s->b[next];
                b->eval_pending = 0;
                err += b->err;
                ref += b->ref;
                json_num(bn, b->name, nmse_db(b->err, b->ref));
            }
        }
        const double test = evaluated && eval_n ? nmse_db(err, ref) : NAN;
        cJSON_AddNumberToObject(line, "round", r);
        cJSON_AddNumberToObject(line, "clients", aggregated ? got : 0);
        cJSON_AddNumberToObject(line, "sampled", k);
        cJSON_AddNumberToObject(line, "answered", got);
        cJSON_AddNumberToObject(line, "connected", connected);
        cJSON_AddBoolToObject(line, "aggregated", aggregated);
        json_num(line, "train_loss", frames_sum > 0 ? loss_sum / frames_sum : NAN);
        json_num(line, "update_norm_max", got && !o->secure ? norm_max : NAN);
        json_num(line, "test_nmse_db", test);
        if (bn) cJSON_AddItemToObject(line, "bench_nmse_db", bn);
        cJSON_AddNumberToObject(line, "eval_clients", eval_n);
        cJSON_AddNumberToObject(line, "bytes_up", (double)s->bytes_up);
        cJSON_AddNumberToObject(line, "bytes_down", (double)s->bytes_down);
        cJSON_AddNumberToObject(line, "bytes_eval", (double)s->bytes_eval);
        cJSON_AddNumberToObject(line, "late", (double)s->late);
        cJSON_AddNumberToObject(line, "refused", (double)s->refused);
        if (o->dp_clip > 0) {
            double eps = NAN, ord = NAN;
            if ((st = dd_rdp_epsilon(orders, rdp, n_orders, o->dp_delta, &eps, &ord)) != DD_OK) {
                cJSON_Delete(line);
                goto done;
            }
            json_num(line, "epsilon", eps);
            cJSON_AddNumberToObject(line, "delta", o->dp_delta);
        }
        cJSON_AddNumberToObject(line, "time_s", dd_now() - t0);
        char *txt = cJSON_PrintUnformatted(line);
        cJSON_Delete(line);
        if (txt) {
            fprintf(mf, "%s\n", txt);
            fflush(mf);
            fprintf(stderr, "round %d/%d: %d/%d benches%s, test NMSE %.2f dB, up %.0f B, down %.0f B\n", r, o->rounds, got, k,
                    aggregated ? "" : " (not aggregated)", test, (double)s->bytes_up, (double)s->bytes_down);
            free(txt);
        }
        if (!finite) {
            st = dd_error(DD_ERR_NUMERIC, "the global model diverged at round %d (a parameter is not finite after --agg %s): "
                                          "a robust aggregation (--agg median|trimmed|krum) resists Byzantine benches",
                          r, dd_agg_name(o->agg.kind));
            goto done;
        }
        snprintf(path, sizeof path, "%s/last.ckpt", o->out);
        if ((st = dd_run_model_save(path, &cfg, "federated", NULL, r, model, w)) != DD_OK) goto done;
        if (isfinite(test) && test < best) {
            best = test;
            snprintf(path, sizeof path, "%s/best.ckpt", o->out);
            if ((st = dd_run_model_save(path, &cfg, "federated", NULL, r, model, w)) != DD_OK) goto done;
        }
    }
    if (!isfinite(best)) { /* no evaluation: the last model is the best known */
        char a[4300];
        snprintf(a, sizeof a, "%s/last.ckpt", o->out);
        snprintf(path, sizeof path, "%s/best.ckpt", o->out);
        if (stat(a, &sb) == 0 && (st = dd_run_model_save(path, &cfg, "federated", NULL, (int)s->round, model, w)) != DD_OK) goto done;
    }
done:
    if (s->router) { /* the end, to every bench still there (also on an error) */
        const char *bye = st ? "the coordinator stopped on an error" : "";
        for (int i = 0; i < s->nb; i++)
            if (s->b[i].alive) send_to(s, s->b[i].rid, s->b[i].rid_n, DD_MSG_FED_END, bye, strlen(bye));
        int linger = 1000;
        zmq_setsockopt(s->router, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(s->router);
    }
    dd_net_zap_stop(&s->zap);
    if (s->ctx) zmq_ctx_term(s->ctx);
    if (mf) fclose(mf);
    for (int i = 0; i < s->nb; i++) {
        free(s->b[i].delta);
        free(s->b[i].dc);
    }
    free(s->b);
    dd_nbuf_free(&s->buf);
    dd_free(s->cfg_json);
    dd_fed_sopt_destroy(&sopt);
    dd_model_destroy(&model);
    free(w);
    free(c);
    free(agg);
    free(dcsum);
    free(upd);
    free(wts);
    free(idx);
    free(sel);
    free(rdp);
    dd_run_lock_release(&lock);
    return st;
}
