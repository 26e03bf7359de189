/* The federated-averaging bench (fed-client, docs/federated.md): connects out to the
 * coordinator (DEALER, CURVE), receives the run's configuration, and for each round it is
 * sampled in trains locally on its own data with its own optimiser (the library's trainer
 * as the gradient engine: dd_trainer_compute_grads, then the algorithm's term, clipping
 * and the optimiser step) and sends back only the update of the parameter vector. Its
 * I/Q data never leaves the process: evaluations return squared-error sums. */
#include <complex.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "data/data_internal.h" /* dd_quote */
#include "distdpd/fednet.h"
#include "distdpd/model.h"
#include "distdpd/optim.h"
#include "distdpd/secagg.h"

#define WHO "fed-client"
#define PING_MS 1000

const char *const dd_fed_attack_names[] = {"none", "nan", "huge", "signflip", "malformed", NULL};

typedef struct {
    const dd_fed_client_opts *o;
    void *ctx, *sock;
    dd_dataset *ds;
    dd_trainer *tr;
    dd_train_cfg cfg;
    size_t n;
    uint32_t index;
    uint64_t epoch, batch; /* the local cursor over the bench's frames */
    float *w0, *c, *ci, *ci_new, *delta, *dc;
    dd_nbuf buf;
    FILE *rec;
    int64_t last_sent;
    dd_secagg_client *sa; /* --secure: the round's secure aggregation */
} cl_t;

static void csend(cl_t *c, int type, const void *p, size_t len) {
    dd_net_send(c->sock, NULL, 0, type, 0, c->index, p, (uint32_t)len);
    c->last_sent = dd_net_ms();
    if (c->rec) {
        fprintf(c->rec, "%s %zu\n", dd_msg_type_name(type), (size_t)DD_NET_HEADER + len);
        fflush(c->rec);
    }
}

static void get_vec(float *dst, const uint8_t *src, size_t n) { memcpy(dst, src, n * sizeof(float)); }

static dd_status welcome(cl_t *c, const dd_net_msg *m) {
    dd_fed_welcome wm;
    DD_TRY(dd_fed_dec_welcome(m->payload, m->h.len, &wm));
    dd_train_cfg cfg;
    dd_status st = dd_train_cfg_from_json(wm.cfg_json, "fed-welcome", &cfg);
    dd_fed_welcome_free(&wm);
    DD_TRY(st);
    if (cfg.task != DD_TRAIN_PA) return dd_error(DD_ERR_FORMAT, "fed-welcome: task %s (benches train PA models)", dd_train_task_name(cfg.task));
    cfg.epochs = 100000; /* the coordinator counts rounds; the local cursor runs freely */
    cfg.eval_test = 1;
    if (c->tr) { /* a second welcome (the coordinator restarted our session): same model? */
        if (wm.nparams != c->n) return dd_error(DD_ERR_MISMATCH, "fed-welcome: the model changed to %llu parameters",
                                                (unsigned long long)wm.nparams);
        c->index = wm.index;
        return DD_OK;
    }
    /* the model's size first, from its parameter table alone: a configuration of another
     * model (a GRU of hidden 4096 against nparams 80) would otherwise build a trainer of
     * gigabytes before the count is compared (20 s in the fed_client fuzz target) */
    dd_model *mdl = NULL;
    DD_TRY(dd_model_create(cfg.model, &cfg.model_cfg, &mdl));
    const size_t total = dd_model_params(mdl)->total;
    dd_model_destroy(&mdl);
    if (total != wm.nparams)
        return dd_error(DD_ERR_MISMATCH, "the coordinator's model has %llu parameters, %s with this configuration %zu",
                        (unsigned long long)wm.nparams, cfg.model, total);
    c->cfg = cfg;
    DD_TRY(dd_trainer_create(&c->cfg, c->ds, NULL, NULL, &c->tr));
    c->n = dd_trainer_num_floats(c->tr);
    if (c->n != wm.nparams)
        return dd_error(DD_ERR_MISMATCH, "the coordinator's model has %llu parameters, %s with this configuration %zu",
                        (unsigned long long)wm.nparams, c->cfg.model, c->n);
    c->index = wm.index;
    size_t n = c->n;
    c->w0 = calloc(n, sizeof(float));
    c->c = calloc(n, sizeof(float));
    c->ci = calloc(n, sizeof(float));
    c->ci_new = calloc(n, sizeof(float));
    c->delta = calloc(n, sizeof(float));
    c->dc = calloc(n, sizeof(float));
    if (!c->w0 || !c->c || !c->ci || !c->ci_new || !c->delta || !c->dc) return dd_error(DD_ERR_NOMEM, WHO ": %zu parameters", n);
    dd_log(DD_LOG_INFO, WHO ": bench %u: %s with %zu parameters, %llu training frames", c->index, c->cfg.model, n,
           (unsigned long long)dd_trainer_num_frames(c->tr));
    return DD_OK;
}

