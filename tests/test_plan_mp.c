/* The model-parallel plan (plan.h, "model parallelism"; src/comm/plan_mp.c), without MPI:
 * - the cluster file: a good file (presets, given numbers, a calibration file relative to
 *   it) and every refusal with its exact message;
 * - the tensor-parallel collectives counted by running the shard against docs/models.md's
 *   formulas: resnet (2 allreduces of B T C per block), tcn (2 allgathers of B T C/T per
 *   layer) and gru (T allgathers and T - 1 reduce-scatters of B H/T per layer, one
 *   allreduce of dL/dx for every layer but the first), extrapolated (T = 200) and run
 *   directly (T = 5);
 * - step times in closed form: plain data parallelism's compute, a tensor-parallel
 *   layout's collectives (ring allreduce on the link given), the pipeline bubble of equal
 *   stages against the formula, the replicas' allreduce; the components add up;
 * - the ranking: fitting layouts by step time, a layout that does not fit is never best,
 *   with a memory limit below plain data parallelism's only tp/pp layouts fit, the
 *   explanation says why, no layout fits -> best = -1; micro auto picks a listed M;
 * - errors of the configuration and of a layout; JSON; --measure-compute's timing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dd_test.h"
#include "distdpd/plan.h"
#include "test_model_util.h"

static dd_status parse(const char *text, dd_plan_cluster *c) { return dd_plan_cluster_parse(text, "c.json", c); }

#define CHECK_PARSE_ERR(text, msg)                                                                    \
    do {                                                                                            \
        dd_plan_cluster c_;                                                                         \
        dd_status s_ = parse(text, &c_);                                                            \
        CHECK(s_ == DD_ERR_FORMAT, "%s: status %s", text, dd_status_str(s_));                       \
        CHECK(strcmp(dd_last_error(), msg) == 0, "message '%s', want '%s'", dd_last_error(), msg); \
    } while (0)

static void test_cluster_file(void) {
    dd_plan_cluster c;
    CHECK_OK(parse("{\"format\": \"distdpd-cluster\", \"nodes\": 4, \"ranks_per_node\": 8, \"intra_link\": \"shm\", "
                   "\"inter_link\": \"infiniband-hdr\", \"memory_mib\": 2048, \"gflops\": 50, \"comment\": \"x\"}",
                   &c));
    dd_link shm, ib;
    dd_plan_link_preset("shm", &shm);
    dd_plan_link_preset("infiniband-hdr", &ib);
    CHECK(c.nodes == 4 && c.ranks_per_node == 8, "nodes %d rpn %d", c.nodes, c.ranks_per_node);
    CHECK(memcmp(&c.intra, &shm, sizeof shm) == 0 && memcmp(&c.inter, &ib, sizeof ib) == 0, "preset links");
    CHECK(strcmp(c.intra_name, "shm") == 0 && strcmp(c.inter_name, "infiniband-hdr") == 0, "names %s %s", c.intra_name,
          c.inter_name);
    CHECK_NEAR(c.memory_bytes, 2048.0 * 1048576.0, 0);
    CHECK_NEAR(c.gflops, 50, 0);
    /* numbers given; one node needs no inter link; gflops optional */
    CHECK_OK(parse("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": {\"latency_us\": 2, \"bandwidth_gbps\": 5, "
                   "\"oneway_latency_us\": 3, \"oneway_bandwidth_gbps\": 10, \"gamma_ns_per_byte\": 0.1}, "
                   "\"memory_mib\": 100}",
                   &c));
    CHECK_NEAR(c.intra.alpha, 2e-6, 1e-18);
    CHECK_NEAR(c.intra.beta, 1.0 / 5e9, 1e-22);
    CHECK_NEAR(c.intra.alpha1, 3e-6, 1e-18);
    CHECK_NEAR(c.intra.beta1, 1.0 / 10e9, 1e-22);
    CHECK_NEAR(c.intra.gamma, 0.1e-9, 1e-22);
    CHECK(c.gflops == 0 && strcmp(c.intra_name, "given") == 0, "gflops %g name %s", c.gflops, c.intra_name);
    CHECK_OK(parse("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": {\"latency_us\": 2, \"bandwidth_gbps\": 5}, "
                   "\"memory_mib\": 100}",
                   &c));
    CHECK(c.intra.alpha1 == c.intra.alpha && c.intra.beta1 == c.intra.beta, "one way defaults to the exchange");
    CHECK_NEAR(c.intra.gamma, 0.2e-9, 1e-22);
    /* a calibration file, relative to the cluster file */
    const char *dir = dd_test_tmpdir();
    dd_plan_calib cal;
    memset(&cal, 0, sizeof cal);
    cal.link = (dd_link){4e-6, 1e-10, 5e-11, 6e-6, 2e-10};
    cal.ranks = 2;
    char path[600], cpath[600];
    snprintf(path, sizeof path, "%s/cal.json", dir);
    CHECK_OK(dd_plan_calib_save(&cal, path));
    snprintf(cpath, sizeof cpath, "%s/cluster.json", dir);
    dd_test_write(cpath, "{\"nodes\": 2, \"ranks_per_node\": 2, \"intra_link\": {\"calibration\": \"cal.json\"}, "
                         "\"inter_link\": \"ethernet-10g\", \"memory_mib\": 64, \"gflops\": 1}");
    CHECK_OK(dd_plan_cluster_load(cpath, &c));
    CHECK(memcmp(&c.intra, &cal.link, sizeof cal.link) == 0, "the calibrated link");
    CHECK(strcmp(c.intra_name, "measured (cal.json)") == 0, "name '%s'", c.intra_name);
    /* refusals: the file, the field, what is wrong */
    snprintf(path, sizeof path, "%s/none.json", dir);
    CHECK_ERR(dd_plan_cluster_load(path, &c), DD_ERR_IO, "none.json");
    CHECK_PARSE_ERR("[1, 2]", "c.json: not a JSON object");
    CHECK_PARSE_ERR("{\"nodes\": 1,", "c.json: not a JSON object");
    CHECK_PARSE_ERR("{\"nodez\": 1}", "c.json: unknown field 'nodez' (fields: format, nodes, ranks_per_node, "
                                      "intra_link, inter_link, memory_mib, gflops, comment)");
    CHECK_PARSE_ERR("{\"format\": \"distdpd-calibration\", \"nodes\": 1}",
                    "c.json: field 'format' must be \"distdpd-cluster\"");
    CHECK_PARSE_ERR("{\"ranks_per_node\": 2}", "c.json: missing field 'nodes'");
    CHECK_PARSE_ERR("{\"nodes\": 0, \"ranks_per_node\": 2}",
                    "c.json: field 'nodes' must be an integer in [1, 1048576], got 0");
    CHECK_PARSE_ERR("{\"nodes\": 1.5, \"ranks_per_node\": 2}",
                    "c.json: field 'nodes' must be an integer in [1, 1048576], got 1.5");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": \"8\"}", "c.json: field 'ranks_per_node' must be a number");
    CHECK_PARSE_ERR("{\"nodes\": 1048576, \"ranks_per_node\": 2}",
                    "c.json: nodes x ranks_per_node = 2097152 ranks: at most 1048576");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2}", "c.json: missing field 'intra_link'");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": \"token-ring\"}",
                    "c.json: field 'intra_link': unknown link 'token-ring' (expected a preset: ethernet-10g, "
                    "ethernet-100g, infiniband-hdr, nvlink, shm; or an object {\"latency_us\", \"bandwidth_gbps\"} or "
                    "{\"calibration\": FILE})");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": 5}",
                    "c.json: field 'intra_link' must be a preset name or an object {\"latency_us\", \"bandwidth_gbps\"} "
                    "or {\"calibration\": FILE}");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": {\"latency_us\": 1}}",
                    "c.json: missing field 'intra_link.bandwidth_gbps'");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": {\"latency_us\": 1, \"bandwidth_gbps\": 0}}",
                    "c.json: field 'intra_link.bandwidth_gbps' must be in (0, 1e6] GB/s, got 0");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": {\"latency_us\": -1, \"bandwidth_gbps\": 1}}",
                    "c.json: field 'intra_link.latency_us' must be in [0, 1e6] microseconds, got -1");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": {\"latency_us\": 1, \"bandwidth\": 1}}",
                    "c.json: field 'intra_link': unknown key 'bandwidth' (keys: latency_us, bandwidth_gbps, "
                    "oneway_latency_us, oneway_bandwidth_gbps, gamma_ns_per_byte, calibration)");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": {\"calibration\": \"x.json\", "
                    "\"latency_us\": 1}}",
                    "c.json: field 'intra_link': give either \"calibration\" or \"latency_us\" and \"bandwidth_gbps\", "
                    "not both");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": {\"calibration\": 3}}",
                    "c.json: field 'intra_link.calibration' must be a file name");
    {
        dd_plan_cluster c_;
        CHECK_ERR(parse("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": {\"calibration\": \"/nonexistent/x.json\"}}",
                        &c_),
                  DD_ERR_IO, "c.json: field 'intra_link.calibration': cannot open /nonexistent/x.json: No such file");
    }
    CHECK_PARSE_ERR("{\"nodes\": 2, \"ranks_per_node\": 2, \"intra_link\": \"shm\", \"memory_mib\": 1}",
                    "c.json: missing field 'inter_link'");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": \"shm\"}", "c.json: missing field 'memory_mib'");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": \"shm\", \"memory_mib\": 0}",
                    "c.json: field 'memory_mib' must be > 0 (MiB of arena memory per rank), got 0");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": \"shm\", \"memory_mib\": 1, \"gflops\": -2}",
                    "c.json: field 'gflops' must be in (0, 1e9] GFLOP/s per rank, got -2");
    CHECK_PARSE_ERR("{\"nodes\": 1, \"ranks_per_node\": 2, \"intra_link\": \"shm\", \"memory_mib\": 1, \"comment\": 1}",
                    "c.json: field 'comment' must be a string");
}

