/* Secure aggregation (Bonawitz et al., "Practical Secure Aggregation for Privacy-Preserving
 * Machine Learning", CCS'17; semi-honest server, clients may drop out at any point): the
 * coordinator learns the sum of the clients' update vectors and nothing else about any
 * one of them (docs/federated.md "Secure aggregation"). Transport-independent: every
 * message is a byte string made and checked here; fed-server / fed-client carry them.
 *
 * Crypto (libsodium): per client two X25519 key pairs, (c_pk, c_sk) to encrypt the shares
 * client to client (crypto_box: X25519 + XSalsa20-Poly1305, routed through the server,
 * which cannot read them) and (s_pk, s_sk) for the pairwise masks; the pairwise mask of u
 * and v is ChaCha20 (crypto_stream_chacha20) keyed by BLAKE2b(X25519(s_sk_u, s_pk_v),
 * session, the two public keys), added by the lower id and subtracted by the higher; the
 * self mask is ChaCha20 keyed by a random 32-byte seed b_u. s_sk_u and b_u are Shamir
 * shared t-of-n over GF(2^8), byte by byte, at x = client id (so ids are 1..255).
 * Updates are fixed-point in Z_2^bits (bits = 32 or 64): x -> round(x * 2^k), with k
 * the largest integer such that n * (range * 2^k + 1) < 2^(bits-1), so that the sum of
 * up to n values |x| <= range cannot wrap (k < 0 is refused); the sum is exact up to the
 * rounding of each client's values, at most n / 2^(k+1) per coordinate.
 *
 * Rounds and call sequence (the server's message to a client is the input of that
 * client's next call; every call either succeeds and advances the state, or fails with
 * a message naming the client and the field and leaves the state as it was):
 *
 *   client u                                 server (coordinator), invited ids[0..n)
 *   --------                                 ---------------------------------------
 *   dd_secagg_client_new(cfg, u)             dd_secagg_server_new(cfg, n, ids)
 *   0 AdvertiseKeys
 *   dd_secagg_client_advertise -> ADVERTISE  -> dd_secagg_server_receive(from u)   [U1]
 *                                            dd_secagg_server_close  (|U1| >= t)
 *   1 ShareKeys                              <- dd_secagg_server_message(to u): KEYS
 *   dd_secagg_client_share_keys(KEYS)
 *                            -> SHARES       -> dd_secagg_server_receive           [U2]
 *                                            dd_secagg_server_close  (|U2| >= t)
 *   2 MaskedInput                            <- dd_secagg_server_message: ROUTED (the
 *   dd_secagg_client_masked_input(ROUTED, x)    shares of U2 encrypted for u)
 *                            -> MASKED       -> dd_secagg_server_receive           [U3]
 *                                            dd_secagg_server_close  (|U3| >= t)
 *   3 Unmasking                              <- dd_secagg_server_message: SURVIVORS
 *   dd_secagg_client_unmask(SURVIVORS)
 *                            -> UNMASK       -> dd_secagg_server_receive           [U4]
 *                                            dd_secagg_server_close  (|U4| >= t):
 *                                            reconstructs b_v (v in U3) and s_sk_v
 *                                            (v in U2 \ U3), removes the masks
 *                                            dd_secagg_server_result -> sum over U3
 *
 * A client that does not answer in a round is left out of the next ones (the server
 * closes a round when the caller decides, e.g. at a timeout; close refuses while fewer
 * than t have answered). A survivor reveals, for every v in U2, either the share of b_v
 * (v in U3) or that of s_sk_v (v dropped), never both. Messages of one session carry its
 * 64-bit session id: a message of another session, of the wrong round, from an id not
 * invited or not in the current set, a second message from one client, a sender field
 * that is not the authenticated peer (`from`), a wrong length or a failed decryption are
 * refused (DD_ERR_FORMAT or DD_ERR_ARG naming the client id and the field).
 *
 * Messages: 20-byte header "DDSA", version 1, type, 2 zero bytes, session (u64 LE),
 * sender id (u32 LE; 0 = the server), then the body of the type (src/fed/secagg.c). */
#ifndef DISTDPD_SECAGG_H
#define DISTDPD_SECAGG_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DD_SECAGG_MAX_ID 255 /* client ids are 1..255 (the Shamir x coordinate) */

typedef struct {
    uint64_t session; /* distinct per aggregation (e.g. the federated round); in every message */
    size_t d;         /* floats per update (>= 1) */
    int n;            /* clients invited (2..255): bounds the number of summands */
    int threshold;    /* t: shares needed, and the fewest clients any round may close with;
                         0 = floor(2n/3) + 1; must be in (n/2, n] */
    int ring_bits;    /* 32 or 64 (0 = 32): the ring Z_2^bits of the masked values */
    double range;     /* every coordinate must satisfy |x_j| <= range (> 0, finite) */
    uint64_t test_seed; /* 0: keys and seeds from randombytes_buf (always, outside tests);
                           non-zero: derived from it (reproducible tests and fuzzing only) */
} dd_secagg_cfg;

