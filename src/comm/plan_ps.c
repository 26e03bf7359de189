/* The parameter-server step model of `distdpd plan --ps-servers` (include/distdpd/plan.h,
 * docs/ps.md "Throughput"): a synchronous step's push and pull over the workers' and the
 * servers' links, max(M/B, n M/(k B)) per direction plus the alpha terms of the
 * request/reply round trips and the replication. */
#include <math.h>
#include <string.h>

#include "distdpd/plan.h"

dd_status dd_plan_ps(const dd_plan_ps_cfg *cfg, dd_plan_ps_result *out) {
    if (!cfg || !out) return dd_error(DD_ERR_ARG, "plan ps: NULL argument");
    if (!(cfg->params >= 1) || !isfinite(cfg->params))
        return dd_error(DD_ERR_ARG, "plan ps: params must be >= 1 (got %g)", cfg->params);
    if (cfg->workers < 1) return dd_error(DD_ERR_ARG, "plan ps: workers must be >= 1 (got %d)", cfg->workers);
    if (cfg->servers < 1) return dd_error(DD_ERR_ARG, "plan ps: servers must be >= 1 (got %d)", cfg->servers);
    if (cfg->replicas < 0 || cfg->replicas > cfg->servers - 1)
        return dd_error(DD_ERR_ARG, "plan ps: replicas must be in [0, servers - 1 = %d] (got %d)", cfg->servers - 1,
                        cfg->replicas);
    if (!(cfg->repl_floats >= 1) || !isfinite(cfg->repl_floats))
        return dd_error(DD_ERR_ARG, "plan ps: repl_floats must be >= 1 (got %g)", cfg->repl_floats);
    if (!(cfg->compute_s >= 0) || !isfinite(cfg->compute_s))
        return dd_error(DD_ERR_ARG, "plan ps: compute_s must be >= 0 (got %g)", cfg->compute_s);
    const dd_link *l = &cfg->link;
    if (!(l->alpha1 >= 0) || !(l->beta1 >= 0) || !isfinite(l->alpha1) || !isfinite(l->beta1))
        return dd_error(DD_ERR_ARG, "plan ps: link alpha1 and beta1 must be finite and >= 0");
    memset(out, 0, sizeof *out);
    const double M = 4.0 * cfg->params, n = cfg->workers, k = cfg->servers, R = cfg->replicas,
                 f = cfg->repl_floats;
    const double share = n * M / k; /* bytes of all workers' pushes (or pulls) one server handles */
    out->model_bytes = M;
    out->worker_s = M * l->beta1;
    out->server_push_s = share * (1 + R * f) * l->beta1;
    out->server_pull_s = share * l->beta1;
    out->latency_s = (R > 0 ? 6 : 4) * l->alpha1;
    out->push_s = (R > 0 ? 4 : 2) * l->alpha1 + fmax(out->worker_s, out->server_push_s);
    out->pull_s = 2 * l->alpha1 + fmax(out->worker_s, out->server_pull_s);
    out->comm_s = out->push_s + out->pull_s;
    out->step_s = cfg->compute_s + out->comm_s;
    out->server_bound = n * (1 + R * f) > k;
    out->pushes_per_s_server = out->step_s > 0 ? n / out->step_s : INFINITY;
    out->worker_bytes_step = 2 * M;
    out->server_bytes_step = 2 * share + 2 * R * f * share;
    return DD_OK;
}