/* ---- collectives counted against docs/models.md ----------------------------------------- */

static void test_tp_counts(void) {
    dd_plan_tp_calls f[64], b[64];
    size_t S = 0;
    static const int lens[] = {200, 5};
    for (int li = 0; li < 2; li++) {
        const int B = 3, T = lens[li];
        for (int tp = 2; tp <= 4; tp += 2) {
            /* resnet: stem, L blocks, head; a block: 1 allreduce of B T C forward, 1 backward */
            dd_model_cfg rc = tm_mcfg("hidden=16,layers=3,kernel=3");
            CHECK_OK(dd_plan_tp_counts("resnet", &rc, tp, B, T, f, b, 64, &S));
            CHECK(S == 5, "resnet stages %zu", S);
            double calls = 0, floats = 0, other = 0;
            for (size_t s = 0; s < S; s++) {
                calls += f[s].allreduce_calls + b[s].allreduce_calls;
                floats += f[s].allreduce_floats + b[s].allreduce_floats;
                other += f[s].allgather_calls + b[s].allgather_calls + f[s].reduce_scatter_calls + b[s].reduce_scatter_calls;
                if (s >= 1 && s <= 3) {
                    CHECK(f[s].allreduce_calls == 1 && b[s].allreduce_calls == 1, "resnet block %zu: %g / %g allreduces",
                          s, f[s].allreduce_calls, b[s].allreduce_calls);
                    CHECK(f[s].allreduce_floats == (double)B * T * 16, "resnet block %zu forward floats %g", s,
                          f[s].allreduce_floats);
                }
            }
            CHECK(calls == 2 * 3 && floats == 2.0 * 3 * B * T * 16 && other == 0,
                  "resnet tp %d T %d: %g allreduces of %g floats in all (docs: 2L = 6, 2 L B T C = %g)", tp, T, calls,
                  floats, 2.0 * 3 * B * T * 16);
            /* tcn: a depthwise layer: 1 allgather of B T C/T per rank forward, 1 backward */
            dd_model_cfg tc = tm_mcfg("hidden=16,layers=3,kernel=2");
            CHECK_OK(dd_plan_tp_counts("tcn", &tc, tp, B, T, f, b, 64, &S));
            calls = floats = other = 0;
            for (size_t s = 0; s < S; s++) {
                calls += f[s].allgather_calls + b[s].allgather_calls;
                floats += f[s].allgather_floats + b[s].allgather_floats;
                other += f[s].allreduce_calls + b[s].allreduce_calls + f[s].reduce_scatter_calls + b[s].reduce_scatter_calls;
            }
            CHECK(calls == 6 && floats == 2.0 * 3 * B * T * 16 / tp && other == 0,
                  "tcn tp %d T %d: %g allgathers of %g floats per rank (docs: 6, %g)", tp, T, calls, floats,
                  2.0 * 3 * B * T * 16 / tp);
            /* gru, 3 layers of H = 16: per layer T allgathers and T - 1 reduce-scatters of B H/T;
             * one allreduce of dL/dx (B T H) for layers 1 and 2 (training never asks layer 0
             * for dL/dx) */
            dd_model_cfg gc = tm_mcfg("hidden=16,layers=3");
            CHECK_OK(dd_plan_tp_counts("gru", &gc, tp, B, T, f, b, 64, &S));
            double ag = 0, agf = 0, rs = 0, rsf = 0, ar = 0, arf = 0;
            for (size_t s = 0; s < S; s++) {
                ag += f[s].allgather_calls + b[s].allgather_calls;
                agf += f[s].allgather_floats + b[s].allgather_floats;
                rs += f[s].reduce_scatter_calls + b[s].reduce_scatter_calls;
                rsf += f[s].reduce_scatter_floats + b[s].reduce_scatter_floats;
                ar += f[s].allreduce_calls + b[s].allreduce_calls;
                arf += f[s].allreduce_floats + b[s].allreduce_floats;
            }
            const double U = 16.0 / tp;
            CHECK(ag == 3.0 * T && agf == 3.0 * T * B * U, "gru tp %d T %d: %g allgathers, %g floats (docs %g, %g)", tp,
                  T, ag, agf, 3.0 * T, 3.0 * T * B * U);
            CHECK(rs == 3.0 * (T - 1) && rsf == 3.0 * (T - 1) * B * U,
                  "gru tp %d T %d: %g reduce-scatters, %g floats (docs %g, %g)", tp, T, rs, rsf, 3.0 * (T - 1),
                  3.0 * (T - 1) * B * U);
            CHECK(ar == 2 && arf == 2.0 * B * T * 16, "gru tp %d T %d: %g allreduces of %g floats (docs 2, %g)", tp, T,
                  ar, arf, 2.0 * B * T * 16);
        }
    }
    /* a whole model has none; errors */
    dd_model_cfg rc = tm_mcfg("hidden=16,layers=3,kernel=3");
    CHECK_OK(dd_plan_tp_counts("resnet", &rc, 1, 4, 50, f, b, 64, &S));
    double any = 0;
    for (size_t s = 0; s < S; s++) any += f[s].allreduce_calls + b[s].allreduce_calls;
    CHECK(any == 0, "tp 1: %g calls", any);
    CHECK_ERR(dd_plan_tp_counts("resnet", &rc, 3, 1, 10, f, b, 64, &S), DD_ERR_ARG,
              "resnet --hidden 16 is not divisible by --tp 3");
    CHECK_ERR(dd_plan_tp_counts("gmp", NULL, 2, 1, 10, f, b, 64, &S), DD_ERR_UNSUPPORTED,
              "model gmp has no tensor-parallel form");
    CHECK_ERR(dd_plan_tp_counts("resnet", &rc, 2, 1, 10, f, b, 3, &S), DD_ERR_ARG, "5 stages, room for 3");
}

