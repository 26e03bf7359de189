/* Receiving one validated message from a ROUTER or DEALER socket (net.h): the routing id,
 * the peer's label and address, strict parsing. Shared by the federated coordinator and
 * benches. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "distdpd/net.h"

void dd_net_msg_free(dd_net_msg *m) {
    if (!m) return;
    free(m->frame);
    m->frame = NULL;
    m->n = 0;
    m->payload = NULL;
}

int dd_net_recv(void *sock, int router, long wait_ms, uint32_t max_payload, dd_net_msg *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->peer, sizeof m->peer, "?");
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    int rc = zmq_poll(&it, 1, wait_ms);
    if (rc < 0 && errno != EINTR) {
        dd_error(DD_ERR_COMM, "zmq_poll: %s", zmq_strerror(errno));
        return -1;
    }
    if (rc <= 0) return 0;
    zmq_msg_t f;
    zmq_msg_init(&f);
    if (zmq_msg_recv(&f, sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&f);
        return 0;
    }
    int more = zmq_msg_more(&f);
    if (router) {
        size_t k = zmq_msg_size(&f);
        m->rid_n = k < sizeof m->rid ? k : sizeof m->rid;
        memcpy(m->rid, zmq_msg_data(&f), m->rid_n);
        zmq_msg_close(&f);
        zmq_msg_init(&f);
        if (!more) {
            snprintf(m->err, sizeof m->err, "empty message");
            zmq_msg_close(&f);
            return 1;
        }
        zmq_msg_recv(&f, sock, 0);
        more = zmq_msg_more(&f);
    }
    const char *addr = zmq_msg_gets(&f, "Peer-Address"), *uid = zmq_msg_gets(&f, "User-Id");
    snprintf(m->peer, sizeof m->peer, "%s%s%s", uid ? uid : "", uid ? "@" : "", addr ? addr : "?");
    m->n = zmq_msg_size(&f);
    m->frame = malloc(m->n ? m->n : 1);
    if (m->frame) memcpy(m->frame, zmq_msg_data(&f), m->n);
    zmq_msg_close(&f);
    int extra = 0;
    while (more) { /* more frames than one: read and drop them */
        zmq_msg_t x;
        zmq_msg_init(&x);
        zmq_msg_recv(&x, sock, 0);
        more = zmq_msg_more(&x);
        zmq_msg_close(&x);
        extra = 1;
    }
    if (!m->frame) snprintf(m->err, sizeof m->err, "out of memory receiving %zu bytes", m->n);
    else if (extra) snprintf(m->err, sizeof m->err, "more than one frame");
    else if (dd_net_parse(m->frame, m->n, max_payload, &m->h, &m->payload) != DD_OK)
        snprintf(m->err, sizeof m->err, "%s", dd_last_error());
    else m->ok = 1;
    return 1;
}
