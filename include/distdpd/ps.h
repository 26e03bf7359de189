/* Sharded parameter server (docs/ps.md): blocks of parameters on a consistent-hash ring
 * with virtual nodes, servers that apply pushed gradients with the optimiser and keep a
 * version clock per block, primary-backup replication, and a client library with
 * resends, deduplication and failover. Transport: net.h (ZeroMQ + CURVE).
 * This module never includes mpi.h. */
#ifndef DISTDPD_PS_H
#define DISTDPD_PS_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"
#include "distdpd/net.h"
#include "distdpd/optim.h"
#include "distdpd/param.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DD_PS_NAME_MAX 96       /* block names: 1..95 printable ASCII characters */
#define DD_PS_MAX_SERVERS 256
#define DD_PS_DEFAULT_VNODES 128
#define DD_PS_DEFAULT_BLOCK 65536 /* floats per block before a large entry is split */

/* ---- blocks ---- */
/* One block: floats [offset, offset + len) of a model's flat arena. */
typedef struct {
    char name[DD_PS_NAME_MAX]; /* "ENTRY" or "ENTRY#PART" for the parts of a split entry */
    size_t offset, len;
} dd_ps_block;

/* Cuts a parameter table into blocks: one per entry, entries longer than block_floats
 * (>= 1) split into parts of block_floats (the last may be shorter), named ENTRY#0,
 * ENTRY#1, ... Padding between entries belongs to no block. *out (free()) gets *n
 * blocks in table order. Errors: DD_ERR_ARG (empty table, block_floats 0, an entry name
 * too long), DD_ERR_NOMEM. */
dd_status dd_ps_blocks_from_table(const dd_param_table *t, size_t block_floats, dd_ps_block **out,
                                  size_t *n);

/* ---- consistent-hash ring ---- */
typedef struct dd_ps_ring dd_ps_ring;
/* A ring of n servers (names unique, e.g. the cluster file's names), each at `vnodes`
 * points (virtual nodes) hash("NAME#v"). The hash is a fixed 64-bit function (FNV-1a
 * then a splitmix64 finaliser), so placement is identical in every process and build.
 * Errors: DD_ERR_ARG (n 0 or above DD_PS_MAX_SERVERS, vnodes 0, duplicate names). */
dd_status dd_ps_ring_create(const char *const *names, size_t n, int vnodes, dd_ps_ring **out);
void dd_ps_ring_free(dd_ps_ring **r);
/* The preference list of a block: the first k distinct servers clockwise from
 * hash(block name), skipping servers whose alive[i] is 0 (alive NULL: all alive), into
 * out[0..k). Returns how many were found (< k when fewer servers are alive). out[0] is
 * the primary, the next R the replicas. */
int dd_ps_ring_place(const dd_ps_ring *r, const char *block, const unsigned char *alive, int *out, int k);
/* The 64-bit hash the ring uses. */
uint64_t dd_ps_hash(const char *s);

/* ---- cluster file ---- */
typedef struct {
    char name[64];
    char address[256];                   /* tcp://HOST:PORT */
    char public_key[DD_NET_KEY_Z85 + 1]; /* "" when insecure and absent */
} dd_ps_server_info;

typedef struct {
    dd_ps_server_info *servers;
    size_t n;
    int vnodes;          /* "vnodes", default DD_PS_DEFAULT_VNODES */
    int replicas;        /* "replicas", default 1 (0 = none) */
    dd_optim_kind optim; /* "optimizer": {"kind": ..., hyper-parameters} */
    dd_optim_cfg optim_cfg;
    char coord_address[256]; /* "coordinator": {"address", "public_key"}: the training
                                coordinator (phase 2); "" when absent */
    char coord_key[DD_NET_KEY_Z85 + 1];
} dd_ps_cluster;

/* Reads a cluster file (JSON; format in docs/ps.md). Refusals name the file and the
 * field ("cluster.json: servers[1].public_key: expected a 40-character Z85 key").
 * insecure: public keys may be absent. Errors: DD_ERR_IO, DD_ERR_FORMAT, DD_ERR_ARG. */
dd_status dd_ps_cluster_read(const char *path, int insecure, dd_ps_cluster *c);
void dd_ps_cluster_free(dd_ps_cluster *c);

/* ---- server ---- */
typedef struct {
    const char *cluster_path;
    const char *bind;       /* endpoint to bind (default: this server's cluster address) */
    const char *name;       /* this server's cluster name (default: the entry whose address is bind) */
    const char *key_path;   /* secret key file (NULL with insecure) */
    const char *allow_path; /* allow file (NULL with insecure) */
    int insecure;
    int replicas;         /* -1: the cluster file's */
    uint32_t max_msg;     /* payload limit; 0: DD_NET_DEFAULT_MAX_MSG */
    int resend_ms;        /* replication resend interval (default 200) */
    int dead_ms;          /* a peer silent this long is dead (default 3000) */
    volatile int *stop;   /* set non-zero (e.g. from a signal handler) to stop */
} dd_ps_server_opts;

typedef struct {
    uint64_t pushes;      /* push items applied */
    uint64_t duplicates;  /* push items recognised as resends (not applied again) */
    uint64_t staged;      /* stage items held back until their apply (two-phase pushes) */
    uint64_t pulls;
    uint64_t refused;     /* messages refused (malformed, unknown block, ...) */
    uint64_t repl_sent, repl_applied;
    uint64_t blocks;      /* blocks held (primary or replica) */
    double seconds;
} dd_ps_server_stats;