/* ---- times ------------------------------------------------------------------------------ */

/* A cluster of one node of `ranks` with a link of 10 us and 1 GB/s (no reduction cost). */
static void cfg_of(dd_plan_mp_cfg *c, const char *model, const char *opts, int ranks, double mib) {
    dd_plan_mp_cfg_default(c);
    c->model = model;
    c->model_cfg = tm_mcfg(opts);
    c->batch = 16;
    c->frame = 100;
    c->eval_batch = 2;
    c->nperseg = 256;
    c->cluster.nodes = 1;
    c->cluster.ranks_per_node = ranks;
    c->cluster.intra = (dd_link){10e-6, 1e-9, 0, 10e-6, 1e-9};
    c->cluster.memory_bytes = mib * 1048576.0;
    c->cluster.gflops = 2.0;
}

static double model_flops(const char *name, const char *opts) {
    dd_model *m = NULL;
    dd_model_cfg mc = tm_mcfg(opts);
    if (dd_model_create(name, &mc, &m) != DD_OK) return NAN;
    double f = 0;
    for (size_t s = 0; s < dd_model_num_stages(m); s++) {
        dd_stage_info si;
        dd_model_stage_info(m, s, &si);
        f += si.flops_fwd + si.flops_bwd;
    }
    dd_model_destroy(&m);
    return f;
}