/* The local training of one round from c->w0; the update into c->delta (and c->dc). */
static dd_status local_train(cl_t *c, const dd_fed_round *rm, const dd_fed_algo *algo, double *loss_mean) {
    dd_trainer *tr = c->tr;
    float *p = dd_trainer_params(tr), *g = dd_trainer_grads(tr);
    const size_t n = c->n;
    const uint64_t nb = dd_trainer_num_batches(tr);
    memcpy(p, c->w0, n * sizeof(float));
    uint64_t steps = rm->local_kind == DD_FED_LOCAL_STEPS ? rm->local_n : (uint64_t)rm->local_n * nb;
    dd_fed_local L = {.n = n, .w0 = c->w0, .c = algo->control ? c->c : NULL, .ci = algo->control ? c->ci : NULL,
                      .mu = rm->mu, .lr = c->cfg.lr};
    double sum = 0;
    for (uint64_t s = 0; s < steps; s++) {
        if (c->batch >= nb) {
            c->batch = 0;
            c->epoch++;
        }
        uint64_t lo, hi, global;
        double sse = 0, norm = 0;
        dd_trainer_batch_slice(tr, c->batch, 0, 1, &lo, &hi, &global);
        DD_TRY(dd_trainer_compute_grads(tr, c->epoch, lo, hi, global, NULL, &sse));
        const double loss = sse * dd_trainer_loss_scale(tr, global);
        if (algo->grad) algo->grad(&L, p, g);
        if (c->cfg.clip > 0) {
            dd_status st = dd_clip_grad_norm(g, n, c->cfg.clip, &norm);
            if (st == DD_ERR_RANGE)
                return dd_error(DD_ERR_NUMERIC, "local training diverged in round %llu: the gradient is not finite",
                                (unsigned long long)rm->round);
            DD_TRY(st);
        }
        DD_TRY(dd_optim_step(dd_trainer_optim(tr), p, g, c->cfg.lr));
        c->batch++;
        if (dd_net_ms() - c->last_sent > PING_MS) csend(c, DD_MSG_PING, NULL, 0); /* alive while training */
        sum += loss;
    }
    L.steps = steps;
    for (size_t i = 0; i < n; i++) c->delta[i] = p[i] - c->w0[i];
    if (algo->control) {
        algo->control_end(&L, p, c->ci_new);
        for (size_t i = 0; i < n; i++) {
            c->dc[i] = c->ci_new[i] - c->ci[i];
            c->ci[i] = c->ci_new[i];
        }
    }
    *loss_mean = steps ? sum / (double)steps : NAN;
    return DD_OK;
}

/* --attack malformed: messages the coordinator must refuse without harm to the round. */
static void send_malformed(cl_t *c, const dd_fed_update *u) {
    uint8_t junk[64];
    memset(junk, 0xA5, sizeof junk);
    zmq_send(c->sock, junk, 7, ZMQ_DONTWAIT); /* truncated header */
    uint8_t bad[DD_NET_HEADER + 8];
    dd_net_hdr_write(bad, DD_MSG_FED_UPDATE, 0, c->index, junk, 8);
    bad[28] ^= 1; /* CRC mismatch */
    memcpy(bad + DD_NET_HEADER, junk, 8);
    zmq_send(c->sock, bad, sizeof bad, ZMQ_DONTWAIT);
    csend(c, DD_MSG_FED_UPDATE, junk, 20); /* truncated update payload */
    dd_fed_update w = *u;
    w.nparams = c->n + 1; /* a vector of the wrong length */
    dd_nbuf b = {0};
    float *v = calloc(c->n + 1, sizeof(float));
    if (v) {
        dd_fed_enc_update(&b, &w, v, NULL);
        csend(c, DD_MSG_FED_UPDATE, b.p, b.n);
    }
    free(v);
    dd_nbuf_free(&b);
    csend(c, DD_MSG_FED_ROUND, junk, 16); /* a coordinator's message type from a bench */
}

