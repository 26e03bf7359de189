/* Client of the parameter server (ps.h, docs/ps.md): one DEALER socket per server,
 * requests with sequence numbers, resends with a doubling timeout, pings while waiting,
 * failover of a silent server's blocks to the next servers of their preference lists.
 *
 * One operation (init, push, pull) uses one sequence number for all its messages, also
 * for resends and after a failover; servers apply a push item only when its sequence
 * number is above the last one they applied for this client and block, so an update
 * is applied exactly once. Operations are sequential (stop-and-wait per operation),
 * which keeps the sequence numbers of each block increasing. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "distdpd/ps.h"
#include "ps_internal.h"

typedef struct {
    dd_nbuf msg;
    int active, resent;
    int64_t sent_ms, heard_ms, rto;
    uint64_t ping_seq;
} outst;

struct dd_ps_client {
    dd_ps_client_opts o;
    dd_ps_cluster cl;
    dd_ps_ring *ring;
    void *ctx;
    void **sock;
    unsigned char alive[DD_PS_MAX_SERVERS];
    char sec[41], pub[41];
    uint64_t id, seq;
    double srtt; /* smoothed round-trip time of requests answered without a resend, ms */
    dd_ps_block *b;
    size_t nb;
    dd_ps_map map;
    int *assign;
    unsigned char *done, *rebuild;
    outst *out;
    dd_ps_client_stats st;
    uint8_t **sblob; /* STATE: each block's optimiser state blob (malloc) */
    const void *const *rstate; /* RESTORE: each block's optimiser state blob, its bytes, version */
    const size_t *rbytes;
    const uint64_t *rver;
    size_t *sbytes;
    uint64_t txn_owner, txn; /* STAGE / APPLY: the update's owner (APPLY only) and transaction */
};

#define CNAME(i) (c->b[(i)].name)

void dd_ps_client_close(dd_ps_client **pc) {
    if (!pc || !*pc) return;
    dd_ps_client *c = *pc;
    if (c->sock)
        for (size_t i = 0; i < c->cl.n; i++)
            if (c->sock[i]) zmq_close(c->sock[i]);
    free(c->sock);
    if (c->out)
        for (size_t i = 0; i < c->cl.n; i++) dd_nbuf_free(&c->out[i].msg);
    free(c->out);
    free(c->rebuild);
    if (c->ctx) zmq_ctx_term(c->ctx);
    dd_ps_ring_free(&c->ring);
    dd_ps_cluster_free(&c->cl);
    free(c->b);
    free(c->assign);
    free(c->done);
    dd_ps_map_free(&c->map);
    if (c->sblob)
        for (size_t i = 0; i < c->nb; i++) free(c->sblob[i]);
    free(c->sblob);
    free(c->sbytes);
    memset(c->sec, 0, sizeof c->sec);
    free(c);
    *pc = NULL;
}

static uint64_t random_id(void) {
    uint64_t v = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&v, sizeof v, 1, f) != 1) v = 0;
        fclose(f);
    }
    if (!v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = ((uint64_t)getpid() << 40) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20);
    }
    return v & ~DD_PS_SERVER_SENDER; /* never looks like a server */
}