static double sum_parts(const dd_plan_mp_layout *o) {
    return o->compute_s + o->tp_s + o->bubble_s + o->msg_s + o->dp_s + o->small_s;
}

static void test_times(void) {
    dd_plan_mp_cfg c;
    const char *ro = "hidden=16,layers=4,kernel=3";
    cfg_of(&c, "resnet", ro, 2, 0);
    const double fl = model_flops("resnet", ro);
    dd_plan_mp_layout o;
    /* plain data parallelism: 8 frames per rank */
    CHECK_OK(dd_plan_mp_layout_eval(&c, 1, 1, 0, DD_SHARD_NONE, &o));
    CHECK(fabs(o.compute_s - fl * 8 * 100 / 2e9) <= 1e-12, "dp compute %g, want %g", o.compute_s, fl * 8 * 100 / 2e9);
    CHECK(o.dp == 2 && o.fits && strcmp(o.strategy, "dp") == 0, "dp layout");
    CHECK(fabs(o.step_s - sum_parts(&o)) <= 1e-12, "dp parts add up");
    /* tensor parallelism, P = 1, M = 1: the shard's compute and 2 L ring allreduces of
     * 4 B F C bytes over 2 ranks: 2 alpha + n beta each */
    CHECK_OK(dd_plan_mp_layout_eval(&c, 2, 1, 1, DD_SHARD_NONE, &o));
    const double n = 4.0 * 16 * 100 * 16, ar = 2 * 10e-6 + n * 1e-9;
    CHECK(fabs(o.tp_s - 8 * ar) <= 1e-12, "tp 2: collectives %g s, want 8 x %g", o.tp_s, ar);
    CHECK(o.tp_calls == 8 && fabs(o.tp_bytes - 8 * n) <= 1e-6, "tp 2: %g calls, %g bytes", o.tp_calls,
          o.tp_bytes);
    CHECK(o.bubble_s == 0 && o.msg_s == 0 && o.dp_s == 0 && o.pp == 1 && o.dp == 1, "tp 2 has no pipeline nor replicas");
    CHECK(fabs(o.step_s - sum_parts(&o)) <= 1e-12, "tp parts add up");
    /* a pipeline of 2: rank 0 sends each micro-batch's activation (B/M frames x F x C
     * floats between two blocks), one message each way per micro-batch */
    CHECK_OK(dd_plan_mp_layout_eval(&c, 1, 2, 2, DD_SHARD_NONE, &o));
    CHECK(o.msg_bytes == 4.0 * 16 * 100 * 16, "pp 2: rank 0 sends %g bytes per step, want %g", o.msg_bytes,
          4.0 * 16 * 100 * 16);
    CHECK(o.msg_s > 0 && fabs(o.bubble_formula - 1.0 / 3) <= 1e-12, "pp 2 M 2: messages %g s, formula %g", o.msg_s,
          o.bubble_formula);
    /* a pipeline of equal stages (hammerstein blocks), messages free: the bubble is the
     * formula's; the replicas' allreduce of each rank's storage after it */
    const char *ho = "hidden=8,layers=4,memory=4";
    cfg_of(&c, "hammerstein", ho, 4, 0);
    c.cluster.intra = (dd_link){0, 0, 0, 0, 0};
    for (int M = 2; M <= 8; M *= 2) {
        c.schedule = M == 4 ? DD_PP_GPIPE : DD_PP_1F1B;
        CHECK_OK(dd_plan_mp_layout_eval(&c, 1, 4, M, DD_SHARD_NONE, &o));
        CHECK(fabs(o.bubble - o.bubble_formula) <= 1e-9, "pp 4 M %d: bubble %g, formula %g", M, o.bubble,
              o.bubble_formula);
        CHECK(o.msg_s == 0 && fabs(o.step_s - sum_parts(&o)) <= 1e-12, "pp 4 M %d: parts", M);
        const double per = model_flops("hammerstein", ho) / 4 * 16 * 100 / 2e9; /* a rank's compute of the batch */
        CHECK(fabs(o.compute_s - per) <= 1e-12, "pp 4: compute %g, want %g", o.compute_s, per);
        CHECK(fabs(o.compute_s + o.bubble_s - per * (M + 3.0) / M) <= 1e-12, "pp 4 M %d: makespan %g, want %g", M,
              o.compute_s + o.bubble_s, per * (M + 3.0) / M);
    }
    c.schedule = DD_PP_1F1B;
    c.cluster.intra = (dd_link){10e-6, 1e-9, 0, 10e-6, 1e-9};
    CHECK_OK(dd_plan_mp_layout_eval(&c, 1, 2, 2, DD_SHARD_NONE, &o));
    CHECK(o.dp == 2 && fabs(o.dp_s - (2 * 10e-6 + o.dp_bytes * 1e-9)) <= 1e-12 && o.dp_bytes == 4.0 * (double)o.rank_params,
          "pp 2 x dp 2: replicas' ring allreduce %g s of %g bytes", o.dp_s, o.dp_bytes);
    CHECK(o.msg_s > 0 && o.msg_bytes > 0, "pp 2: messages cost %g s", o.msg_s);
    /* auto micro-batches: one of P x 1, 2, 4, 8 */
    c.micro = -1;
    CHECK_OK(dd_plan_mp_layout_eval(&c, 1, 2, -1, DD_SHARD_NONE, &o));
    CHECK(o.micro == 2 || o.micro == 4 || o.micro == 8 || o.micro == 16, "auto micro %d", o.micro);
    /* layouts that cannot be */
    CHECK_ERR(dd_plan_mp_layout_eval(&c, 3, 1, 1, DD_SHARD_NONE, &o), DD_ERR_ARG, "--tp 3 x --pp 1 does not divide the 4 ranks");
    CHECK_ERR(dd_plan_mp_layout_eval(&c, 2, 1, 1, DD_SHARD_ZERO1, &o), DD_ERR_ARG,
              "--shard zero1 applies to plain data parallelism (tp = pp = 1)");
    c.cluster.gflops = 0;
    CHECK_ERR(dd_plan_mp_layout_eval(&c, 1, 1, 0, DD_SHARD_NONE, &o), DD_ERR_ARG, "no compute speed (gflops)");
}

