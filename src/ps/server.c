/* One parameter server (ps.h, docs/ps.md): a ROUTER socket (CURVE + ZAP) serving
 * init / push / pull / ping, blocks with their optimiser state and version clock, per
 * block deduplication of resent pushes, primary-backup replication of full block state
 * to the next servers of the ring, heartbeats to the other servers.
 *
 * Replication: a push is acknowledged only after every replica target of its block has
 * acknowledged a state at least as new (so an acknowledged update survives the primary's
 * death). Each loop iteration sends every peer the newest state of the blocks that
 * changed since the last REPL (updates in between are coalesced); the newest state is
 * resent when it is not acknowledged in resend_ms. The dedup table travels with the state, so
 * a client that resends a push to the replica after a failover is recognised. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <zmq.h>

#include "distdpd/ps.h"
#include "ps_internal.h"

typedef struct {
    uint64_t client, seq;
} dedup_ent;

/* A staged update (two-phase push, docs/ps.md "Atomic pushes"): held back until an APPLY
 * of its owner and transaction number; one per owner and block (a newer stage replaces an
 * older one that was never applied: its batch was given to another worker). */
typedef struct {
    uint64_t owner, txn;
    double lr;
    float *g;
} staged_ent;

typedef struct {
    char name[DD_PS_NAME_MAX];
    uint32_t n;
    float *w;
    dd_optim *opt;
    uint64_t version;
    int owner;        /* this server applied pushes/inits to it: it replicates it */
    dedup_ent *dd;
    size_t ndd, capdd;
    staged_ent *stg;
    size_t nstg, capstg;
    uint64_t *acked;  /* [peer] version + 1 the peer acknowledged (0: none) */
    uint64_t *sent;   /* [peer] version + 1 in flight */
    int64_t *sent_ms; /* [peer] */
    int tgt[DD_PS_MAX_SERVERS];
    int ntgt;
    uint64_t tgt_epoch; /* alive epoch the targets were computed at (0: never) */
} block;

typedef struct {
    uint8_t rid[256];
    size_t ridn;
    uint64_t seq, sender;
    int *blk;
    uint64_t *need; /* version each block must be durable at */
    int n;
} pending;

typedef struct {
    const dd_ps_server_opts *o;
    dd_ps_cluster cl;
    dd_ps_ring *ring;
    int self, R;
    char who[128];
    uint32_t max_msg;
    void *ctx, *router, *mon;
    void **peer; /* DEALER per server (NULL for self) */
    unsigned char alive[DD_PS_MAX_SERVERS];
    int64_t last_heard[DD_PS_MAX_SERVERS];
    uint64_t epoch;
    block *b;
    size_t nb, capb;
    dd_ps_map map;
    pending *pend;
    size_t npend, cappend;
    float *scratch;
    size_t nscratch;
    dd_nbuf out;
    int repl_dirty;
    uint64_t pseq;
    char last_peer[96]; /* "[host]:port", host up to 63 bytes */
    dd_ps_server_stats st;
} server;

#define BNAME(i) (sv->b[(i)].name)

static int find_block(server *sv, const char *name) {
    int i;
    DD_PS_MAP_FIND(&sv->map, name, BNAME, i);
    return i;
}

static void block_free(block *b) {
    for (size_t i = 0; i < b->nstg; i++) free(b->stg[i].g);
    free(b->stg);
    free(b->w);
    dd_optim_destroy(&b->opt);
    free(b->dd);
    free(b->acked);
    free(b->sent);
    free(b->sent_ms);
}

static int new_block(server *sv, const char *name, uint32_t n) {
    if (sv->nb == sv->capb) {
        size_t c = sv->capb ? 2 * sv->capb : 64;
        block *nb = realloc(sv->b, c * sizeof *nb);
        if (!nb) return -1;
        sv->b = nb;
        sv->capb = c;
    }
    block *b = &sv->b[sv->nb];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    b->n = n;
    b->w = calloc(n, sizeof *b->w);
    b->acked = calloc(sv->cl.n, sizeof *b->acked);
    b->sent = calloc(sv->cl.n, sizeof *b->sent);
    b->sent_ms = calloc(sv->cl.n, sizeof *b->sent_ms);
    if (!b->w || !b->acked || !b->sent || !b->sent_ms ||
        dd_optim_create(dd_optim_kind_name(sv->cl.optim), &sv->cl.optim_cfg, n, &b->opt) != DD_OK) {
        block_free(b);
        return -1;
    }
    int rc;
    DD_PS_MAP_INSERT(&sv->map, b->name, (int)sv->nb, BNAME, rc);
    if (rc) {
        block_free(b);
        return -1;
    }
    sv->st.blocks = ++sv->nb;
    return (int)sv->nb - 1;
}

static uint64_t *dedup_slot(block *b, uint64_t client, int create) {
    for (size_t i = 0; i < b->ndd; i++)
        if (b->dd[i].client == client) return &b->dd[i].seq;
    if (!create) return NULL;
    if (b->ndd == b->capdd) {
        size_t c = b->capdd ? 2 * b->capdd : 8;
        dedup_ent *d = realloc(b->dd, c * sizeof *d);
        if (!d) return NULL;
        b->dd = d;
        b->capdd = c;
    }
    b->dd[b->ndd] = (dedup_ent){client, 0};
    return &b->dd[b->ndd++].seq;
}

/* Replica targets of a block: the first R live servers of its preference list other
 * than this one (recomputed when the set of live servers changes). */
static void targets(server *sv, block *b) {
    if (b->tgt_epoch == sv->epoch) return;
    int pl[DD_PS_MAX_SERVERS];
    int k = dd_ps_ring_place(sv->ring, b->name, sv->alive, pl, sv->R + 2);
    b->ntgt = 0;
    for (int i = 0; i < k && b->ntgt < sv->R; i++)
        if (pl[i] != sv->self) b->tgt[b->ntgt++] = pl[i];
    b->tgt_epoch = sv->epoch;
}

static int durable(server *sv, block *b, uint64_t need) {
    if (!b->owner) return 1;
    targets(sv, b);
    for (int t = 0; t < b->ntgt; t++)
        if (b->acked[b->tgt[t]] < need + 1) return 0;
    return 1;
}