static dd_status on_round(cl_t *c, const dd_net_msg *m, int *quit) {
    int na;
    const dd_fed_algo *const *algos = dd_fed_algos(&na);
    dd_fed_round rm;
    DD_TRY(dd_fed_dec_round(m->payload, m->h.len, c->n, na, &rm));
    const dd_fed_algo *algo = algos[rm.algo];
    if (algo->control && !rm.c) return dd_error(DD_ERR_FORMAT, "fed-round: %s without the control variate", algo->name);
    if (c->o->fail_at_round > 0 && rm.round >= (uint64_t)c->o->fail_at_round) {
        dd_log(DD_LOG_WARN, WHO ": --fail-at-round %d: leaving without an answer", c->o->fail_at_round);
        *quit = 1;
        return DD_OK;
    }
    get_vec(c->w0, rm.w, c->n);
    if (rm.c) get_vec(c->c, rm.c, c->n);
    double loss = NAN;
    DD_TRY(local_train(c, &rm, algo, &loss));
    double norm = sqrt(dd_grad_sumsq(c->delta, c->n));
    if (rm.dp_clip > 0) dd_fed_clip(c->delta, c->n, rm.dp_clip); /* the update leaves the bench clipped */
    switch (c->o->attack) {
    case 1:
        for (size_t i = 0; i < c->n; i++) c->delta[i] = NAN;
        break;
    case 2:
        for (size_t i = 0; i < c->n; i++) c->delta[i] = 1e6f * (c->delta[i] >= 0 ? 1.0f : -1.0f);
        break;
    case 3:
        for (size_t i = 0; i < c->n; i++) c->delta[i] *= -10.0f;
        break;
    default: break;
    }
    if (rm.secure) { /* only the masked update leaves: secure aggregation's first message */
        dd_fed_clip(c->delta, c->n, rm.sa_range); /* |x_j| <= range, as the ring encoding needs */
        dd_secagg_client_free(c->sa);
        c->sa = NULL;
        dd_secagg_cfg cfg = {.session = rm.round, .d = c->n, .n = (int)rm.sa_n, .threshold = (int)rm.sa_threshold,
                             .ring_bits = (int)rm.sa_ring, .range = rm.sa_range};
        uint8_t *out = NULL;
        size_t len = 0;
        DD_TRY(dd_secagg_client_new(&cfg, c->index + 1, &c->sa));
        DD_TRY(dd_secagg_client_advertise(c->sa, &out, &len));
        if (c->o->straggle_ms > 0) usleep((useconds_t)c->o->straggle_ms * 1000);
        csend(c, DD_MSG_FED_SECAGG, out, len);
        free(out);
        return DD_OK;
    }
    dd_fed_update u = {.round = rm.round, .frames = dd_trainer_num_frames(c->tr), .loss = loss, .norm = norm, .nparams = c->n};
    if (c->o->attack == 4) send_malformed(c, &u);
    if (c->o->straggle_ms > 0) usleep((useconds_t)c->o->straggle_ms * 1000);
    dd_fed_enc_update(&c->buf, &u, c->delta, algo->control ? c->dc : NULL);
    if (c->buf.oom) return dd_error(DD_ERR_NOMEM, WHO ": update message");
    csend(c, DD_MSG_FED_UPDATE, c->buf.p, c->buf.n);
    return DD_OK;
}

/* --secure: the coordinator's next secure-aggregation message; ours in reply. A message
 * of an aggregation that is over or of another round is logged and dropped. */
static void on_secagg(cl_t *c, const dd_net_msg *m) {
    if (!c->sa) {
        dd_log(DD_LOG_WARN, WHO ": a secure-aggregation message outside a round: ignored");
        return;
    }
    uint8_t *out = NULL;
    size_t len = 0;
    if (dd_secagg_client_next(c->sa, m->payload, m->h.len, c->delta, &out, &len) != DD_OK) {
        dd_log(DD_LOG_WARN, WHO ": secure aggregation: %s", dd_last_error());
        return;
    }
    csend(c, DD_MSG_FED_SECAGG, out, len);
    free(out);
    if (dd_secagg_client_state(c->sa) == DD_SECAGG_DONE) {
        dd_secagg_client_free(c->sa);
        c->sa = NULL;
    }
}