/* ---- ranking ---------------------------------------------------------------------------- */

static void test_ranking(void) {
    dd_plan_mp_cfg c;
    const char *ro = "hidden=64,layers=8,kernel=3";
    cfg_of(&c, "resnet", ro, 4, 0);
    c.micro = -1;
    dd_plan_mp_result r;
    CHECK_OK(dd_plan_mp_run(&c, &r));
    CHECK(r.best == 0 && r.nrows >= 8 && r.ranks == 4, "best %d of %zu rows", r.best, r.nrows);
    size_t dp_peak = 0, mp_min = SIZE_MAX;
    for (size_t i = 0; i < r.nrows; i++) {
        const dd_plan_mp_layout *o = &r.rows[i];
        CHECK(o->tp * o->pp * o->dp == 4 && o->fits && o->rank == (int)i + 1, "row %zu", i);
        if (i) CHECK(o->step_s >= r.rows[i - 1].step_s, "row %zu sorted", i);
        if (o->tp == 1 && o->pp == 1 && o->shard == DD_SHARD_NONE) dp_peak = o->mem_peak;
        if (o->tp * o->pp > 1 && o->mem_peak < mp_min) mp_min = o->mem_peak;
    }
    dd_plan_mp_result_free(&r);
    /* a limit between them: every plain data-parallel layout (every shard mode) is above,
     * some tp/pp layout fits */
    size_t dp_min = SIZE_MAX;
    {
        CHECK_OK(dd_plan_mp_run(&c, &r));
        for (size_t i = 0; i < r.nrows; i++)
            if (r.rows[i].tp * r.rows[i].pp == 1 && r.rows[i].mem_peak < dp_min) dp_min = r.rows[i].mem_peak;
        dd_plan_mp_result_free(&r);
    }
    CHECK(mp_min < dp_min && dp_min <= dp_peak, "model parallelism holds less per rank (%zu) than data parallelism (%zu)",
          mp_min, dp_min);
    c.cluster.memory_bytes = (double)(mp_min + dp_min) / 2;
    CHECK_OK(dd_plan_mp_run(&c, &r));
    CHECK(r.best == 0 && r.rows[0].fits && r.rows[0].tp * r.rows[0].pp > 1, "the best is a tp/pp layout");
    int seen_nofit = 0;
    for (size_t i = 0; i < r.nrows; i++) {
        const dd_plan_mp_layout *o = &r.rows[i];
        if (o->tp * o->pp == 1) CHECK(!o->fits && o->rank == 0, "dp %s fits under the limit", dd_shard_name(o->shard));
        if (!o->fits) seen_nofit = 1;
        else CHECK(!seen_nofit, "a fitting row %zu after one that does not fit", i);
        CHECK(o->fits == ((double)o->mem_peak <= c.cluster.memory_bytes), "row %zu: fits %d, peak %zu", i, o->fits,
              o->mem_peak);
    }
    char text[4096];
    dd_plan_mp_explain(&r, text, sizeof text);
    CHECK(strstr(text, "best: tp ") == text, "explanation starts with the best: %s", text);
    CHECK(strstr(text, "why: tp 1 x pp 1 x dp 4 (data parallelism) does not fit") != NULL, "why: %s", text);
    CHECK(strstr(text, "do not fit") != NULL || strstr(text, "does not fit") != NULL, "counts: %s", text);
    char *json = NULL;
    CHECK_OK(dd_plan_mp_json(&r, &json));
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "layouts")) == (int)r.nrows &&
              cJSON_GetObjectItem(j, "best")->valueint == 0 && cJSON_GetArraySize(cJSON_GetObjectItem(j, "explanation")) >= 2,
          "JSON");
    cJSON_Delete(j);
    free(json);
    dd_plan_mp_result_free(&r);
    /* nothing fits */
    c.cluster.memory_bytes = 1024;
    CHECK_OK(dd_plan_mp_run(&c, &r));
    CHECK(r.best == -1 && r.nrows > 0 && r.rows[0].rank == 0, "no layout fits 1 KiB");
    dd_plan_mp_explain(&r, text, sizeof text);
    CHECK(strstr(text, "no layout fits 1.0 KiB per rank: the smallest") == text, "%s", text);
    dd_plan_mp_result_free(&r);
    /* a model without a tensor-parallel form: tp > 1 not planned, and said so */
    cfg_of(&c, "gmp", "memory=4", 2, 0);
    CHECK_OK(dd_plan_mp_run(&c, &r));
    int tp_rows = 0, said = 0;
    for (size_t i = 0; i < r.nrows; i++) tp_rows += r.rows[i].tp > 1;
    for (int i = 0; i < r.nskipped && i < 8; i++) said += strstr(r.skipped[i], "tp 2 (pp 1): model gmp has no tensor-parallel form") != NULL;
    CHECK(tp_rows == 0 && said == 1, "gmp: %d tp rows, the reason said %d times", tp_rows, said);
    dd_plan_mp_result_free(&r);
}