/* ---- replies ---- */
static void reply(server *sv, const uint8_t *rid, size_t ridn, int type, uint64_t seq, const dd_nbuf *p) {
    dd_net_send(sv->router, rid, ridn, type, seq, DD_PS_SERVER_SENDER | (uint64_t)sv->self, p ? p->p : NULL,
                p ? (uint32_t)p->n : 0);
}

static void refuse(server *sv, const uint8_t *rid, size_t ridn, uint64_t seq, const char *peer, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;
static void refuse(server *sv, const uint8_t *rid, size_t ridn, uint64_t seq, const char *peer, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sv->st.refused++;
    dd_log(DD_LOG_WARN, "%s: refused message from %s: %s", sv->who, peer, msg);
    dd_nbuf b = {0};
    dd_nbuf_bytes(&b, msg, strlen(msg));
    reply(sv, rid, ridn, DD_MSG_ERR, seq, &b);
    dd_nbuf_free(&b);
}

static void add_pending(server *sv, const uint8_t *rid, size_t ridn, uint64_t seq, uint64_t sender, int *blk,
                        uint64_t *need, int n) {
    if (sv->npend == sv->cappend) {
        size_t c = sv->cappend ? 2 * sv->cappend : 32;
        pending *p = realloc(sv->pend, c * sizeof *p);
        if (!p) { /* no reply: the client resends */
            free(blk);
            free(need);
            return;
        }
        sv->pend = p;
        sv->cappend = c;
    }
    pending *p = &sv->pend[sv->npend++];
    memcpy(p->rid, rid, ridn);
    p->ridn = ridn;
    p->seq = seq;
    p->sender = sender;
    p->blk = blk;
    p->need = need;
    p->n = n;
}

/* Sends the ACKs whose blocks are all durable. */
static void flush_pending(server *sv) {
    size_t k = 0;
    for (size_t i = 0; i < sv->npend; i++) {
        pending *p = &sv->pend[i];
        int ok = 1;
        for (int j = 0; j < p->n && ok; j++) ok = durable(sv, &sv->b[p->blk[j]], p->need[j]);
        if (!ok) {
            sv->pend[k++] = *p;
            continue;
        }
        dd_nbuf out = {0};
        dd_nbuf_u32(&out, (uint32_t)p->n);
        for (int j = 0; j < p->n; j++) {
            dd_nbuf_str(&out, sv->b[p->blk[j]].name);
            dd_nbuf_u64(&out, p->need[j]);
        }
        reply(sv, p->rid, p->ridn, DD_MSG_ACK, p->seq, &out);
        dd_nbuf_free(&out);
        free(p->blk);
        free(p->need);
    }
    sv->npend = k;
}

/* An ACK (u32 count; items: name, u64 version) sent at once. */
static void ack_now(server *sv, const uint8_t *rid, size_t ridn, uint64_t seq, const int *blk, const uint64_t *ver, int n) {
    dd_nbuf out = {0};
    dd_nbuf_u32(&out, (uint32_t)n);
    for (int j = 0; j < n; j++) {
        dd_nbuf_str(&out, sv->b[blk[j]].name);
        dd_nbuf_u64(&out, ver[j]);
    }
    reply(sv, rid, ridn, DD_MSG_ACK, seq, &out);
    dd_nbuf_free(&out);
}

/* After a request's items were validated (r at their end): refuses bytes after the last
 * item, else allocates the block indices and versions of its acknowledgement (cnt each).
 * 0 when the caller goes on (it frees both), -1 when refused or out of memory. */
static int items_begin(server *sv, const dd_net_hdr *h, const dd_nrd *r, const uint8_t *rid, size_t ridn,
                       const char *peer, uint32_t cnt, int **blk, uint64_t **need) {
    *blk = NULL;
    *need = NULL;
    if (r->off != h->len) {
        refuse(sv, rid, ridn, h->seq, peer, "malformed %s: %zu bytes after the last item", dd_msg_type_name(h->type),
               (size_t)h->len - r->off);
        return -1;
    }
    *blk = malloc(cnt * sizeof **blk);
    *need = malloc(cnt * sizeof **need);
    if (!*blk || !*need) {
        dd_log(DD_LOG_ERROR, "%s: out of memory for a %s of %u items", sv->who, dd_msg_type_name(h->type), cnt);
        free(*blk);
        free(*need);
        return -1;
    }
    return 0;
}

/* ---- staged updates (two-phase push) ---- */
static staged_ent *stage_find(block *b, uint64_t owner, uint64_t txn) {
    for (size_t i = 0; i < b->nstg; i++)
        if (b->stg[i].owner == owner && b->stg[i].txn == txn) return &b->stg[i];
    return NULL;
}

static void stage_drop(block *b, staged_ent *e) {
    free(e->g);
    *e = b->stg[--b->nstg];
}

/* Holds gradient f (b->n floats, unaligned bytes) as owner's update txn; replaces the
 * owner's older staged update. Nothing is staged when the owner's txn was applied already
 * (a resent stage). 0, or -1 when out of memory. */
static int stage_put(block *b, uint64_t owner, uint64_t txn, double lr, const uint8_t *f) {
    uint64_t *last = dedup_slot(b, owner, 0);
    if (last && *last >= txn) return 0;
    staged_ent *e = NULL;
    for (size_t i = 0; i < b->nstg && !e; i++)
        if (b->stg[i].owner == owner) e = &b->stg[i];
    if (!e) {
        if (b->nstg == b->capstg) {
            size_t c = b->capstg ? 2 * b->capstg : 4;
            staged_ent *ns = realloc(b->stg, c * sizeof *ns);
            if (!ns) return -1;
            b->stg = ns;
            b->capstg = c;
        }
        e = &b->stg[b->nstg];
        *e = (staged_ent){owner, 0, 0, NULL};
        if (!(e->g = malloc((size_t)b->n * sizeof *e->g))) return -1;
        b->nstg++;
    }
    memcpy(e->g, f, (size_t)b->n * 4);
    e->txn = txn;
    e->lr = lr;
    return 0;
}

/* ---- requests ---- */
/* INIT and PUSH: u32 count (after f64 lr for PUSH); items: name, u32 n, n floats.
 * RESTORE (resume): items also carry u64 version, u32 state bytes, the optimiser state. */
static void on_update(server *sv, int type, const dd_net_hdr *h, const uint8_t *pl, const uint8_t *rid, size_t ridn,
                      const char *peer) {
    dd_nrd r;
    dd_nrd_init(&r, pl, h->len);
    const int stage = type == DD_MSG_STAGE, grad = type == DD_MSG_PUSH || stage;
    uint64_t txn = stage ? dd_nrd_u64(&r) : 0;
    double lr = grad ? dd_nrd_f64(&r) : 0;
    uint32_t cnt = dd_nrd_u32(&r);
    if (r.bad || cnt == 0 || cnt > 1000000) {
        refuse(sv, rid, ridn, h->seq, peer, "malformed %s: bad item count", dd_msg_type_name(type));
        return;
    }
    if (grad && (!isfinite(lr) || lr < 0)) {
        refuse(sv, rid, ridn, h->seq, peer, "%s: learning rate %g is not a finite number >= 0", dd_msg_type_name(type), lr);
        return;
    }
    if (stage && txn == 0) {
        refuse(sv, rid, ridn, h->seq, peer, "stage: transaction number 0");
        return;
    }
    /* validate every item before applying any */
    size_t start = r.off;
    char name[DD_PS_NAME_MAX];
    for (uint32_t i = 0; i < cnt; i++) {
        dd_nrd_str(&r, name, sizeof name);
        uint32_t n = dd_nrd_u32(&r);
        const uint8_t *f = (!r.bad && n > 0 && n <= h->len / 4) ? dd_nrd_bytes(&r, (size_t)n * 4) : NULL;
        if (r.bad || !f) {
            refuse(sv, rid, ridn, h->seq, peer, "malformed %s: item %u (name, length, values) runs past the payload",
                   dd_msg_type_name(type), i);
            return;
        }
        int bi = find_block(sv, name);
        if (type == DD_MSG_RESTORE) {
            uint64_t ver = dd_nrd_u64(&r);
            uint32_t sb = dd_nrd_u32(&r);
            const uint8_t *state = (!r.bad && sb <= h->len) ? dd_nrd_bytes(&r, sb) : NULL;
            if (r.bad || !state) {
                refuse(sv, rid, ridn, h->seq, peer, "malformed restore: item %u (version, optimiser state) runs past the payload", i);
                return;
            }
            if (bi >= 0 && sv->b[bi].version != 0 && sv->b[bi].version != ver) {
                refuse(sv, rid, ridn, h->seq, peer,
                       "restore: block '%s' is here at version %llu, the checkpoint's at %llu: a resume needs fresh servers "
                       "(these hold another run, or this one further on)",
                       name, (unsigned long long)sv->b[bi].version, (unsigned long long)ver);
                return;
            }
            dd_optim *tmp = NULL;
            dd_status ost = dd_optim_create(dd_optim_kind_name(sv->cl.optim), &sv->cl.optim_cfg, n, &tmp);
            if (ost == DD_OK) ost = dd_optim_state_load(tmp, state, sb);
            dd_optim_destroy(&tmp);
            if (ost != DD_OK) {
                refuse(sv, rid, ridn, h->seq, peer, "restore: block '%s': optimiser state does not fit this server's %s: %s",
                       name, dd_optim_kind_name(sv->cl.optim), dd_last_error());
                return;
            }
        }
        if (grad && bi < 0) {
            refuse(sv, rid, ridn, h->seq, peer, "%s: unknown block '%s' (init it first)", dd_msg_type_name(type), name);
            return;
        }
        if (bi >= 0 && sv->b[bi].n != n) {
            refuse(sv, rid, ridn, h->seq, peer, "%s: block '%s' has %u values here, the message %u", dd_msg_type_name(type),
                   name, sv->b[bi].n, n);
            return;
        }
    }
    int *blk;
    uint64_t *need;
    if (items_begin(sv, h, &r, rid, ridn, peer, cnt, &blk, &need)) return;
    r.off = start;
    for (uint32_t i = 0; i < cnt; i++) {
        dd_nrd_str(&r, name, sizeof name);
        uint32_t n = dd_nrd_u32(&r);
        const uint8_t *f = dd_nrd_bytes(&r, (size_t)n * 4);
        int bi = find_block(sv, name);
        if (bi < 0) { /* INIT of a new block */
            bi = new_block(sv, name, n);
            if (bi < 0) {
                dd_log(DD_LOG_ERROR, "%s: out of memory for block '%s' (%u floats)", sv->who, name, n);
                free(blk);
                free(need);
                return;
            }
            memcpy(sv->b[bi].w, f, (size_t)n * 4);
            sv->b[bi].owner = 1;
            sv->repl_dirty = 1;
        }
        if (type == DD_MSG_RESTORE) { /* validated above: values, optimiser state, version */
            block *b = &sv->b[bi];
            uint64_t ver = dd_nrd_u64(&r);
            uint32_t sb = dd_nrd_u32(&r);
            const uint8_t *state = dd_nrd_bytes(&r, sb);
            memcpy(b->w, f, (size_t)n * 4);
            if (dd_optim_state_load(b->opt, state, sb) != DD_OK)
                dd_log(DD_LOG_ERROR, "%s: block '%s': restore: %s", sv->who, name, dd_last_error());
            b->version = ver;
            b->ndd = 0;
            while (b->nstg) stage_drop(b, &b->stg[0]);
            b->owner = 1;
            sv->repl_dirty = 1;
        } else if (stage) {
            if (stage_put(sv->b + bi, h->sender, txn, lr, f) != 0) {
                dd_log(DD_LOG_ERROR, "%s: out of memory staging block '%s' (%u floats)", sv->who, name, n);
                free(blk);
                free(need);
                return;
            }
            sv->st.staged++;
        } else if (bi >= 0 && type == DD_MSG_PUSH) {
            block *b = &sv->b[bi];
            uint64_t *last = dedup_slot(b, h->sender, 1);
            if (!last) {
                free(blk);
                free(need);
                return;
            }
            if (h->seq <= *last) {
                sv->st.duplicates++;
            } else {
                if (sv->nscratch < n) {
                    float *s = realloc(sv->scratch, (size_t)n * sizeof *s);
                    if (!s) {
                        free(blk);
                        free(need);
                        return;
                    }
                    sv->scratch = s;
                    sv->nscratch = n;
                }
                memcpy(sv->scratch, f, (size_t)n * 4);
                dd_optim_step(b->opt, b->w, sv->scratch, lr);
                b->version++;
                *last = h->seq;
                b->owner = 1;
                sv->st.pushes++;
                sv->repl_dirty = 1;
            }
        }
        blk[i] = bi;
        need[i] = sv->b[bi].version;
    }
    if (stage) { /* nothing applied: acknowledged at once (not replicated, see staged_ent) */
        ack_now(sv, rid, ridn, h->seq, blk, need, (int)cnt);
        free(blk);
        free(need);
        return;
    }
    add_pending(sv, rid, ridn, h->seq, h->sender, blk, need, (int)cnt);
}

/* APPLY: u64 owner, u64 transaction, u32 count; items: name. Applies the owner's staged
 * update of that transaction to every block named, exactly once (the owner's dedup entry,
 * which travels with the replicas' state, records it: a repeated APPLY, from the owner
 * or from the coordinator on its behalf, is a duplicate). Every block is checked before
 * any is changed: one that neither holds the staged update nor has applied it refuses the
 * whole request. Acknowledged (ACK, as a push) when the replicas hold the result. */
static void on_apply(server *sv, const dd_net_hdr *h, const uint8_t *pl, const uint8_t *rid, size_t ridn, const char *peer) {
    dd_nrd r;
    dd_nrd_init(&r, pl, h->len);
    uint64_t owner = dd_nrd_u64(&r), txn = dd_nrd_u64(&r);
    uint32_t cnt = dd_nrd_u32(&r);
    if (r.bad || cnt == 0 || cnt > 1000000 || txn == 0) {
        refuse(sv, rid, ridn, h->seq, peer, "malformed apply: bad owner, transaction or item count");
        return;
    }
    size_t start = r.off;
    char name[DD_PS_NAME_MAX];
    for (uint32_t i = 0; i < cnt; i++) {
        dd_nrd_str(&r, name, sizeof name);
        if (r.bad) {
            refuse(sv, rid, ridn, h->seq, peer, "malformed apply: item %u runs past the payload", i);
            return;
        }
        int bi = find_block(sv, name);
        if (bi < 0) {
            refuse(sv, rid, ridn, h->seq, peer, "apply: unknown block '%s'", name);
            return;
        }
        uint64_t *last = dedup_slot(&sv->b[bi], owner, 0);
        if (!(last && *last >= txn) && !stage_find(&sv->b[bi], owner, txn)) {
            refuse(sv, rid, ridn, h->seq, peer,
                   "apply: block '%s' holds no staged update %llu of client %016llx (staged on a server that died since?)",
                   name, (unsigned long long)txn, (unsigned long long)owner);
            return;
        }
    }
    int *blk;
    uint64_t *need;
    if (items_begin(sv, h, &r, rid, ridn, peer, cnt, &blk, &need)) return;
    r.off = start;
    for (uint32_t i = 0; i < cnt; i++) {
        dd_nrd_str(&r, name, sizeof name);
        int bi = find_block(sv, name);
        block *b = &sv->b[bi];
        uint64_t *last = dedup_slot(b, owner, 1);
        staged_ent *e = stage_find(b, owner, txn);
        if (!last) {
            free(blk);
            free(need);
            return;
        }
        if (*last >= txn) {
            sv->st.duplicates++;
        } else { /* e != NULL: checked above */
            dd_optim_step(b->opt, b->w, e->g, e->lr);
            b->version++;
            *last = txn;
            b->owner = 1;
            sv->st.pushes++;
            sv->repl_dirty = 1;
        }
        if (e) stage_drop(b, e);
        blk[i] = bi;
        need[i] = b->version;
    }
    add_pending(sv, rid, ridn, h->seq, h->sender, blk, need, (int)cnt);
}

/* PULL: u32 count; items: name, u64 have_version. Reply: u32 count; items: name,
 * u64 version, u32 n (0: unchanged), n floats. */
/* PULL (and STATE: the same request; the reply carries every block's values and optimiser
 * state blob whatever the version, for checkpoints). */
static void on_pull(server *sv, const dd_net_hdr *h, const uint8_t *pl, const uint8_t *rid, size_t ridn, const char *peer) {
    const int state = h->type == DD_MSG_STATE;
    dd_nrd r;
    dd_nrd_init(&r, pl, h->len);
    uint32_t cnt = dd_nrd_u32(&r);
    if (r.bad || cnt == 0 || cnt > 1000000) {
        refuse(sv, rid, ridn, h->seq, peer, "malformed pull: bad item count");
        return;
    }
    dd_nbuf out = {0};
    dd_nbuf_u32(&out, cnt);
    char name[DD_PS_NAME_MAX];
    for (uint32_t i = 0; i < cnt; i++) {
        dd_nrd_str(&r, name, sizeof name);
        uint64_t have = dd_nrd_u64(&r);
        if (r.bad) {
            dd_nbuf_free(&out);
            refuse(sv, rid, ridn, h->seq, peer, "malformed pull: item %u runs past the payload", i);
            return;
        }
        int bi = find_block(sv, name);
        if (bi < 0) {
            dd_nbuf_free(&out);
            refuse(sv, rid, ridn, h->seq, peer, "pull: unknown block '%s'", name);
            return;
        }
        block *b = &sv->b[bi];
        dd_nbuf_str(&out, b->name);
        dd_nbuf_u64(&out, b->version);
        if (have == b->version && !state) {
            dd_nbuf_u32(&out, 0);
        } else {
            dd_nbuf_u32(&out, b->n);
            dd_nbuf_bytes(&out, b->w, (size_t)b->n * 4);
        }
        if (state) {
            size_t sb = dd_optim_state_bytes(b->opt);
            dd_nbuf_u32(&out, (uint32_t)sb);
            uint8_t *room = dd_nbuf_room(&out, sb);
            if (room) dd_optim_state_save(b->opt, room, sb);
        }
    }
    if (r.off != h->len) {
        dd_nbuf_free(&out);
        refuse(sv, rid, ridn, h->seq, peer, "malformed pull: %zu bytes after the last item", (size_t)h->len - r.off);
        return;
    }
    sv->st.pulls++;
    if (out.oom || out.n > sv->max_msg) {
        dd_nbuf_free(&out);
        refuse(sv, rid, ridn, h->seq, peer, "pull: the reply would exceed the message limit of %u bytes", sv->max_msg);
        return;
    }
    reply(sv, rid, ridn, state ? DD_MSG_STATE_REP : DD_MSG_PULL_REP, h->seq, &out);
    dd_nbuf_free(&out);
}

/* REPL: u32 count; items: name, u64 version, u32 n, n floats, u32 state bytes, state,
 * u32 dedup entries, (u64 client, u64 seq) each. Reply REPL_ACK: u32 count; name, u64
 * version held. */
static void on_repl(server *sv, const dd_net_hdr *h, const uint8_t *pl, const uint8_t *rid, size_t ridn, const char *peer) {
    dd_nrd r;
    dd_nrd_init(&r, pl, h->len);
    uint32_t cnt = dd_nrd_u32(&r);
    dd_nbuf out = {0};
    dd_nbuf_u32(&out, 0);
    uint32_t acked = 0;
    char name[DD_PS_NAME_MAX];
    for (uint32_t i = 0; i < cnt && !r.bad; i++) {
        dd_nrd_str(&r, name, sizeof name);
        uint64_t ver = dd_nrd_u64(&r);
        uint32_t n = dd_nrd_u32(&r);
        const uint8_t *w = (!r.bad && n > 0 && n <= h->len / 4) ? dd_nrd_bytes(&r, (size_t)n * 4) : NULL;
        uint32_t sb = dd_nrd_u32(&r);
        const uint8_t *state = (!r.bad && sb <= h->len) ? dd_nrd_bytes(&r, sb) : NULL;
        uint32_t ndd = dd_nrd_u32(&r);
        const uint8_t *dd = (!r.bad && ndd <= h->len / 16) ? dd_nrd_bytes(&r, (size_t)ndd * 16) : NULL;
        if (r.bad || !w || !state || (ndd && !dd)) {
            r.bad = 1;
            break;
        }
        int bi = find_block(sv, name);
        if (bi >= 0 && sv->b[bi].n != n) {
            dd_nbuf_free(&out);
            refuse(sv, rid, ridn, h->seq, peer, "repl: block '%s' has %u values here, the message %u", name, sv->b[bi].n, n);
            return;
        }
        int fresh = bi < 0;
        if (fresh && (bi = new_block(sv, name, n)) < 0) continue; /* out of memory: not acked, resent */
        block *b = &sv->b[bi];
        if (fresh || ver > b->version) {
            if (dd_optim_state_load(b->opt, state, sb) != DD_OK) {
                dd_nbuf_free(&out);
                refuse(sv, rid, ridn, h->seq, peer, "repl: block '%s': optimiser state: %s", name, dd_last_error());
                return;
            }
            memcpy(b->w, w, (size_t)n * 4);
            b->version = ver;
            b->ndd = 0;
            dd_nrd dr;
            dd_nrd_init(&dr, dd, (size_t)ndd * 16);
            for (uint32_t j = 0; j < ndd; j++) {
                uint64_t cl = dd_nrd_u64(&dr), sq = dd_nrd_u64(&dr);
                uint64_t *s = dedup_slot(b, cl, 1);
                if (s) *s = sq;
            }
            b->owner = 0; /* a copy: the primary replicates it, not this server */
            sv->st.repl_applied++;
        }
        dd_nbuf_str(&out, b->name);
        dd_nbuf_u64(&out, b->version);
        acked++;
    }
    if (r.bad || r.off != h->len) {
        dd_nbuf_free(&out);
        refuse(sv, rid, ridn, h->seq, peer, "malformed repl: an item runs past the payload");
        return;
    }
    out.p[0] = (uint8_t)acked; /* patch the count (little-endian u32) */
    out.p[1] = (uint8_t)(acked >> 8);
    out.p[2] = (uint8_t)(acked >> 16);
    out.p[3] = (uint8_t)(acked >> 24);
    reply(sv, rid, ridn, DD_MSG_REPL_ACK, h->seq, &out);
    dd_nbuf_free(&out);
}

static void on_router(server *sv) {
    zmq_msg_t id, m;
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, sv->router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&id);
        return;
    }
    int frames = 0;
    zmq_msg_init(&m);
    int more = zmq_msg_more(&id), got = 0;
    while (more) { /* keep the first data frame, count and drop the rest */
        zmq_msg_t x;
        zmq_msg_init(&x);
        if (zmq_msg_recv(&x, sv->router, 0) < 0) {
            zmq_msg_close(&x);
            break;
        }
        frames++;
        more = zmq_msg_more(&x);
        if (!got) {
            zmq_msg_move(&m, &x);
            got = 1;
        }
        zmq_msg_close(&x);
    }
    char peer[192];
    const char *addr = got ? zmq_msg_gets(&m, "Peer-Address") : NULL;
    const char *uid = got ? zmq_msg_gets(&m, "User-Id") : NULL;
    snprintf(peer, sizeof peer, "%s (%s)", addr ? addr : "?", uid && *uid ? uid : "insecure");
    const uint8_t *rid = zmq_msg_data(&id);
    size_t ridn = zmq_msg_size(&id) < 256 ? zmq_msg_size(&id) : 0;
    if (frames != 1) {
        refuse(sv, rid, ridn, 0, peer, "expected 1 frame, got %d", frames);
    } else {
        dd_net_hdr h;
        const uint8_t *pl;
        if (dd_net_parse(zmq_msg_data(&m), zmq_msg_size(&m), sv->max_msg, &h, &pl) != DD_OK) {
            refuse(sv, rid, ridn, 0, peer, "%s", dd_last_error());
        } else {
            switch (h.type) {
            case DD_MSG_PUSH:
            case DD_MSG_STAGE:
            case DD_MSG_INIT:
            case DD_MSG_RESTORE: on_update(sv, h.type, &h, pl, rid, ridn, peer); break;
            case DD_MSG_PULL:
            case DD_MSG_STATE: on_pull(sv, &h, pl, rid, ridn, peer); break;
            case DD_MSG_APPLY: on_apply(sv, &h, pl, rid, ridn, peer); break;
            case DD_MSG_PING: reply(sv, rid, ridn, DD_MSG_PONG, h.seq, NULL); break;
            case DD_MSG_REPL:
                if (!sv->o->insecure && (!uid || strncmp(uid, "server:", 7) != 0))
                    refuse(sv, rid, ridn, h.seq, peer, "repl from a client key (only the cluster's servers replicate)");
                else
                    on_repl(sv, &h, pl, rid, ridn, peer);
                break;
            default: refuse(sv, rid, ridn, h.seq, peer, "a %s message is a reply, not a request", dd_msg_type_name(h.type));
            }
        }
    }
    zmq_msg_close(&m);
    zmq_msg_close(&id);
}