static dd_status on_eval(cl_t *c, const dd_net_msg *m) {
    dd_fed_eval e;
    DD_TRY(dd_fed_dec_eval(m->payload, m->h.len, c->n, &e));
    get_vec(dd_trainer_params(c->tr), e.w, c->n);
    dd_eval_metrics em;
    const dd_cf32 *pred = NULL;
    size_t np = 0;
    DD_TRY(dd_trainer_evaluate(c->tr, DD_SPLIT_TEST, &em, &pred, &np));
    const dd_cf32 *y = c->ds->out[DD_SPLIT_TEST];
    const size_t ny = c->ds->n[DD_SPLIT_TEST] < np ? c->ds->n[DD_SPLIT_TEST] : np;
    double err = 0, ref = 0;
    for (size_t i = 0; i < ny; i++) { /* pooled over the split (the padding of the last segment left out) */
        const double er = (double)crealf(pred[i]) - crealf(y[i]), ei = (double)cimagf(pred[i]) - cimagf(y[i]);
        err += er * er + ei * ei;
        ref += (double)crealf(y[i]) * crealf(y[i]) + (double)cimagf(y[i]) * cimagf(y[i]);
    }
    dd_fed_eval_rep r = {.round = e.round, .err = err, .ref = ref, .samples = ny};
    dd_fed_enc_eval_rep(&c->buf, &r);
    csend(c, DD_MSG_FED_EVAL_REP, c->buf.p, c->buf.n);
    return DD_OK;
}

/* FED_END: the federation is over. An empty payload is the coordinator's normal end; a
 * reason ("the coordinator stopped on an error") is its failure, and an end before any
 * welcome is no federation this bench took part in: both are errors, so that the bench's
 * exit status 0 means it was welcomed and the run ended as planned. The reason is network
 * text: at most 200 bytes of it, quoted (dd_quote: no raw bytes reach a terminal). */
static dd_status on_end(cl_t *c, const dd_net_msg *m) {
    if (!c->tr) return dd_error(DD_ERR_COMM, "fed-end before fed-welcome: the federation ended without this bench");
    if (!m->h.len) return DD_OK;
    char why[4 * 200 + 4];
    return dd_error(DD_ERR_COMM, "fed-end: the federation ended on an error: %s",
                    dd_quote(why, sizeof why, (const char *)m->payload, m->h.len, 200));
}