dd_status dd_ps_client_open(const char *cluster_path, const dd_ps_client_opts *o, dd_ps_client **out) {
    *out = NULL;
    dd_ps_client *c = calloc(1, sizeof *c);
    if (!c) return dd_error(DD_ERR_NOMEM, "client");
    if (o) c->o = *o;
    if (c->o.resend_ms <= 0) c->o.resend_ms = 100;
    if (c->o.dead_ms <= 0) c->o.dead_ms = 3000;
    c->id = c->o.id ? c->o.id & ~DD_PS_SERVER_SENDER : random_id();
    c->srtt = c->o.resend_ms / 3.0;
    dd_status s;
    if (!c->o.insecure) {
        if (!c->o.key_path) {
            s = dd_error(DD_ERR_ARG, "a client needs its secret key file (or insecure)");
            goto fail;
        }
        if ((s = dd_net_key_read(c->o.key_path, 1, c->sec)) || (s = dd_net_key_public(c->sec, c->pub))) goto fail;
    }
    if ((s = dd_ps_cluster_read(cluster_path, c->o.insecure, &c->cl))) goto fail;
    const char *names[DD_PS_MAX_SERVERS];
    for (size_t i = 0; i < c->cl.n; i++) names[i] = c->cl.servers[i].name;
    if ((s = dd_ps_ring_create(names, c->cl.n, c->cl.vnodes, &c->ring))) goto fail;
    c->ctx = zmq_ctx_new();
    c->sock = calloc(c->cl.n, sizeof *c->sock);
    c->out = calloc(c->cl.n, sizeof *c->out);
    c->rebuild = calloc(c->cl.n, 1);
    if (!c->ctx || !c->sock || !c->out || !c->rebuild) {
        s = dd_error(DD_ERR_NOMEM, "client");
        goto fail;
    }
    for (size_t i = 0; i < c->cl.n; i++) {
        c->alive[i] = 1;
        const dd_ps_server_info *si = &c->cl.servers[i];
        if ((s = dd_net_dealer(c->ctx, si->address, c->o.insecure ? NULL : c->sec, c->o.insecure ? NULL : c->pub,
                               c->o.insecure ? NULL : si->public_key, &c->sock[i])))
            goto fail;
    }
    *out = c;
    return DD_OK;
fail:
    dd_ps_client_close(&c);
    return s;
}

dd_status dd_ps_client_set_blocks(dd_ps_client *c, const dd_ps_block *b, size_t n) {
    if (n == 0) return dd_error(DD_ERR_ARG, "client: no blocks");
    if (c->sblob)
        for (size_t i = 0; i < c->nb; i++) free(c->sblob[i]);
    free(c->sblob);
    free(c->sbytes);
    c->sblob = NULL;
    c->sbytes = NULL;
    free(c->b);
    free(c->assign);
    free(c->done);
    dd_ps_map_free(&c->map);
    c->b = malloc(n * sizeof *c->b);
    c->assign = malloc(n * sizeof *c->assign);
    c->done = malloc(n);
    c->nb = 0;
    if (!c->b || !c->assign || !c->done) return dd_error(DD_ERR_NOMEM, "client blocks");
    memcpy(c->b, b, n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        if (!c->b[i].name[0] || c->b[i].len == 0 || c->b[i].len > UINT32_MAX / 4)
            return dd_error(DD_ERR_ARG, "client: block %zu ('%s') has no name or a bad length %zu", i, c->b[i].name,
                            c->b[i].len);
        int k, rc;
        DD_PS_MAP_FIND(&c->map, c->b[i].name, CNAME, k);
        if (k >= 0) return dd_error(DD_ERR_ARG, "client: block name '%s' twice", c->b[i].name);
        DD_PS_MAP_INSERT(&c->map, c->b[i].name, (int)i, CNAME, rc);
        if (rc) return dd_error(DD_ERR_NOMEM, "client blocks");
    }
    c->nb = n;
    return DD_OK;
}

static int find(dd_ps_client *c, const char *name) {
    int k;
    DD_PS_MAP_FIND(&c->map, name, CNAME, k);
    return k;
}

/* Sends one message to server s, counting it (dd_ps_client_stats: bytes with headers). */
static void csend(dd_ps_client *c, int s, int type, uint64_t seq, uint64_t id, const void *p, uint32_t n) {
    c->st.messages_sent++;
    c->st.bytes_sent += DD_NET_HEADER + (uint64_t)n;
    dd_net_send(c->sock[s], NULL, 0, type, seq, id, p, n);
}

/* One operation over all blocks. src: values (init) or gradients (push); dst: pull
 * target; ver: versions in/out. */
