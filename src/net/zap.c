/* The ZAP handler (ZeroMQ RFC 27) that admits only enrolled CURVE keys, and the socket
 * set-up of the parameter-server transport. net.h. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "distdpd/net.h"

int dd_net_allow_find_(const dd_net_allow *a, const char *z85, const char **label);

struct dd_net_zap {
    void *sock;
    dd_net_allow *allow;
    char path[512];
    char who[128];
    pthread_t th;
    atomic_int stop;
    atomic_uint_fast64_t admitted, refused;
};

/* Receives one frame into buf (truncated to cap-1, NUL-terminated); returns its size. */
static int recv_frame(void *s, char *buf, size_t cap, int *more) {
    int n = zmq_recv(s, buf, cap - 1, 0);
    if (n < 0) return -1;
    size_t k = (size_t)n < cap - 1 ? (size_t)n : cap - 1;
    buf[k] = 0;
    int m = 0;
    size_t ml = sizeof m;
    zmq_getsockopt(s, ZMQ_RCVMORE, &m, &ml);
    *more = m;
    return n;
}

static void *zap_main(void *arg) {
    dd_net_zap *z = arg;
    while (!atomic_load(&z->stop)) {
        zmq_pollitem_t it = {z->sock, 0, ZMQ_POLLIN, 0};
        int r = zmq_poll(&it, 1, 100);
        if (r <= 0) continue;
        char fr[8][256];
        int lens[8] = {0}, nf = 0, more = 1;
        while (more && nf < 8) {
            lens[nf] = recv_frame(z->sock, fr[nf], sizeof fr[nf], &more);
            if (lens[nf] < 0) break;
            nf++;
        }
        while (more) { /* drain unexpected extra frames */
            char junk[256];
            if (recv_frame(z->sock, junk, sizeof junk, &more) < 0) break;
        }
        if (nf < 6) continue; /* malformed ZAP request from libzmq: cannot reply sensibly */
        const char *mech = fr[5], *addr = fr[3];
        const char *status = "400", *text = "not allowed", *user = "";
        char z85[41] = "";
        if (strcmp(mech, "CURVE") == 0 && nf >= 7 && lens[6] == 32) {
            zmq_z85_encode(z85, (const uint8_t *)fr[6], 32);
            const char *label = NULL;
            if (dd_net_allow_find_(z->allow, z85, &label) >= 0) {
                status = "200";
                text = "OK";
                user = label;
                atomic_fetch_add(&z->admitted, 1);
            } else {
                atomic_fetch_add(&z->refused, 1);
                dd_log(DD_LOG_WARN, "%s: refused CURVE client %s key %s: not in the allow file %s", z->who,
                       addr, z85, z->path);
            }
        } else {
            atomic_fetch_add(&z->refused, 1);
            dd_log(DD_LOG_WARN, "%s: refused client %s: mechanism %s (only CURVE is accepted)", z->who, addr, mech);
        }
        zmq_send(z->sock, "1.0", 3, ZMQ_SNDMORE);
        zmq_send(z->sock, fr[1], (size_t)lens[1] < sizeof fr[1] ? (size_t)lens[1] : sizeof fr[1] - 1, ZMQ_SNDMORE);
        zmq_send(z->sock, status, 3, ZMQ_SNDMORE);
        zmq_send(z->sock, text, strlen(text), ZMQ_SNDMORE);
        zmq_send(z->sock, user, strlen(user), ZMQ_SNDMORE);
        zmq_send(z->sock, "", 0, 0);
    }
    return NULL;
}

dd_status dd_net_zap_start(void *ctx, dd_net_allow *allow, const char *allow_path, const char *who,
                           dd_net_zap **out) {
    *out = NULL;
    dd_net_zap *z = calloc(1, sizeof *z);
    if (!z) {
        dd_net_allow_free(&allow);
        return dd_error(DD_ERR_NOMEM, "ZAP handler");
    }
    z->allow = allow;
    snprintf(z->path, sizeof z->path, "%s", allow_path ? allow_path : "(none)");
    snprintf(z->who, sizeof z->who, "%s", who ? who : "zap");
    z->sock = zmq_socket(ctx, ZMQ_REP);
    int linger = 0;
    if (!z->sock || zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_bind(z->sock, "inproc://zeromq.zap.01") != 0) {
        dd_status s = dd_error(DD_ERR_COMM, "ZAP handler: cannot bind inproc://zeromq.zap.01: %s", zmq_strerror(errno));
        if (z->sock) zmq_close(z->sock);
        dd_net_allow_free(&z->allow);
        free(z);
        return s;
    }
    if (pthread_create(&z->th, NULL, zap_main, z) != 0) {
        zmq_close(z->sock);
        dd_net_allow_free(&z->allow);
        free(z);
        return dd_error(DD_ERR_NOMEM, "ZAP handler: cannot start its thread");
    }
    *out = z;
    return DD_OK;
}