dd_status dd_fed_client_run(const dd_fed_client_opts *o) {
    cl_t C, *c = &C;
    memset(c, 0, sizeof C);
    c->o = o;
    dd_status st;
    char sec[DD_NET_KEY_Z85 + 1], pub[DD_NET_KEY_Z85 + 1], srv[DD_NET_KEY_Z85 + 1];
    if (!o->server || !o->server_key || !o->key_path || !o->data)
        return dd_error(DD_ERR_ARG, "fed-client needs --server, --server-key, --key and --data");
    {   /* a directory of `distdpd simulate --format bin` holds DIR/data.ddb */
        char ddb[4200], spec[4200];
        struct stat sb;
        snprintf(ddb, sizeof ddb, "%s/data.ddb", o->data);
        snprintf(spec, sizeof spec, "%s/spec.json", o->data);
        const char *path = stat(ddb, &sb) == 0 && stat(spec, &sb) != 0 ? ddb : o->data;
        if ((st = dd_dataset_load(path, &c->ds)) != DD_OK) return st;
    }
    if (c->ds->n[DD_SPLIT_TRAIN] == 0 || c->ds->n[DD_SPLIT_TEST] == 0) {
        st = dd_error(DD_ERR_ARG, "%s: a bench needs a training and a test split (has %zu and %zu samples)", o->data,
                      c->ds->n[DD_SPLIT_TRAIN], c->ds->n[DD_SPLIT_TEST]);
        goto done;
    }
    if (o->record && !(c->rec = fopen(o->record, "a"))) {
        st = dd_error(DD_ERR_IO, "%s: %s", o->record, strerror(errno));
        goto done;
    }
    if ((st = dd_net_key_read(o->key_path, 1, sec)) != DD_OK) goto done;
    if ((st = dd_net_key_public(sec, pub)) != DD_OK) goto done;
    if ((st = dd_net_key_read(o->server_key, 0, srv)) != DD_OK) goto done;
    c->ctx = zmq_ctx_new();
    if (!c->ctx) {
        st = dd_error(DD_ERR_NOMEM, "zmq context");
        goto done;
    }
    st = dd_net_dealer(c->ctx, o->server, sec, pub, srv, &c->sock);
    memset(sec, 0, sizeof sec);
    if (st) goto done;
    /* join: hello until welcomed */
    dd_fed_hello h = {.proto = DD_FED_PROTO, .samples = c->ds->n[DD_SPLIT_TRAIN]};
    int64_t start = dd_net_ms(), heard = start, hello_at = 0;
    int quit = 0;
    while (!quit) {
        int64_t now = dd_net_ms();
        if (o->stop && *o->stop) {
            st = dd_error(DD_ERR_ARG, "stopped by a signal");
            break;
        }
        if (!c->tr) {
            if (now - start > (int64_t)(o->connect_timeout_s * 1000)) {
                st = dd_error(DD_ERR_TIMEOUT, "no welcome from the coordinator %s within %g s (is it running, is this bench's key "
                                              "%s.pub in its allow file, is --server-key its public key?)",
                              o->server, o->connect_timeout_s, o->key_path);
                break;
            }
            if (now - hello_at > 1000) {
                dd_fed_enc_hello(&c->buf, &h);
                csend(c, DD_MSG_FED_HELLO, c->buf.p, c->buf.n);
                hello_at = now;
            }
        } else {
            if (now - heard > (int64_t)(o->timeout_s * 1000)) {
                st = dd_error(DD_ERR_TIMEOUT, "nothing from the coordinator %s for %g s: it is gone", o->server, o->timeout_s);
                break;
            }
            if (now - c->last_sent > PING_MS) csend(c, DD_MSG_PING, NULL, 0);
        }
        dd_net_msg m;
        int r = dd_net_recv(c->sock, 0, 100, c->n ? (uint32_t)(c->n * 8 + (1u << 17)) : (1u << 20), &m);
        if (r < 0) {
            st = dd_error_prefix(DD_ERR_COMM, "the coordinator %s: ", o->server);
            break;
        }
        if (r == 0) continue;
        heard = dd_net_ms();
        if (!m.ok) {
            dd_log(DD_LOG_WARN, WHO ": refused a message from the coordinator: %s", m.err);
            dd_net_msg_free(&m);
            continue;
        }
        switch (m.h.type) {
        case DD_MSG_FED_WELCOME: st = welcome(c, &m); break;
        case DD_MSG_PONG: break;
        case DD_MSG_FED_ROUND: st = c->tr ? on_round(c, &m, &quit) : dd_error(DD_ERR_FORMAT, "fed-round before fed-welcome"); break;
        case DD_MSG_FED_SECAGG: on_secagg(c, &m); break;
        case DD_MSG_FED_EVAL: st = c->tr ? on_eval(c, &m) : dd_error(DD_ERR_FORMAT, "fed-eval before fed-welcome"); break;
        case DD_MSG_FED_END: st = on_end(c, &m); quit = 1; break;
        case DD_MSG_ERR: { /* a refused message of ours: the session goes on */
            char why[4 * 400 + 4];
            dd_log(DD_LOG_WARN, WHO ": the coordinator refused a message: %s",
                   dd_quote(why, sizeof why, (const char *)m.payload, m.h.len, 400));
            break;
        }
        default: dd_log(DD_LOG_WARN, WHO ": ignored a %s message from the coordinator", dd_msg_type_name(m.h.type)); break;
        }
        dd_net_msg_free(&m);
        /* silence counts while the bench listens: the time it spent on the message (a
         * welcome's set-up, a round's local steps, an evaluation) is not the coordinator's,
         * whose next messages may already wait in the socket */
        heard = dd_net_ms();
        if (st) { /* a message of the coordinator's that the bench cannot go on with: name it */
            dd_error_prefix(st, "the coordinator %s: ", o->server);
            break;
        }
    }
    if (c->sock && st == DD_OK && o->fail_at_round <= 0) csend(c, DD_MSG_BYE, NULL, 0);
done:
    if (c->sock) {
        int linger = st ? 0 : 500;
        zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(c->sock);
    }
    if (c->ctx) zmq_ctx_term(c->ctx);
    if (c->rec) fclose(c->rec);
    dd_secagg_client_free(c->sa);
    dd_trainer_destroy(&c->tr);
    dd_dataset_free(&c->ds);
    dd_nbuf_free(&c->buf);
    free(c->w0);
    free(c->c);
    free(c->ci);
    free(c->ci_new);
    free(c->delta);
    free(c->dc);
    return st;
}