static dd_status run_op(dd_ps_client *c, int type, double lr, const float *src, float *dst, uint64_t *ver) {
    if (!c->nb) return dd_error(DD_ERR_ARG, "client: set the blocks first (dd_ps_client_set_blocks)");
    uint64_t seq = ++c->seq;
    size_t left = c->nb;
    int ns = (int)c->cl.n;
    for (size_t i = 0; i < c->nb; i++) {
        c->done[i] = 0;
        c->assign[i] = -1;
    }
    for (int s = 0; s < ns; s++) c->out[s].active = 0;
    c->st.requests++;
    dd_status err = DD_OK;
    const int state = type == DD_MSG_STATE;
    if (state && !c->sblob) {
        c->sblob = calloc(c->nb, sizeof *c->sblob);
        c->sbytes = calloc(c->nb, sizeof *c->sbytes);
        if (!c->sblob || !c->sbytes) return dd_error(DD_ERR_NOMEM, "client: state");
    }
    const int pulls = type == DD_MSG_PULL || state;
    int reply_type = type == DD_MSG_PULL ? DD_MSG_PULL_REP : state ? DD_MSG_STATE_REP : DD_MSG_ACK;
    while (left > 0 && err == DD_OK) {
        int64_t now = dd_net_ms();
        /* assign blocks to live primaries */
        memset(c->rebuild, 0, (size_t)ns);
        for (size_t i = 0; i < c->nb; i++) {
            if (c->done[i] || (c->assign[i] >= 0 && c->alive[c->assign[i]])) continue;
            int p;
            if (dd_ps_ring_place(c->ring, c->b[i].name, c->alive, &p, 1) < 1)
                return dd_error(DD_ERR_TIMEOUT, "no live server left for block '%s' (all %d servers silent)", c->b[i].name, ns);
            c->assign[i] = p;
            c->rebuild[p] = 1;
        }
        for (int s = 0; s < ns; s++) {
            if (!c->rebuild[s]) continue;
            outst *o = &c->out[s];
            o->msg.n = 0;
            if (type == DD_MSG_APPLY) dd_nbuf_u64(&o->msg, c->txn_owner);
            if (type == DD_MSG_STAGE || type == DD_MSG_APPLY) dd_nbuf_u64(&o->msg, c->txn);
            if (type == DD_MSG_PUSH || type == DD_MSG_STAGE) dd_nbuf_f64(&o->msg, lr);
            size_t cntpos = o->msg.n;
            dd_nbuf_u32(&o->msg, 0);
            uint32_t cnt = 0;
            for (size_t i = 0; i < c->nb; i++) {
                if (c->done[i] || c->assign[i] != s) continue;
                const dd_ps_block *b = &c->b[i];
                dd_nbuf_str(&o->msg, b->name);
                if (pulls) {
                    dd_nbuf_u64(&o->msg, ver ? ver[i] : UINT64_MAX);
                } else if (type != DD_MSG_APPLY) {
                    dd_nbuf_u32(&o->msg, (uint32_t)b->len);
                    dd_nbuf_bytes(&o->msg, src + b->offset, b->len * 4);
                    if (type == DD_MSG_RESTORE) {
                        dd_nbuf_u64(&o->msg, c->rver[i]);
                        dd_nbuf_u32(&o->msg, (uint32_t)c->rbytes[i]);
                        dd_nbuf_bytes(&o->msg, c->rstate[i], c->rbytes[i]);
                    }
                }
                cnt++;
            }
            if (o->msg.oom) return dd_error(DD_ERR_NOMEM, "client: request to %s", c->cl.servers[s].name);
            memcpy(o->msg.p + cntpos, &cnt, 4); /* little-endian host (ps_internal.h) */
            csend(c, s, type, seq, c->id, o->msg.p, (uint32_t)o->msg.n);
            if (!o->active) o->heard_ms = now;
            o->active = 1;
            o->resent = 0;
            o->sent_ms = now;
            /* first resend after 3 x the smoothed round trip (at least 5 ms), at most resend_ms */
            o->rto = (int64_t)(3 * c->srtt + 2);
            if (o->rto < 5) o->rto = 5;
            if (o->rto > c->o.resend_ms) o->rto = c->o.resend_ms;
        }
        /* wait for replies */
        zmq_pollitem_t it[DD_PS_MAX_SERVERS];
        int map[DD_PS_MAX_SERVERS], ni = 0;
        int64_t wait = 100;
        for (int s = 0; s < ns; s++) {
            if (!c->out[s].active) continue;
            int64_t d = c->out[s].sent_ms + c->out[s].rto - now;
            if (d < wait) wait = d;
            it[ni] = (zmq_pollitem_t){c->sock[s], 0, ZMQ_POLLIN, 0};
            map[ni++] = s;
        }
        if (wait < 1) wait = 1;
        int rc = zmq_poll(it, ni, (long)wait);
        if (rc < 0 && errno != EINTR) return dd_error(DD_ERR_COMM, "zmq_poll: %s", zmq_strerror(errno));
        /* stops at a refusal (ERR): a message read after it would replace its error text */
        for (int k = 0; k < ni && rc > 0 && err == DD_OK; k++) {
            if (!(it[k].revents & ZMQ_POLLIN)) continue;
            int s = map[k];
            while (err == DD_OK) {
                zmq_msg_t m;
                zmq_msg_init(&m);
                if (zmq_msg_recv(&m, c->sock[s], ZMQ_DONTWAIT) < 0) {
                    zmq_msg_close(&m);
                    break;
                }
                c->st.bytes_received += zmq_msg_size(&m);
                dd_net_hdr h;
                const uint8_t *pl;
                if (zmq_msg_more(&m) || dd_net_parse(zmq_msg_data(&m), zmq_msg_size(&m), UINT32_MAX, &h, &pl) != DD_OK) {
                    dd_log(DD_LOG_WARN, "ps client: refused a reply from server %s: %s", c->cl.servers[s].name,
                           zmq_msg_more(&m) ? "more than one frame" : dd_last_error());
                    zmq_msg_close(&m);
                    continue;
                }
                c->out[s].heard_ms = dd_net_ms();
                if (h.seq == seq && h.type == DD_MSG_ERR) {
                    c->st.errors++;
                    err = dd_error(DD_ERR_COMM, "server %s (%s) refused the %s: %.*s", c->cl.servers[s].name,
                                   c->cl.servers[s].address, dd_msg_type_name(type), (int)(h.len < 500 ? h.len : 500),
                                   (const char *)pl);
                } else if (h.seq == seq && h.type == reply_type) {
                    dd_nrd r;
                    dd_nrd_init(&r, pl, h.len);
                    uint32_t cnt = dd_nrd_u32(&r);
                    char name[DD_PS_NAME_MAX];
                    for (uint32_t j = 0; j < cnt && !r.bad; j++) {
                        dd_nrd_str(&r, name, sizeof name);
                        uint64_t v = dd_nrd_u64(&r);
                        uint32_t n = pulls ? dd_nrd_u32(&r) : 0;
                        int i = r.bad ? -1 : find(c, name);
                        const uint8_t *vals = NULL, *blob = NULL;
                        if (n) {
                            vals = (i >= 0 && n == c->b[i].len) ? dd_nrd_bytes(&r, (size_t)n * 4) : NULL;
                            if (!vals) r.bad = 1;
                        }
                        uint32_t sb = state ? dd_nrd_u32(&r) : 0;
                        if (state && (!n || !(blob = dd_nrd_bytes(&r, sb)))) r.bad = 1;
                        if (r.bad || i < 0 || c->done[i]) continue;
                        if (state) {
                            free(c->sblob[i]);
                            c->sblob[i] = malloc(sb ? sb : 1);
                            if (!c->sblob[i]) return dd_error(DD_ERR_NOMEM, "client: state of '%s'", c->b[i].name);
                            memcpy(c->sblob[i], blob, sb);
                            c->sbytes[i] = sb;
                        }
                        if (type == DD_MSG_PULL && !n && (!ver || ver[i] != v)) r.bad = 1;
                        if (r.bad) break;
                        if (vals) memcpy(dst + c->b[i].offset, vals, (size_t)n * 4);
                        if (ver) ver[i] = v;
                        c->done[i] = 1;
                        left--;
                    }
                    if (r.bad)
                        dd_log(DD_LOG_WARN, "ps client: malformed %s from server %s ignored", dd_msg_type_name(h.type),
                               c->cl.servers[s].name);
                    int any = 0;
                    for (size_t i = 0; i < c->nb; i++) any |= !c->done[i] && c->assign[i] == s;
                    if (!any) {
                        c->out[s].active = 0;
                        if (!c->out[s].resent) c->srtt = 0.9 * c->srtt + 0.1 * (double)(c->out[s].heard_ms - c->out[s].sent_ms);
                    }
                }
                zmq_msg_close(&m);
            }
        }
        /* resends, dead servers */
        now = dd_net_ms();
        for (int s = 0; s < ns && err == DD_OK; s++) {
            outst *o = &c->out[s];
            if (!o->active) continue;
            if (now - o->heard_ms > c->o.dead_ms) {
                o->active = 0;
                c->alive[s] = 0;
                c->st.failovers++;
                c->st.servers_dead++;
                dd_log(DD_LOG_WARN,
                       "ps client: server %s (%s) silent for %d ms: dead (or the CURVE handshake fails: wrong server "
                       "key?); its blocks go to their replicas",
                       c->cl.servers[s].name, c->cl.servers[s].address, c->o.dead_ms);
            } else if (now - o->sent_ms >= o->rto) {
                csend(c, s, type, seq, c->id, o->msg.p, (uint32_t)o->msg.n);
                csend(c, s, DD_MSG_PING, seq, c->id, NULL, 0);
                c->st.resends++;
                o->resent = 1;
                o->sent_ms = now;
                o->rto = o->rto * 2 > 1000 ? 1000 : o->rto * 2;
            }
        }
    }
    return err;
}

