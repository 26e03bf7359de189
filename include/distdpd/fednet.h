/* Federated averaging over the network (docs/federated.md, "Protocol", "Algorithms"): the
 * payloads of the DD_MSG_FED_* messages (net.h) with strict decoders, the local-training
 * algorithms (fedavg, fedprox, scaffold: one file each, one registry line), the server
 * optimisers (none, momentum = FedAvgM, adam = FedAdam), the coordinator (fed-server) and
 * the bench (fed-client). Robust aggregation, the RDP accountant and clipping: fed.h.
 *
 * Raw I/Q never leaves a bench: a bench sends only FED_HELLO (protocol version and the length
 * of its training split), FED_UPDATE (the round's update of the parameter vector, its
 * frame count, the mean local loss, and with scaffold the control-variate delta),
 * FED_EVAL_REP (the squared-error sums of its test split), with --secure FED_SECAGG (the
 * masked update and the key material of secagg.h instead of a plain FED_UPDATE vector)
 * and PING / BYE.
 *
 * All payload integers and floats are little-endian (dd_nbuf / dd_nrd). This header
 * never includes zmq.h or mpi.h. */
#ifndef DISTDPD_FEDNET_H
#define DISTDPD_FEDNET_H

#include <stddef.h>
#include <stdint.h>

#include "distdpd/core.h"
#include "distdpd/fed.h"
#include "distdpd/net.h"
#include "distdpd/train.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DD_FED_PROTO 1            /* protocol version in FED_HELLO */
#define DD_FED_MAX_PARAMS (1u << 24) /* parameter vectors longer than this are refused */
#define DD_FED_MAX_CLIENTS 256

/* ---- payloads ---- */
typedef struct { /* FED_HELLO: 12 bytes */
    uint32_t proto;    /* DD_FED_PROTO */
    uint64_t samples;  /* training-split samples of the bench (>= 1; the frames, which depend
                          on the run's framing, come with each update) */
} dd_fed_hello;

typedef struct { /* FED_WELCOME */
    uint32_t index;    /* the bench's index in the coordinator's table */
    uint64_t nparams;  /* parameter vector length the model must have */
    char *cfg_json;    /* dd_train_cfg_to_json of the run (decoded: owned, dd_fed_free_*) */
} dd_fed_welcome;

enum { DD_FED_LOCAL_STEPS = 0, DD_FED_LOCAL_EPOCHS = 1 };

typedef struct { /* FED_ROUND */
    uint64_t round;    /* 1-based */
    uint8_t algo;      /* index in the algorithm registry */
    uint8_t local_kind;/* DD_FED_LOCAL_STEPS | DD_FED_LOCAL_EPOCHS */
    uint32_t local_n;  /* steps or epochs, >= 1 */
    double mu;         /* fedprox: proximal weight (>= 0) */
    double dp_clip;    /* > 0: clip the update to this L2 norm before sending; 0 off */
    uint8_t secure;    /* 1: --secure: the update goes through secure aggregation (secagg.h)
                          with the parameters below, as client id index + 1 */
    uint32_t sa_n;     /* secure: benches invited (2..255) */
    uint32_t sa_threshold; /* secure: t (0 = the default) */
    uint32_t sa_ring;  /* secure: 32 or 64 */
    double sa_range;   /* secure: |x_j| <= range (the bench clips its update to this L2 norm) */
    uint64_t nparams;
    const uint8_t *w;  /* nparams global weights, float32 little-endian, inside the payload
                          (not aligned: copy with memcpy) */
    const uint8_t *c;  /* scaffold: nparams server control variate; NULL otherwise */
} dd_fed_round;

typedef struct { /* FED_UPDATE */
    uint64_t round;
    uint64_t frames;   /* training frames of the bench (weight) */
    double loss;       /* mean local training loss of the round */
    double norm;       /* L2 norm of the update before any DP clipping */
    uint64_t nparams;
    const uint8_t *delta; /* local weights - global weights (float32, as above) */
    const uint8_t *dc;    /* scaffold: control-variate delta; NULL otherwise */
} dd_fed_update;

typedef struct { /* FED_EVAL: round + weights */
    uint64_t round;
    uint64_t nparams;
    const uint8_t *w;
} dd_fed_eval;

