/* The training coordinator's book-keeping and state machine (ps_coord.h); moved out of
 * ps_train.c (its on_msg, expire, start_epoch, release_lease, min_clock), which keeps the
 * sockets, the trainer and the servers. */
#include "parallel/ps_coord.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hist_add(uint64_t *h, uint64_t v) { h[v >= DD_PST_HIST - 1 ? DD_PST_HIST - 1 : v]++; }

int64_t dd_pst_coord_min_clock(const dd_pst_coord *c) {
    int64_t m = INT64_MAX;
    for (int i = 0; i < c->nw; i++)
        if (c->w[i].alive && c->w[i].clock < m) m = c->w[i].clock;
    return m == INT64_MAX ? 0 : m;
}

/* Batch k, committed by w, is done without w's report (w went silent, left, or asked for
 * another batch): its staged update is applied on w's behalf (or lost), its loss unknown. */
static void complete_for(dd_pst_coord *c, dd_pst_worker *w, uint64_t k, const char *why) {
    c->bstate[k] = DD_PST_DONE;
    c->gfifo[c->ftail] = NAN;
    c->fifo[c->ftail++] = NAN;
    if (c->apply && c->apply(c->u, w->cid, w->txn) == DD_OK) {
        c->ep_completed++;
        dd_log(DD_LOG_WARN, "ps-coordinator: worker %s %s after committing batch %llu: its staged update was applied on its "
                            "behalf",
               w->name, why, (unsigned long long)k + 1);
    } else {
        c->ep_lost++;
        dd_log(DD_LOG_WARN, "ps-coordinator: worker %s %s after committing batch %llu and its staged update could not be "
                            "applied (%s): lost (the frames count as trained)",
               w->name, why, (unsigned long long)k + 1, dd_last_error());
    }
}

/* w gives its lease up (it asks for another batch, or leaves): a leased batch goes back
 * to the queue; a committed one whose done never came is completed on its behalf (before
 * 2026-12-02 it stayed committed without an owner and the epoch never ended). */
static void release_lease(dd_pst_coord *c, dd_pst_worker *w, const char *why) {
    if (w->lease >= 0 && c->bstate && (uint64_t)w->lease < c->nb && c->bowner[w->lease] == (int)(w - c->w)) {
        if (c->bstate[w->lease] == DD_PST_LEASED) c->bstate[w->lease] = DD_PST_FREE;
        else if (c->bstate[w->lease] == DD_PST_COMMITTED) complete_for(c, w, (uint64_t)w->lease, why);
    }
    w->lease = -1;
}

static void reply(dd_pst_worker *w, dd_pst_reply *r, int type, uint64_t seq, const dd_nbuf *b) {
    w->last_seq = seq;
    w->last_type = type;
    w->last_reply.n = 0;
    if (b && b->n) dd_nbuf_bytes(&w->last_reply, b->p, b->n);
    r->send = 1;
    r->type = type;
    r->p = w->last_reply.p;
    r->n = (uint32_t)w->last_reply.n;
}

void dd_pst_coord_refuse(dd_pst_reply *r, const char *peer, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    dd_log(DD_LOG_WARN, "ps-coordinator: refused a message from %s: %s", peer, r->err);
    r->send = 1;
    r->type = DD_MSG_ERR;
    r->p = (const uint8_t *)r->err;
    r->n = (uint32_t)strlen(r->err);
}

/* The epoch's arrays. */
static void free_epoch(dd_pst_coord *c) {
    free(c->bstate);
    free(c->bowner);
    free(c->fcount);
    free(c->fifo);
    free(c->gfifo);
    free(c->bwas);
    c->bstate = c->fcount = c->bwas = NULL;
    c->bowner = NULL;
    c->fifo = c->gfifo = NULL;
}

void dd_pst_coord_free(dd_pst_coord *c) {
    for (int i = 0; i < c->nw; i++) dd_nbuf_free(&c->w[i].last_reply);
    free_epoch(c);
}

dd_status dd_pst_coord_start_epoch(dd_pst_coord *c, int ep, uint64_t nb, uint64_t nframes, uint64_t done) {
    c->ep = ep;
    c->nb = nb;
    c->nframes = nframes;
    free_epoch(c);
    c->bstate = calloc(nb ? nb : 1, 1);
    c->bwas = calloc(nb ? nb : 1, 1);
    c->bowner = calloc(nb ? nb : 1, sizeof *c->bowner);
    c->fcount = calloc(nframes ? nframes : 1, 1);
    c->fifo = calloc(nb ? nb : 1, sizeof *c->fifo);
    c->gfifo = calloc(nb ? nb : 1, sizeof *c->gfifo);
    c->fhead = c->ftail = 0;
    if (!c->bstate || !c->bwas || !c->bowner || !c->fcount || !c->fifo || !c->gfifo) {
        c->nb = c->nframes = 0; /* nothing to lease (the pointers are freed by dd_pst_coord_free) */
        return dd_error(DD_ERR_NOMEM, "ps-coordinator: the book-keeping of %llu batches", (unsigned long long)nb);
    }
    /* batches already stepped (a resumed cursor) count as done */
    for (uint64_t b = 0; b < done && b < nb; b++) c->bstate[b] = DD_PST_DONE;
    memset(c->hist, 0, sizeof c->hist);
    memset(c->lag, 0, sizeof c->lag);
    c->ep_expired = c->ep_refused = c->ep_lost = c->ep_redone = c->ep_completed = 0;
    for (int i = 0; i < c->nw; i++) {
        c->w[i].clock = 0;
        c->w[i].lease = -1;
    }
    return DD_OK;
}