/* Runs one server until *opts->stop becomes non-zero. Logs (dd_log) refusals and peer
 * deaths; returns DD_OK after a stop. Errors: set-up failures (files, bind). */
dd_status dd_ps_server_run(const dd_ps_server_opts *opts, dd_ps_server_stats *stats);

/* ---- client ---- */
typedef struct {
    const char *key_path; /* this client's secret key file (NULL with insecure) */
    int insecure;
    int resend_ms;        /* first resend after this (default 100), doubling up to 1 s */
    int dead_ms;          /* a server silent this long is dead: fail over (default 3000) */
    uint64_t id;          /* sender id; 0: random */
} dd_ps_client_opts;

typedef struct {
    uint64_t requests, resends, failovers, errors;
    int servers_dead;
    uint64_t messages_sent;  /* messages sent to servers (requests, resends, pings) */
    uint64_t bytes_sent;     /* their bytes, 32-byte headers included */
    uint64_t bytes_received; /* bytes of the messages received from servers */
} dd_ps_client_stats;

typedef struct dd_ps_client dd_ps_client;
/* Connects to every server of the cluster file (nothing is sent yet). */
dd_status dd_ps_client_open(const char *cluster_path, const dd_ps_client_opts *o, dd_ps_client **out);
void dd_ps_client_close(dd_ps_client **c);
/* The blocks this client works with (copied). Must be called before init/push/pull. */
dd_status dd_ps_client_set_blocks(dd_ps_client *c, const dd_ps_block *b, size_t n);
/* Creates every block on its servers with the values arena[b.offset ..] (first INIT
 * wins: a block that exists keeps its values). versions (may be NULL): n entries. */
dd_status dd_ps_client_init(dd_ps_client *c, const float *arena, uint64_t *versions);
/* Resume (docs/ps.md, "Requests" and "Resuming"): sets every block to values arena[b.offset ..], the
 * optimiser state blob states[i] (state_bytes[i] bytes, dd_optim_state_save of an
 * optimiser of the block's length) and version clock versions[i], on its primary (and,
 * by replication, its replicas). A server refuses it for a block it already holds at
 * another version than 0 or versions[i] (servers of another run or further on). */
dd_status dd_ps_client_restore(dd_ps_client *c, const float *arena, const void *const *states, const size_t *state_bytes,
                               const uint64_t *versions);
/* Pushes the gradients g[b.offset ..] of every block with learning rate lr: returns when
 * every block's primary acknowledged it (after its replicas stored it). Applied exactly
 * once even when resent or failed over. versions (may be NULL): the blocks' versions
 * after this push. Errors: DD_ERR_TIMEOUT (no live server for a block), DD_ERR_COMM
 * (a server refused: its message). */
dd_status dd_ps_client_push(dd_ps_client *c, const float *g, double lr, uint64_t *versions);
/* Two-phase push (docs/ps.md, "Atomic pushes"): stage sends the gradients of every block
 * with learning rate lr to its primary, which holds them back (nothing is applied);
 * apply then makes every block's primary apply the staged update with its optimiser,
 * exactly once, acknowledged when the replicas hold the result. Whoever decides that the
 * update counts (the coordinator, at commit) can complete it with an apply on the
 * owner's behalf when the owner dies between its stage and its apply, so a committed
 * update is applied to all blocks or, if never committed, to none.
 * stage: *txn == 0 takes a new transaction number (returned in *txn); a non-zero *txn
 * stages again under that number (after a server died: blocks that applied it already
 * ignore it). apply: owner 0 = this client (dd_ps_client_id). Errors as push; apply
 * fails (DD_ERR_COMM, the server's message) when a block holds neither the staged update
 * nor the record of having applied it (its server died after the stage: stage again). */
dd_status dd_ps_client_stage(dd_ps_client *c, const float *g, double lr, uint64_t *txn);
dd_status dd_ps_client_apply(dd_ps_client *c, uint64_t owner, uint64_t txn, uint64_t *versions);
/* This client's sender id (the owner of its staged updates). */
uint64_t dd_ps_client_id(const dd_ps_client *c);
/* Pulls the blocks' values into arena; versions (n entries, in/out, may be NULL): on
 * input the version the caller has (UINT64_MAX: none), a block whose version is
 * unchanged is not sent again; on output the current versions. */
dd_status dd_ps_client_pull(dd_ps_client *c, float *arena, uint64_t *versions);
/* For checkpoints: pulls every block's values into arena (whatever the versions; versions
 * may be NULL, else receives them) and its optimiser state blob (dd_optim_state_save of
 * the block's optimiser), read with dd_ps_client_block_state until the next call. */
dd_status dd_ps_client_pull_state(dd_ps_client *c, float *arena, uint64_t *versions);
/* Block i's state blob of the last dd_ps_client_pull_state (NULL before one). */
const void *dd_ps_client_block_state(const dd_ps_client *c, size_t i, size_t *bytes);
/* Pings every server thought alive; those silent for dead_ms are marked dead. */
dd_status dd_ps_client_ping(dd_ps_client *c);
void dd_ps_client_get_stats(const dd_ps_client *c, dd_ps_client_stats *s);

#ifdef __cplusplus
}
#endif
#endif