typedef struct { /* FED_EVAL_REP: 32 bytes */
    uint64_t round;
    double err;        /* sum |pred - y|^2 over the test split */
    double ref;        /* sum |y|^2 */
    uint64_t samples;  /* test samples */
} dd_fed_eval_rep;

/* Encoders append the payload to b (a dd_nbuf, emptied first). */
void dd_fed_enc_hello(dd_nbuf *b, const dd_fed_hello *m);
void dd_fed_enc_welcome(dd_nbuf *b, const dd_fed_welcome *m);
/* The vectors are given as floats (w, c, delta, dc: nparams each; c/dc NULL = absent). */
void dd_fed_enc_round(dd_nbuf *b, const dd_fed_round *m, const float *w, const float *c);
void dd_fed_enc_update(dd_nbuf *b, const dd_fed_update *m, const float *delta, const float *dc);
void dd_fed_enc_eval(dd_nbuf *b, const dd_fed_eval *m, const float *w);
void dd_fed_enc_eval_rep(dd_nbuf *b, const dd_fed_eval_rep *m);
/* Payload sizes of the fixed-layout messages (the message-audit test checks them). */
size_t dd_fed_update_bytes(uint64_t nparams, int with_dc);
size_t dd_fed_eval_rep_bytes(void);

/* Strict decoders of payload p[0..n): every field in range, the exact length (no
 * trailing bytes), nparams == want_n when want_n != 0, finite floats where the field
 * must be (the update vectors may hold anything: a Byzantine bench's NaN is the
 * aggregation's business). Errors: DD_ERR_FORMAT naming the message and field. Pointers
 * in the result point into p. */
dd_status dd_fed_dec_hello(const uint8_t *p, size_t n, dd_fed_hello *m);
dd_status dd_fed_dec_welcome(const uint8_t *p, size_t n, dd_fed_welcome *m); /* cfg_json malloc'd */
dd_status dd_fed_dec_round(const uint8_t *p, size_t n, uint64_t want_n, int n_algos, dd_fed_round *m);
dd_status dd_fed_dec_update(const uint8_t *p, size_t n, uint64_t want_n, int want_dc, dd_fed_update *m);
dd_status dd_fed_dec_eval(const uint8_t *p, size_t n, uint64_t want_n, dd_fed_eval *m);
dd_status dd_fed_dec_eval_rep(const uint8_t *p, size_t n, dd_fed_eval_rep *m);
void dd_fed_welcome_free(dd_fed_welcome *m);

/* ---- local-training algorithms (one file each: src/fed/algo_*.c; registry algo.c) ---- */
typedef struct {
    size_t n;          /* parameters */
    const float *w0;   /* the round's global weights */
    const float *c;    /* scaffold: the server control variate (NULL otherwise) */
    const float *ci;   /* scaffold: this bench's control variate (NULL otherwise) */
    double mu;         /* fedprox */
    double lr;         /* local learning rate */
    uint64_t steps;    /* local steps done in the round (local_end) */
} dd_fed_local;

typedef struct {
    const char *name;  /* "fedavg", ... */
    const char *help;  /* one line */
    int control;       /* 1: server and benches keep control variates (scaffold) */
    /* Adds the algorithm's term to the local gradient g at the local weights w (before
     * gradient clipping and the optimiser step); NULL: plain local SGD. */
    void (*grad)(const dd_fed_local *L, const float *w, float *g);
    /* control: after the local steps, the new control variate of the bench into ci_new
     * (from the local weights w). */
    void (*control_end)(const dd_fed_local *L, const float *w, float *ci_new);
} dd_fed_algo;

extern const dd_fed_algo dd_fed_algo_fedavg, dd_fed_algo_fedprox, dd_fed_algo_scaffold;
/* The registry (NULL-terminated) and lookup by name (index into the registry, -1 and
 * DD_ERR_ARG naming the valid names otherwise). */
const dd_fed_algo *const *dd_fed_algos(int *count);
int dd_fed_algo_find(const char *name);