dd_status dd_ps_dec_repl_ack(const uint8_t *p, size_t n, void (*fn)(void *user, const char *name, uint64_t version),
                             void *user) {
    for (int pass = 0; pass < 2; pass++) { /* 0: validate everything, 1: hand out the items */
        dd_nrd r;
        dd_nrd_init(&r, p, n);
        const uint32_t cnt = dd_nrd_u32(&r);
        if (r.bad) return dd_error(DD_ERR_FORMAT, "repl-ack: truncated payload (%zu bytes)", n);
        if (cnt > (n - 4) / 11) /* an item is at least a 1-byte name (3 bytes) and a version (8) */
            return dd_error(DD_ERR_FORMAT, "repl-ack: %u items cannot fit in the %zu bytes of the payload", cnt, n);
        char name[DD_PS_NAME_MAX];
        for (uint32_t i = 0; i < cnt; i++) {
            const size_t at = r.off;
            dd_nrd_str(&r, name, sizeof name);
            if (r.bad)
                return dd_error(DD_ERR_FORMAT, "repl-ack: item %u: the block name at byte %zu is truncated, empty, longer "
                                               "than %d bytes or not printable", i + 1, at, DD_PS_NAME_MAX - 1);
            const uint64_t v = dd_nrd_u64(&r);
            if (r.bad) return dd_error(DD_ERR_FORMAT, "repl-ack: item %u ('%s'): truncated version", i + 1, name);
            if (pass && fn) fn(user, name, v);
        }
        if (r.off != n) return dd_error(DD_ERR_FORMAT, "repl-ack: %zu trailing bytes after the %u items", n - r.off, cnt);
        if (!fn) break;
    }
    return DD_OK;
}