void dd_net_zap_counts(const dd_net_zap *z, uint64_t *admitted, uint64_t *refused) {
    if (admitted) *admitted = z ? atomic_load(&((dd_net_zap *)z)->admitted) : 0;
    if (refused) *refused = z ? atomic_load(&((dd_net_zap *)z)->refused) : 0;
}

void dd_net_zap_stop(dd_net_zap **pz) {
    if (!pz || !*pz) return;
    dd_net_zap *z = *pz;
    atomic_store(&z->stop, 1);
    pthread_join(z->th, NULL);
    zmq_close(z->sock);
    dd_net_allow_free(&z->allow);
    free(z);
    *pz = NULL;
}

/* ---- sockets ---- */
static int common_opts(void *s) {
    int linger = 0, ivl = DD_NET_HEARTBEAT_IVL, to = DD_NET_HEARTBEAT_TIMEOUT, ttl = DD_NET_HEARTBEAT_TIMEOUT,
        hs = 5000;
    return zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) | zmq_setsockopt(s, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl) |
           zmq_setsockopt(s, ZMQ_HEARTBEAT_TIMEOUT, &to, sizeof to) | zmq_setsockopt(s, ZMQ_HEARTBEAT_TTL, &ttl, sizeof ttl) |
           zmq_setsockopt(s, ZMQ_HANDSHAKE_IVL, &hs, sizeof hs);
}

dd_status dd_net_router(void *ctx, const char *endpoint, const char *secret_z85, int64_t max_msg, void **out) {
    *out = NULL;
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    if (!s) return dd_error(DD_ERR_COMM, "zmq_socket: %s", zmq_strerror(errno));
    int rc = common_opts(s);
    rc |= zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_msg, sizeof max_msg);
    if (secret_z85) {
        int one = 1;
        rc |= zmq_setsockopt(s, ZMQ_CURVE_SERVER, &one, sizeof one);
        rc |= zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, secret_z85, 41);
        rc |= zmq_setsockopt(s, ZMQ_ZAP_DOMAIN, "distdpd", 7);
    }
    if (rc) {
        zmq_close(s);
        return dd_error(DD_ERR_COMM, "socket options: %s", zmq_strerror(errno));
    }
    if (zmq_bind(s, endpoint) != 0) {
        dd_status st = dd_error(DD_ERR_COMM, "cannot bind %s: %s", endpoint, zmq_strerror(errno));
        zmq_close(s);
        return st;
    }
    *out = s;
    return DD_OK;
}

dd_status dd_net_dealer(void *ctx, const char *endpoint, const char *secret_z85, const char *public_z85,
                        const char *server_z85, void **out) {
    *out = NULL;
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    if (!s) return dd_error(DD_ERR_COMM, "zmq_socket: %s", zmq_strerror(errno));
    int rc = common_opts(s);
    int rivl = 100, rmax = 1000;
    rc |= zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &rivl, sizeof rivl);
    rc |= zmq_setsockopt(s, ZMQ_RECONNECT_IVL_MAX, &rmax, sizeof rmax);
    if (server_z85) {
        rc |= zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_z85, 41);
        rc |= zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, public_z85, 41);
        rc |= zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, secret_z85, 41);
    }
    if (rc) {
        zmq_close(s);
        return dd_error(DD_ERR_COMM, "socket options: %s", zmq_strerror(errno));
    }
    if (zmq_connect(s, endpoint) != 0) {
        dd_status st = dd_error(DD_ERR_COMM, "cannot connect to %s: %s", endpoint, zmq_strerror(errno));
        zmq_close(s);
        return st;
    }
    *out = s;
    return DD_OK;
}