void dd_pst_coord_on_msg(dd_pst_coord *c, const dd_net_hdr *h, const uint8_t *pl, const char *peer, int64_t now,
                         dd_pst_reply *r) {
    r->send = 0;
    int wi = -1;
    for (int i = 0; i < c->nw; i++)
        if (c->w[i].id == h->sender) wi = i;
    if (h->type == DD_MSG_HELLO) {
        dd_pst_hello m;
        if (dd_pst_dec_hello(pl, h->len, &m) != DD_OK) {
            dd_pst_coord_refuse(r, peer, "malformed %s", dd_last_error());
            return;
        }
        const char *name = m.name;
        if (wi < 0) {
            if (c->nw >= DD_PST_MAX_WORKERS) {
                dd_pst_coord_refuse(r, peer, "hello: %d workers already joined (the limit)", DD_PST_MAX_WORKERS);
                return;
            }
            wi = c->nw++;
            memset(&c->w[wi], 0, sizeof c->w[wi]);
            c->w[wi].id = h->sender;
            c->w[wi].lease = -1;
            c->w[wi].clock = dd_pst_coord_min_clock(c);
            dd_log(DD_LOG_INFO, "ps-coordinator: worker %s (%s) joined at epoch %d", name, peer, c->ep + 1);
        }
        dd_pst_worker *w = &c->w[wi];
        snprintf(w->name, sizeof w->name, "%s", name);
        if (!w->alive) w->clock = dd_pst_coord_min_clock(c);
        w->alive = 1;
        w->dead = 0;
        w->heard = now;
        dd_nbuf b = {0};
        const dd_pst_welcome wm = {(uint32_t)wi, c->cfg_json, c->staleness < 0 ? UINT64_MAX : (uint64_t)c->staleness,
                                   (uint8_t)c->stale_lr, (uint32_t)c->lease_ms};
        dd_pst_enc_welcome(&b, &wm);
        reply(w, r, DD_MSG_WELCOME, h->seq, &b);
        dd_nbuf_free(&b);
        return;
    }
    if (wi < 0) {
        dd_pst_coord_refuse(r, peer, "%s from an unknown worker (send hello first)", dd_msg_type_name(h->type));
        return;
    }
    dd_pst_worker *w = &c->w[wi];
    w->heard = now;
    if (h->seq == w->last_seq) { /* a resend: the same answer */
        r->send = 1;
        r->type = w->last_type;
        r->p = w->last_reply.p;
        r->n = (uint32_t)w->last_reply.n;
        return;
    }
    if (h->seq < w->last_seq) return; /* an old request */
    if (!w->alive) { /* back after being declared dead: a member again (before 2026-12-02 it stayed marked dead:
                      * ps.json said "dead" and the end of the run did not wait to tell it "the end") */
        w->alive = 1;
        w->dead = 0;
        w->clock = dd_pst_coord_min_clock(c);
        dd_log(DD_LOG_INFO, "ps-coordinator: worker %s is back", w->name);
    }
    dd_nbuf b = {0};
    if (h->type == DD_MSG_LEASE) {
        if (dd_pst_dec_empty(pl, h->len, "lease") != DD_OK) {
            dd_pst_coord_refuse(r, peer, "malformed %s", dd_last_error());
            return;
        }
        release_lease(c, w, "asked for another batch without its done");
        int64_t cmin = dd_pst_coord_min_clock(c);
        uint64_t found = UINT64_MAX;
        dd_pst_lease lm = {.kind = DD_PST_LEASE_WAIT};
        if (c->finished) {
            lm.kind = DD_PST_LEASE_END;
        } else if (c->ep >= 0 && c->nw >= c->min_workers && (c->staleness < 0 || w->clock - cmin <= c->staleness)) {
            for (uint64_t k = 0; k < c->nb; k++)
                if (c->bstate[k] == DD_PST_FREE) {
                    found = k;
                    break;
                }
        }
        if (found != UINT64_MAX) {
            c->bstate[found] = DD_PST_LEASED;
            c->bowner[found] = wi;
            if (c->bwas[found]) c->ep_redone++;
            c->bwas[found] = 1;
            w->lease = (int64_t)found;
            w->deadline = now + c->lease_ms;
            lm = (dd_pst_lease){DD_PST_LEASE_BATCH, (uint64_t)c->ep, found, 0, 0, 0, c->lr(c->u), (uint64_t)(w->clock - cmin)};
            c->slice(c->u, found, &lm.lo, &lm.hi, &lm.global);
            hist_add(c->hist, lm.staleness);
        }
        dd_pst_enc_lease(&b, &lm);
        reply(w, r, DD_MSG_LEASE_REP, h->seq, &b);
    } else if (h->type == DD_MSG_COMMIT) {
        dd_pst_commit m;
        if (dd_pst_dec_commit(pl, h->len, &m) != DD_OK) {
            dd_pst_coord_refuse(r, peer, "malformed %s", dd_last_error());
            return;
        }
        const uint64_t e = m.epoch, k = m.batch;
        int ok = (int64_t)e == c->ep && k < c->nb && c->bstate[k] == DD_PST_LEASED && c->bowner[k] == wi &&
                 w->lease == (int64_t)k;
        if (ok) {
            uint64_t lo, hi, g;
            c->slice(c->u, k, &lo, &hi, &g);
            for (uint64_t f = lo; f < hi && f < c->nframes; f++)
                if (c->fcount[f] < 255) c->fcount[f]++;
            c->bstate[k] = DD_PST_COMMITTED;
            w->cid = m.cid;
            w->txn = m.txn;
            w->deadline = now + 2 * (int64_t)c->lease_ms; /* the apply must end within this */
        } else {
            w->refused++;
            c->ep_refused++;
            dd_log(DD_LOG_WARN, "ps-coordinator: worker %s: commit of batch %llu of epoch %llu refused (its lease was lost)",
                   w->name, (unsigned long long)k + 1, (unsigned long long)e + 1);
        }
        dd_pst_enc_commit_rep(&b, ok);
        reply(w, r, DD_MSG_COMMIT_REP, h->seq, &b);
    } else if (h->type == DD_MSG_DONE) {
        dd_pst_done m;
        if (dd_pst_dec_done(pl, h->len, &m) != DD_OK) {
            dd_pst_coord_refuse(r, peer, "malformed %s", dd_last_error());
            return;
        }
        if ((int64_t)m.epoch == c->ep && m.batch < c->nb && c->bstate[m.batch] == DD_PST_COMMITTED && c->bowner[m.batch] == wi) {
            c->bstate[m.batch] = DD_PST_DONE;
            c->gfifo[c->ftail] = m.grad_norm;
            c->fifo[c->ftail++] = m.loss;
            w->clock++;
            w->batches++;
            w->compute_s += m.compute_s;
            w->lease = -1;
            hist_add(c->lag, m.lag);
            c->tot_batches++;
        }
        w->resends = m.resends;
        reply(w, r, DD_MSG_ACK, h->seq, &b);
    } else if (h->type == DD_MSG_BYE) {
        if (dd_pst_dec_empty(pl, h->len, "bye") != DD_OK) {
            dd_pst_coord_refuse(r, peer, "malformed %s", dd_last_error());
            return;
        }
        release_lease(c, w, "left without its done");
        w->alive = 0;
        dd_log(DD_LOG_INFO, "ps-coordinator: worker %s left", w->name);
        reply(w, r, DD_MSG_ACK, h->seq, &b);
    } else {
        dd_pst_coord_refuse(r, peer, "a %s message is not a coordinator request", dd_msg_type_name(h->type));
    }
    dd_nbuf_free(&b);
}