typedef struct {
    server *sv;
    int p;
} peer_ack;

/* One item of peer p's REPL_ACK: it holds block `name` at version v. */
static void on_ack_item(void *user, const char *name, uint64_t v) {
    const peer_ack *a = user;
    int bi = find_block(a->sv, name);
    if (bi < 0) return;
    block *b = &a->sv->b[bi];
    if (v + 1 > b->acked[a->p]) b->acked[a->p] = v + 1;
    if (b->sent[a->p] <= b->acked[a->p]) b->sent[a->p] = b->acked[a->p];
}

/* A message from peer server p's DEALER: REPL_ACK or PONG. */
static void on_peer(server *sv, int p) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, sv->peer[p], ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return;
    }
    dd_net_hdr h;
    const uint8_t *pl;
    if (zmq_msg_more(&m) || dd_net_parse(zmq_msg_data(&m), zmq_msg_size(&m), sv->max_msg, &h, &pl) != DD_OK) {
        dd_log(DD_LOG_WARN, "%s: refused a reply from server %s: %s", sv->who, sv->cl.servers[p].name,
               zmq_msg_more(&m) ? "more than one frame" : dd_last_error());
        zmq_msg_close(&m);
        return;
    }
    sv->last_heard[p] = dd_net_ms();
    if (!sv->alive[p]) {
        sv->alive[p] = 1;
        sv->epoch++;
        for (size_t i = 0; i < sv->nb; i++) sv->b[i].acked[p] = sv->b[i].sent[p] = 0; /* it may have restarted empty */
        sv->repl_dirty = 1;
        dd_log(DD_LOG_WARN, "%s: server %s answers again: replicating to it", sv->who, sv->cl.servers[p].name);
    }
    if (h.type == DD_MSG_REPL_ACK) {
        peer_ack pa = {sv, p};
        if (dd_ps_dec_repl_ack(pl, h.len, on_ack_item, &pa) != DD_OK)
            dd_log(DD_LOG_WARN, "%s: refused a reply from server %s: %s", sv->who, sv->cl.servers[p].name, dd_last_error());
        else
            sv->repl_dirty = 1;
    } else if (h.type == DD_MSG_ERR) {
        dd_log(DD_LOG_WARN, "%s: server %s refused a replication: %.*s", sv->who, sv->cl.servers[p].name, (int)h.len,
               (const char *)pl);
    } else if (h.type != DD_MSG_PONG) {
        dd_log(DD_LOG_WARN, "%s: refused a reply from server %s: a %s message answers no replication or ping", sv->who,
               sv->cl.servers[p].name, dd_msg_type_name(h.type));
    }
    zmq_msg_close(&m);
}