dd_status dd_ps_client_init(dd_ps_client *c, const float *arena, uint64_t *versions) {
    return run_op(c, DD_MSG_INIT, 0, arena, NULL, versions);
}

dd_status dd_ps_client_restore(dd_ps_client *c, const float *arena, const void *const *states, const size_t *state_bytes,
                                const uint64_t *versions) {
    if (!states || !state_bytes || !versions) return dd_error(DD_ERR_ARG, "restore: states, their sizes and versions needed");
    for (size_t i = 0; i < c->nb; i++)
        if (!states[i] || state_bytes[i] > UINT32_MAX)
            return dd_error(DD_ERR_ARG, "restore: block '%s' has no optimiser state", c->b[i].name);
    c->rstate = states;
    c->rbytes = state_bytes;
    c->rver = versions;
    dd_status st = run_op(c, DD_MSG_RESTORE, 0, arena, NULL, NULL);
    c->rstate = NULL;
    c->rbytes = NULL;
    c->rver = NULL;
    return st;
}

dd_status dd_ps_client_push(dd_ps_client *c, const float *g, double lr, uint64_t *versions) {
    if (!isfinite(lr) || lr < 0) return dd_error(DD_ERR_ARG, "push: learning rate %g is not a finite number >= 0", lr);
    return run_op(c, DD_MSG_PUSH, lr, g, NULL, versions);
}