static void test_errors(void) {
    dd_plan_mp_cfg c;
    dd_plan_mp_result r;
    size_t b[DD_MEM_KINDS];
    cfg_of(&c, "resnet", "hidden=16,layers=4,kernel=3", 4, 0);
    c.task = DD_TRAIN_ILA;
    CHECK_ERR(dd_plan_mp_run(&c, &r), DD_ERR_ARG, "model-parallel plan: task ila is not planned (pa and dla are)");
    c.task = DD_TRAIN_DLA;
    CHECK_ERR(dd_plan_mp_run(&c, &r), DD_ERR_ARG, "task dla needs the frozen PA model");
    c.task = DD_TRAIN_PA;
    c.model = NULL;
    CHECK_ERR(dd_plan_mp_run(&c, &r), DD_ERR_ARG, "model-parallel plan: no model");
    c.model = "resnet";
    c.micro = -2;
    CHECK_ERR(dd_plan_mp_run(&c, &r), DD_ERR_ARG, "micro = -2 must be -1 (auto), 0 (pp) or in [1, 4096]");
    c.micro = 0;
    CHECK_ERR(dd_plan_mp_memory(&c, 3, 1, 0, 0, b, NULL), DD_ERR_ARG, "--tp 3 x --pp 1 = 3 does not divide the 4 ranks");
    CHECK_ERR(dd_plan_mp_memory(&c, 1, 2, 0, 4, b, NULL), DD_ERR_ARG, "rank = 4 must be in [0, 4)");
    c.virt = 2;
    CHECK_ERR(dd_plan_mp_memory(&c, 1, 2, 0, 0, b, NULL), DD_ERR_ARG, "--virtual 2 needs --schedule interleaved");
    c.virt = 1;
    c.model_cfg = tm_mcfg("hidden=16,layers=1,kernel=3");
    CHECK_ERR(dd_plan_mp_memory(&c, 1, 4, 0, 0, b, NULL), DD_ERR_ARG, "cannot split 3 stages into 4 pipeline groups");
    c.model = "gmp";
    c.model_cfg = tm_mcfg("memory=4");
    CHECK_ERR(dd_plan_mp_memory(&c, 2, 1, 0, 0, b, NULL), DD_ERR_UNSUPPORTED, "model gmp has no tensor-parallel form");
}

static void test_measure(void) {
    dd_model *m = NULL;
    dd_model_cfg mc = tm_mcfg("hidden=8,layers=2,kernel=3");
    CHECK_OK(dd_model_create("resnet", &mc, &m));
    double s = 0, g = 0;
    CHECK_OK(dd_plan_measure_compute(m, 2, 50, 3, &s, &g));
    CHECK(s > 0 && g > 0 && isfinite(g), "measured %g s, %g GFLOP/s", s, g);
    CHECK(fabs(g * 1e9 * s - (dd_model_flops_per_sample(m, 0) + dd_model_flops_per_sample(m, 1)) * 100) <=
              1e-6 * g * 1e9 * s,
          "GFLOP/s x seconds = the FLOPs of 100 samples");
    CHECK_ERR(dd_plan_measure_compute(m, 0, 50, 3, &s, &g), DD_ERR_ARG, "B = 0");
    dd_model_destroy(&m);
}

int main(void) {
    test_cluster_file();
    test_tp_counts();
    test_times();
    test_ranking();
    test_errors();
    test_measure();
    return dd_test_done("test_plan_mp");
}