/* Fills threshold and ring_bits when 0 and checks cfg (DD_ERR_ARG naming the field).
 * *scale_log2 (may be NULL) gets k, the fixed-point scale 2^k. */
dd_status dd_secagg_resolve(dd_secagg_cfg *cfg, int *scale_log2);

typedef enum {
    DD_SECAGG_ADVERTISE = 0, /* client: keys not yet sent; server: collecting ADVERTISE */
    DD_SECAGG_SHARE = 1,     /* client: waits for KEYS; server: collecting SHARES */
    DD_SECAGG_MASKED = 2,    /* client: waits for ROUTED; server: collecting MASKED */
    DD_SECAGG_UNMASK = 3,    /* client: waits for SURVIVORS; server: collecting UNMASK */
    DD_SECAGG_DONE = 4       /* client: finished; server: the sum is available */
} dd_secagg_state;
const char *dd_secagg_state_name(dd_secagg_state s);

/* ---- client (one per client per aggregation) ---- */
typedef struct dd_secagg_client dd_secagg_client;

/* id in 1..DD_SECAGG_MAX_ID. Errors: those of dd_secagg_resolve, DD_ERR_ARG, DD_ERR_NOMEM. */
dd_status dd_secagg_client_new(const dd_secagg_cfg *cfg, uint32_t id, dd_secagg_client **out);
void dd_secagg_client_free(dd_secagg_client *c);
dd_secagg_state dd_secagg_client_state(const dd_secagg_client *c);

/* Each call makes the client's next message in *out (malloc'd, the caller free()s it)
 * of *out_len bytes. `in` is the server's message for this client of the round. */
dd_status dd_secagg_client_advertise(dd_secagg_client *c, uint8_t **out, size_t *out_len);
dd_status dd_secagg_client_share_keys(dd_secagg_client *c, const uint8_t *in, size_t in_len, uint8_t **out,
                                      size_t *out_len);
/* x: cfg.d floats with |x_j| <= range (DD_ERR_RANGE naming the coordinate otherwise). */
dd_status dd_secagg_client_masked_input(dd_secagg_client *c, const uint8_t *in, size_t in_len, const float *x,
                                        uint8_t **out, size_t *out_len);
dd_status dd_secagg_client_unmask(dd_secagg_client *c, const uint8_t *in, size_t in_len, uint8_t **out,
                                  size_t *out_len);

/* The call of the current round (advertise: `in` ignored and may be NULL; share_keys;
 * masked_input with x; unmask); DD_ERR_ARG once the client is DONE. A transport can feed
 * every server message here without looking at its type. */
dd_status dd_secagg_client_next(dd_secagg_client *c, const uint8_t *in, size_t in_len, const float *x, uint8_t **out,
                                size_t *out_len);

/* ---- server (the coordinator; one per aggregation) ---- */
typedef struct dd_secagg_server dd_secagg_server;

/* ids: the n = cfg.n invited client ids (distinct, 1..DD_SECAGG_MAX_ID). */
dd_status dd_secagg_server_new(const dd_secagg_cfg *cfg, const uint32_t *ids, dd_secagg_server **out);
void dd_secagg_server_free(dd_secagg_server *s);
dd_secagg_state dd_secagg_server_state(const dd_secagg_server *s);

/* A client's message of the current round; `from` is the id the transport authenticated
 * (it must equal the message's sender field). On error nothing changes. */
dd_status dd_secagg_server_receive(dd_secagg_server *s, uint32_t from, const uint8_t *msg, size_t len);

/* Ends the current round with the clients that answered (DD_ERR_ARG "secure aggregation:
 * 3 clients answered in round ShareKeys, the threshold is 4" when fewer than t, state
 * unchanged). After UNMASK it reconstructs and unmasks the sum (DD_ERR_FORMAT naming the
 * client whose shares do not reconstruct its advertised key). */
dd_status dd_secagg_server_close(dd_secagg_server *s);

/* The clients of the current set (those that answered the last closed round; before the
 * first close: the invited ones; in state DONE: U3, the clients whose updates are in the
 * sum), in increasing order; returns their count (at most cap ids are written). */
int dd_secagg_server_members(const dd_secagg_server *s, uint32_t *ids, int cap);

/* After a close: the message for client `to` (a member) for the round now open: KEYS,
 * ROUTED or SURVIVORS; *out malloc'd, the caller free()s it. */
dd_status dd_secagg_server_message(const dd_secagg_server *s, uint32_t to, uint8_t **out, size_t *out_len);

/* In state DONE: the sum over U3 (the clients whose masked input was received) of their
 * updates, decoded to cfg.d floats; *n_summed (may be NULL) = |U3|. */
dd_status dd_secagg_server_result(const dd_secagg_server *s, float *sum, int *n_summed);

#ifdef __cplusplus
}
#endif
#endif