/* ---- server optimisers (Reddi et al. 2021, "Adaptive federated optimization") ---- */
typedef struct {
    int kind;          /* index into dd_fed_sopt_names: 0 none, 1 momentum, 2 adam */
    double lr;         /* server learning rate eta_g (1 = plain FedAvg) */
    double momentum;   /* momentum: beta (FedAvgM); adam: beta1 */
    double beta2;      /* adam */
    double eps;        /* adam: tau (adaptivity), default 1e-3 */
} dd_fed_sopt_cfg;
extern const char *const dd_fed_sopt_names[]; /* NULL-terminated */
typedef struct dd_fed_sopt dd_fed_sopt;
dd_status dd_fed_sopt_create(const dd_fed_sopt_cfg *cfg, size_t n, dd_fed_sopt **out);
/* w += the step of pseudo-gradient delta (the aggregated mean update). */
void dd_fed_sopt_step(dd_fed_sopt *s, float *w, const float *delta);
void dd_fed_sopt_destroy(dd_fed_sopt **s);

/* ---- the coordinator ---- */
typedef struct {
    const char *bind;        /* tcp://HOST:PORT */
    const char *key_path;    /* secret CURVE key */
    const char *allow_path;  /* enrolled benches' public keys (labels name them) */
    const char *out;         /* run directory (created; must not hold a run) */
    const char *command;     /* command line for config.json (may be NULL) */
    dd_train_cfg cfg;        /* model and local-training configuration sent to the benches */
    int rounds;              /* R >= 1 */
    double fraction;         /* C in (0, 1]: benches sampled per round */
    int min_clients;         /* >= 1: sampled at least (waited for when fewer are connected) */
    int start_clients;       /* waited for before round 1 (0: min_clients) */
    double min_completion;   /* (0, 1]: answers needed of the sampled to aggregate */
    double wait_s;           /* waiting for min_clients connected benches */
    double round_timeout_s;  /* waiting for the sampled benches' updates */
    double eval_timeout_s;   /* waiting for the evaluation replies */
    int dead_ms;             /* a bench silent this long (no message, no ping) is gone */
    int local_kind, local_n; /* DD_FED_LOCAL_*, count */
    int algo;                /* registry index */
    double mu;
    dd_fed_sopt_cfg sopt;
    dd_agg_cfg agg;
    double dp_clip, dp_noise, dp_delta; /* dp_clip > 0 enables DP */
    int secure;              /* 1: secure aggregation of the updates (secagg.h): the unweighted
                                mean; needs --agg mean, not scaffold, >= 2 benches per round */
    double secure_range;     /* benches clip their update to this L2 norm (0: dp_clip, else 10) */
    int secure_ring;         /* 32 or 64 */
    uint64_t sample_seed;    /* sampling of the benches */
    int eval_every;          /* evaluate every this many rounds (and the last) */
    const volatile int *stop;/* stop after the current round when it becomes non-zero */
} dd_fed_server_opts;

void dd_fed_server_defaults(dd_fed_server_opts *o);
/* Runs the federation to the end (docs/federated.md). Errors: DD_ERR_ARG (options,
 * too few benches within wait_s), DD_ERR_IO, DD_ERR_COMM, DD_ERR_NUMERIC (the global
 * model is not finite after a round: "diverged"). */
dd_status dd_fed_server_run(const dd_fed_server_opts *o);

/* ---- the bench ---- */
typedef struct {
    const char *server;      /* tcp://HOST:PORT */
    const char *server_key;  /* the coordinator's public key (file) */
    const char *key_path;    /* this bench's secret key (its .pub must be enrolled) */
    const char *data;        /* its data set */
    double connect_timeout_s;/* no FED_WELCOME in this time: error */
    double timeout_s;        /* nothing from the coordinator in this time: error */
    /* experiments and tests (docs/federated.md, "Tests"): */
    int attack;              /* 0 none, 1 nan, 2 huge, 3 signflip, 4 malformed */
    int fail_at_round;       /* > 0: exit without answering when this round arrives */
    int straggle_ms;         /* sleep this long before sending each update */
    const char *record;      /* append "TYPE BYTES" per sent message to this file */
    const volatile int *stop;
} dd_fed_client_opts;
extern const char *const dd_fed_attack_names[]; /* "none", "nan", "huge", "signflip", "malformed", NULL */
dd_status dd_fed_client_run(const dd_fed_client_opts *o);

#ifdef __cplusplus
}
#endif
#endif