void dd_pst_coord_expire(dd_pst_coord *c, int64_t now) {
    for (int i = 0; i < c->nw; i++) {
        dd_pst_worker *w = &c->w[i];
        if (!w->alive) continue;
        if (w->lease >= 0 && c->bstate && (uint64_t)w->lease < c->nb && now > w->deadline) {
            uint64_t k = (uint64_t)w->lease;
            if (c->bstate[k] == DD_PST_LEASED) {
                c->bstate[k] = DD_PST_FREE;
                c->ep_expired++;
                w->expired++;
                dd_log(DD_LOG_WARN, "ps-coordinator: worker %s: lease of batch %llu expired after %d ms: the batch goes to "
                                    "another worker, the worker leaves",
                       w->name, (unsigned long long)k + 1, c->lease_ms);
            } else if (c->bstate[k] == DD_PST_COMMITTED) { /* committed, then silent: complete its staged update */
                complete_for(c, w, k, "went silent");
            }
            w->lease = -1;
            w->alive = 0;
            w->dead = 1;
        } else if (w->lease < 0 && now - w->heard > c->lease_ms) {
            w->alive = 0;
            w->dead = 1;
            dd_log(DD_LOG_WARN, "ps-coordinator: worker %s silent for %d ms: it leaves", w->name, c->lease_ms);
        }
    }
}