dd_status dd_ps_client_stage(dd_ps_client *c, const float *g, double lr, uint64_t *txn) {
    if (!txn) return dd_error(DD_ERR_ARG, "stage: txn needed");
    if (!isfinite(lr) || lr < 0) return dd_error(DD_ERR_ARG, "stage: learning rate %g is not a finite number >= 0", lr);
    if (*txn == 0) *txn = ++c->seq; /* below every later request's sequence number: the dedup order */
    c->txn = *txn;
    return run_op(c, DD_MSG_STAGE, lr, g, NULL, NULL);
}

dd_status dd_ps_client_apply(dd_ps_client *c, uint64_t owner, uint64_t txn, uint64_t *versions) {
    if (txn == 0) return dd_error(DD_ERR_ARG, "apply: transaction 0");
    c->txn_owner = owner ? owner : c->id;
    c->txn = txn;
    return run_op(c, DD_MSG_APPLY, 0, NULL, NULL, versions);
}

uint64_t dd_ps_client_id(const dd_ps_client *c) { return c->id; }

dd_status dd_ps_client_pull(dd_ps_client *c, float *arena, uint64_t *versions) {
    return run_op(c, DD_MSG_PULL, 0, NULL, arena, versions);
}

dd_status dd_ps_client_pull_state(dd_ps_client *c, float *arena, uint64_t *versions) {
    return run_op(c, DD_MSG_STATE, 0, NULL, arena, versions);
}