static void state_item(server *sv, dd_nbuf *o, block *b) {
    dd_nbuf_str(o, b->name);
    dd_nbuf_u64(o, b->version);
    dd_nbuf_u32(o, b->n);
    dd_nbuf_bytes(o, b->w, (size_t)b->n * 4);
    size_t sb = dd_optim_state_bytes(b->opt);
    dd_nbuf_u32(o, (uint32_t)sb);
    uint8_t *room = dd_nbuf_room(o, sb);
    if (room) dd_optim_state_save(b->opt, room, sb);
    (void)sv;
    dd_nbuf_u32(o, (uint32_t)b->ndd);
    for (size_t i = 0; i < b->ndd; i++) {
        dd_nbuf_u64(o, b->dd[i].client);
        dd_nbuf_u64(o, b->dd[i].seq);
    }
}

/* Sends each peer the newest state of the blocks it lags behind on (one REPL in flight
 * per block and peer; resent after resend_ms). */
static void replicate(server *sv, int64_t now) {
    int rs = sv->o->resend_ms > 0 ? sv->o->resend_ms : 200;
    for (size_t p = 0; p < sv->cl.n; p++) {
        if ((int)p == sv->self || !sv->alive[p]) continue;
        dd_nbuf o = {0};
        dd_nbuf_u32(&o, 0);
        uint32_t cnt = 0;
        for (size_t i = 0; i < sv->nb; i++) {
            block *b = &sv->b[i];
            if (!b->owner) continue;
            targets(sv, b);
            int is_t = 0;
            for (int t = 0; t < b->ntgt; t++) is_t |= b->tgt[t] == (int)p;
            if (!is_t || b->acked[p] >= b->version + 1) continue;
            /* a newer state than the last one sent goes out at once (a lost REPL is
             * superseded by the next); the newest is resent when unacknowledged */
            if (b->sent[p] >= b->version + 1 && now - b->sent_ms[p] < rs) continue;
            if (o.n > sv->max_msg / 2) break;                                        /* next round */
            state_item(sv, &o, b);
            b->sent[p] = b->version + 1;
            b->sent_ms[p] = now;
            cnt++;
        }
        if (cnt && !o.oom) {
            o.p[0] = (uint8_t)cnt;
            o.p[1] = (uint8_t)(cnt >> 8);
            o.p[2] = (uint8_t)(cnt >> 16);
            o.p[3] = (uint8_t)(cnt >> 24);
            dd_net_send(sv->peer[p], NULL, 0, DD_MSG_REPL, ++sv->pseq, DD_PS_SERVER_SENDER | (uint64_t)sv->self, o.p,
                        (uint32_t)o.n);
            sv->st.repl_sent++;
        }
        dd_nbuf_free(&o);
    }
}

