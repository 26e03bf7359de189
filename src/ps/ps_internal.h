/* Shared helpers of the parameter server and its client: a name -> index hash map and
 * the payload layouts (docs/ps.md, "Payloads"). */
#ifndef DD_PS_INTERNAL_H
#define DD_PS_INTERNAL_H

#include <stdlib.h>
#include <string.h>

#include "distdpd/ps.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the parameter server sends floats in little-endian byte order: port dd_nbuf/dd_nrd floats first"
#endif

#define DD_PS_SERVER_SENDER 0xFFFF000000000000ull /* | server index: servers' sender ids */

/* Open-addressing map from names (owned by the caller, stable) to indices. */
typedef struct {
    int *slot; /* -1 empty, else index */
    size_t cap; /* power of two */
    size_t n;
} dd_ps_map;

static inline void dd_ps_map_free(dd_ps_map *m) {
    free(m->slot);
    memset(m, 0, sizeof *m);
}

/* Finds name; names(i) gives the name of index i. Returns the index or -1. */
#define DD_PS_MAP_FIND(m, key, NAME_OF, out)                                         \
    do {                                                                             \
        (out) = -1;                                                                  \
        if ((m)->cap) {                                                              \
            size_t h_ = (size_t)dd_ps_hash(key) & ((m)->cap - 1);                    \
            while ((m)->slot[h_] >= 0) {                                             \
                if (strcmp(NAME_OF((m)->slot[h_]), (key)) == 0) {                    \
                    (out) = (m)->slot[h_];                                           \
                    break;                                                           \
                }                                                                    \
                h_ = (h_ + 1) & ((m)->cap - 1);                                      \
            }                                                                        \
        }                                                                            \
    } while (0)

/* Inserts index idx under key (not present). Returns 0, or -1 on allocation failure. */
#define DD_PS_MAP_INSERT(m, key, idx, NAME_OF, rc)                                   \
    do {                                                                             \
        (rc) = 0;                                                                    \
        if (((m)->n + 1) * 2 > (m)->cap) {                                           \
            size_t nc_ = (m)->cap ? (m)->cap * 2 : 64;                               \
            int *ns_ = malloc(nc_ * sizeof *ns_);                                    \
            if (!ns_) {                                                              \
                (rc) = -1;                                                           \
                break;                                                               \
            }                                                                        \
            for (size_t i_ = 0; i_ < nc_; i_++) ns_[i_] = -1;                        \
            for (size_t i_ = 0; i_ < (m)->cap; i_++) {                               \
                int v_ = (m)->slot[i_];                                              \
                if (v_ < 0) continue;                                                \
                size_t h_ = (size_t)dd_ps_hash(NAME_OF(v_)) & (nc_ - 1);             \
                while (ns_[h_] >= 0) h_ = (h_ + 1) & (nc_ - 1);                      \
                ns_[h_] = v_;                                                        \
            }                                                                        \
            free((m)->slot);                                                         \
            (m)->slot = ns_;                                                         \
            (m)->cap = nc_;                                                          \
        }                                                                            \
        size_t h_ = (size_t)dd_ps_hash(key) & ((m)->cap - 1);                        \
        while ((m)->slot[h_] >= 0) h_ = (h_ + 1) & ((m)->cap - 1);                   \
        (m)->slot[h_] = (idx);                                                       \
        (m)->n++;                                                                    \
    } while (0)

/* REPL_ACK, a replica's answer to a REPL (on_repl in server.c writes it, the primary's
 * on_peer reads it): u32 count, then per item the block's name (u16 length + 1..95
 * printable bytes, dd_nbuf_str) and the u64 version the replica holds. Validates the whole
 * payload first: a malformed one is refused (DD_ERR_FORMAT, "repl-ack: item 2: ...")
 * before fn sees any item; then fn(user, name, version) for each item, in order. fn may
 * be NULL (validation only). Pure: no socket, no state (fuzz_ps_peer, test_ps_msg). */
dd_status dd_ps_dec_repl_ack(const uint8_t *p, size_t n, void (*fn)(void *user, const char *name, uint64_t version),
                             void *user);

#endif