const void *dd_ps_client_block_state(const dd_ps_client *c, size_t i, size_t *bytes) {
    if (!c->sblob || i >= c->nb || !c->sblob[i]) {
        if (bytes) *bytes = 0;
        return NULL;
    }
    if (bytes) *bytes = c->sbytes[i];
    return c->sblob[i];
}

dd_status dd_ps_client_ping(dd_ps_client *c) {
    uint64_t seq = ++c->seq;
    int ns = (int)c->cl.n;
    int64_t t0 = dd_net_ms(), last[DD_PS_MAX_SERVERS];
    int got[DD_PS_MAX_SERVERS] = {0}, waiting = 0;
    for (int s = 0; s < ns; s++) {
        if (!c->alive[s]) continue;
        csend(c, s, DD_MSG_PING, seq, c->id, NULL, 0);
        last[s] = t0;
        waiting++;
    }
    while (waiting > 0) {
        zmq_pollitem_t it[DD_PS_MAX_SERVERS];
        int map[DD_PS_MAX_SERVERS] = {0}, ni = 0; /* read below ni only; initialised for cppcheck */
        for (int s = 0; s < ns; s++)
            if (c->alive[s] && !got[s]) {
                it[ni] = (zmq_pollitem_t){c->sock[s], 0, ZMQ_POLLIN, 0};
                map[ni++] = s;
            }
        zmq_poll(it, ni, 50);
        int64_t now = dd_net_ms();
        for (int k = 0; k < ni; k++) {
            int s = map[k];
            if (it[k].revents & ZMQ_POLLIN) {
                zmq_msg_t m;
                zmq_msg_init(&m);
                while (zmq_msg_recv(&m, c->sock[s], ZMQ_DONTWAIT) >= 0) {
                    c->st.bytes_received += zmq_msg_size(&m);
                    dd_net_hdr h;
                    const uint8_t *pl;
                    if (!zmq_msg_more(&m) && dd_net_parse(zmq_msg_data(&m), zmq_msg_size(&m), UINT32_MAX, &h, &pl) == DD_OK &&
                        h.type == DD_MSG_PONG && h.seq == seq && !got[s]) {
                        got[s] = 1;
                        waiting--;
                    }
                }
                zmq_msg_close(&m);
            }
            if (got[s]) continue;
            if (now - t0 > c->o.dead_ms) {
                c->alive[s] = 0;
                c->st.servers_dead++;
                waiting--;
                dd_log(DD_LOG_WARN, "ps client: server %s (%s) did not answer a ping in %d ms: dead", c->cl.servers[s].name,
                       c->cl.servers[s].address, c->o.dead_ms);
            } else if (now - last[s] > c->o.resend_ms) {
                csend(c, s, DD_MSG_PING, seq, c->id, NULL, 0);
                last[s] = now;
            }
        }
    }
    return DD_OK;
}

void dd_ps_client_get_stats(const dd_ps_client *c, dd_ps_client_stats *s) { *s = c->st; }