static void heartbeat(server *sv, int64_t now) {
    int dead_ms = sv->o->dead_ms > 0 ? sv->o->dead_ms : 3000;
    for (size_t p = 0; p < sv->cl.n; p++) {
        if ((int)p == sv->self) continue;
        dd_net_send(sv->peer[p], NULL, 0, DD_MSG_PING, ++sv->pseq, DD_PS_SERVER_SENDER | (uint64_t)sv->self, NULL, 0);
        if (sv->alive[p] && now - sv->last_heard[p] > dead_ms) {
            sv->alive[p] = 0;
            sv->epoch++;
            sv->repl_dirty = 1;
            dd_log(DD_LOG_WARN, "%s: server %s (%s) silent for %d ms: dead; its blocks' copies go to the next servers",
                   sv->who, sv->cl.servers[p].name, sv->cl.servers[p].address, dead_ms);
        }
    }
}

/* Handshake failures (a client with a wrong server key) from the socket monitor. */
static void on_monitor(server *sv) {
    zmq_msg_t ev, ep;
    zmq_msg_init(&ev);
    zmq_msg_init(&ep);
    if (zmq_msg_recv(&ev, sv->mon, ZMQ_DONTWAIT) < 0 || zmq_msg_recv(&ep, sv->mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        zmq_msg_close(&ep);
        return;
    }
    if (zmq_msg_size(&ev) >= 6) {
        const uint8_t *d = zmq_msg_data(&ev);
        uint16_t e = (uint16_t)(d[0] | d[1] << 8);
        uint32_t val = (uint32_t)(d[2] | d[3] << 8 | d[4] << 16 | (uint32_t)d[5] << 24);
        if (e == ZMQ_EVENT_ACCEPTED) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            char host[64] = "?";
            if (getpeername((int)val, (struct sockaddr *)&ss, &sl) == 0) {
                if (ss.ss_family == AF_INET) {
                    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
                    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
                    snprintf(sv->last_peer, sizeof sv->last_peer, "%s:%u", host, ntohs(a->sin_port));
                } else if (ss.ss_family == AF_INET6) {
                    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
                    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
                    snprintf(sv->last_peer, sizeof sv->last_peer, "[%s]:%u", host, ntohs(a->sin6_port));
                }
            }
        } else if (e == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || e == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            sv->st.refused++;
            dd_log(DD_LOG_WARN,
                   "%s: refused a connection (latest accepted: %s): CURVE handshake failed (%s 0x%x; a client with a "
                   "wrong server public key, or not speaking CURVE)",
                   sv->who, sv->last_peer[0] ? sv->last_peer : "?",
                   e == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "protocol error" : "error", val);
        }
    }
    zmq_msg_close(&ev);
    zmq_msg_close(&ep);
}

static void cleanup(server *sv) {
    for (size_t i = 0; i < sv->npend; i++) {
        free(sv->pend[i].blk);
        free(sv->pend[i].need);
    }
    free(sv->pend);
    for (size_t i = 0; i < sv->nb; i++) block_free(&sv->b[i]);
    free(sv->b);
    dd_ps_map_free(&sv->map);
    free(sv->scratch);
    if (sv->peer)
        for (size_t p = 0; p < sv->cl.n; p++)
            if (sv->peer[p]) zmq_close(sv->peer[p]);
    free(sv->peer);
    if (sv->mon) zmq_close(sv->mon);
    if (sv->router) zmq_close(sv->router);
    dd_ps_ring_free(&sv->ring);
    dd_ps_cluster_free(&sv->cl);
}

dd_status dd_ps_server_run(const dd_ps_server_opts *o, dd_ps_server_stats *stats) {
    server *sv = calloc(1, sizeof *sv);
    if (!sv) return dd_error(DD_ERR_NOMEM, "server");
    sv->o = o;
    sv->self = -1;
    dd_net_zap *zap = NULL;
    dd_status s = DD_OK;
    char sec[41] = "", pub[41] = "";
    if (!o->insecure) {
        if (!o->key_path || !o->allow_path) {
            s = dd_error(DD_ERR_ARG, "a secure server needs a key file and an allow file");
            goto out;
        }
        if ((s = dd_net_key_read(o->key_path, 1, sec)) || (s = dd_net_key_public(sec, pub))) goto out;
    }
    if ((s = dd_ps_cluster_read(o->cluster_path, o->insecure, &sv->cl))) goto out;
    for (size_t i = 0; i < sv->cl.n; i++) {
        const dd_ps_server_info *si = &sv->cl.servers[i];
        if ((o->name && strcmp(si->name, o->name) == 0) || (!o->name && o->bind && strcmp(si->address, o->bind) == 0))
            sv->self = (int)i;
    }
    if (sv->self < 0) {
        s = o->name ? dd_error(DD_ERR_ARG, "%s: no server named '%s' in servers[]", o->cluster_path, o->name)
                    : dd_error(DD_ERR_ARG, "%s: no servers[].address is '%s' (give --name when binding another address)",
                               o->cluster_path, o->bind ? o->bind : "(none)");
        goto out;
    }
    const dd_ps_server_info *me = &sv->cl.servers[sv->self];
    if (!o->insecure && strcmp(me->public_key, pub) != 0) {
        s = dd_error(DD_ERR_MISMATCH, "%s: the public key of %s is not servers[%d].public_key of %s (%s)", o->key_path,
                     o->key_path, sv->self, o->cluster_path, me->name);
        goto out;
    }
    snprintf(sv->who, sizeof sv->who, "ps-server %s", me->name);
    sv->R = o->replicas >= 0 ? o->replicas : sv->cl.replicas;
    if (sv->R > (int)sv->cl.n - 1) {
        s = dd_error(DD_ERR_ARG, "--replicas %d needs at least %d servers; %s lists %zu", sv->R, sv->R + 1,
                     o->cluster_path, sv->cl.n);
        goto out;
    }
    sv->max_msg = o->max_msg ? o->max_msg : DD_NET_DEFAULT_MAX_MSG;
    const char **names = malloc(sv->cl.n * sizeof *names);
    if (!names) {
        s = dd_error(DD_ERR_NOMEM, "server");
        goto out;
    }
    for (size_t i = 0; i < sv->cl.n; i++) names[i] = sv->cl.servers[i].name;
    s = dd_ps_ring_create(names, sv->cl.n, sv->cl.vnodes, &sv->ring);
    free(names);
    if (s) goto out;
    sv->ctx = zmq_ctx_new();
    if (!sv->ctx) {
        s = dd_error(DD_ERR_COMM, "zmq_ctx_new: %s", zmq_strerror(errno));
        goto out;
    }
    if (!o->insecure) {
        dd_net_allow *allow = NULL;
        if ((s = dd_net_allow_load(o->allow_path, &allow))) goto out;
        for (size_t i = 0; i < sv->cl.n && !s; i++) {
            char label[80];
            snprintf(label, sizeof label, "server:%s", sv->cl.servers[i].name);
            s = dd_net_allow_add(allow, sv->cl.servers[i].public_key, label);
        }
        if (s || (s = dd_net_zap_start(sv->ctx, allow, o->allow_path, sv->who, &zap))) {
            if (!zap) dd_net_allow_free(&allow);
            goto out;
        }
    }
    if ((s = dd_net_router(sv->ctx, o->bind ? o->bind : me->address, o->insecure ? NULL : sec,
                           2 * (int64_t)sv->max_msg + DD_NET_HEADER, &sv->router)))
        goto out;
    if (zmq_socket_monitor(sv->router, "inproc://ps-monitor",
                           ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) == 0) {
        sv->mon = zmq_socket(sv->ctx, ZMQ_PAIR);
        if (sv->mon && zmq_connect(sv->mon, "inproc://ps-monitor") != 0) {
            zmq_close(sv->mon);
            sv->mon = NULL;
        }
    }
    sv->peer = calloc(sv->cl.n, sizeof *sv->peer);
    if (!sv->peer) {
        s = dd_error(DD_ERR_NOMEM, "server");
        goto out;
    }
    int64_t t0 = dd_net_ms();
    for (size_t p = 0; p < sv->cl.n; p++) {
        sv->alive[p] = 1;
        sv->last_heard[p] = t0;
        if ((int)p == sv->self) continue;
        const dd_ps_server_info *si = &sv->cl.servers[p];
        if ((s = dd_net_dealer(sv->ctx, si->address, o->insecure ? NULL : sec, o->insecure ? NULL : pub,
                               o->insecure ? NULL : si->public_key, &sv->peer[p])))
            goto out;
    }
    sv->epoch = 1;
    dd_log(DD_LOG_INFO, "%s: serving on %s (%zu servers, %d replicas, optimiser %s)", sv->who,
           o->bind ? o->bind : me->address, sv->cl.n, sv->R, dd_optim_kind_name(sv->cl.optim));
    double ts = dd_now();
    int64_t next_hb = t0;
    zmq_pollitem_t items[DD_PS_MAX_SERVERS + 2];
    while (!o->stop || !*o->stop) {
        int ni = 0;
        items[ni++] = (zmq_pollitem_t){sv->router, 0, ZMQ_POLLIN, 0};
        if (sv->mon) items[ni++] = (zmq_pollitem_t){sv->mon, 0, ZMQ_POLLIN, 0};
        int base = ni;
        for (size_t p = 0; p < sv->cl.n; p++)
            if (sv->peer[p]) items[ni++] = (zmq_pollitem_t){sv->peer[p], 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(items, ni, sv->npend || sv->repl_dirty ? 5 : 50);
        if (rc < 0 && errno != EINTR) {
            s = dd_error(DD_ERR_COMM, "zmq_poll: %s", zmq_strerror(errno));
            break;
        }
        if (rc > 0) {
            if (items[0].revents & ZMQ_POLLIN)
                for (int k = 0; k < 256; k++) {
                    int ev = 0;
                    size_t el = sizeof ev;
                    zmq_getsockopt(sv->router, ZMQ_EVENTS, &ev, &el);
                    if (!(ev & ZMQ_POLLIN)) break;
                    on_router(sv);
                }
            if (sv->mon && (items[1].revents & ZMQ_POLLIN)) on_monitor(sv);
            int k = base;
            for (size_t p = 0; p < sv->cl.n; p++) {
                if (!sv->peer[p]) continue;
                if (items[k++].revents & ZMQ_POLLIN)
                    for (int j = 0; j < 256; j++) {
                        int ev = 0;
                        size_t el = sizeof ev;
                        zmq_getsockopt(sv->peer[p], ZMQ_EVENTS, &ev, &el);
                        if (!(ev & ZMQ_POLLIN)) break;
                        on_peer(sv, (int)p);
                    }
            }
        }
        int64_t now = dd_net_ms();
        if (now >= next_hb) {
            heartbeat(sv, now);
            next_hb = now + DD_NET_HEARTBEAT_IVL;
            sv->repl_dirty = 1; /* resends */
        }
        if (sv->repl_dirty || sv->npend) {
            sv->repl_dirty = 0;
            replicate(sv, now);
            flush_pending(sv);
        }
    }
    sv->st.seconds = dd_now() - ts;
    if (stats) *stats = sv->st;
    dd_log(DD_LOG_INFO, "%s: stopped: %llu pushes applied, %llu duplicates, %llu pulls, %llu refused, %llu blocks",
           sv->who, (unsigned long long)sv->st.pushes, (unsigned long long)sv->st.duplicates,
           (unsigned long long)sv->st.pulls, (unsigned long long)sv->st.refused, (unsigned long long)sv->st.blocks);
out:
    if (sv->mon) {
        zmq_socket_monitor(sv->router, NULL, 0);
    }
    {
        dd_status keep = s;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", dd_last_error());
        cleanup(sv);
        dd_net_zap_stop(&zap);
        if (sv->ctx) zmq_ctx_term(sv->ctx);
        memset(sec, 0, sizeof sec);
        free(sv);
        if (keep) return dd_error(keep, "%s", msg);
        return DD_OK;
    }
}
