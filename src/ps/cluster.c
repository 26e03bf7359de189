/* The cluster file of the parameter server: servers (name, address, public key),
 * ring and replication settings, the optimiser the servers apply. ps.h, docs/ps.md. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/ps.h"

void dd_ps_cluster_free(dd_ps_cluster *c) {
    free(c->servers);
    memset(c, 0, sizeof *c);
}

static dd_status num(const char *path, const cJSON *o, const char *key, double lo, double hi, int whole, double *v) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x) return DD_OK;
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < lo || x->valuedouble > hi ||
        (whole && x->valuedouble != floor(x->valuedouble)))
        return dd_error(DD_ERR_FORMAT, "%s: %s: expected %s in [%g, %g]", path, key, whole ? "an integer" : "a number", lo, hi);
    *v = x->valuedouble;
    return DD_OK;
}

static dd_status parse(const char *path, const cJSON *root, int insecure, dd_ps_cluster *c) {
    if (!cJSON_IsObject(root)) return dd_error(DD_ERR_FORMAT, "%s: expected a JSON object", path);
    static const char *const known[] = {"version", "servers", "vnodes", "replicas", "optimizer", "coordinator", NULL};
    for (const cJSON *it = root->child; it; it = it->next) {
        int ok = 0;
        for (int i = 0; known[i]; i++) ok |= strcmp(it->string, known[i]) == 0;
        if (!ok) return dd_error(DD_ERR_FORMAT, "%s: unknown field '%s' (known: version, servers, vnodes, replicas, optimizer, coordinator)", path, it->string);
    }
    double v = 1;
    DD_TRY(num(path, root, "version", 1, 1, 1, &v));
    double vn = DD_PS_DEFAULT_VNODES, rep = 1;
    DD_TRY(num(path, root, "vnodes", 1, 4096, 1, &vn));
    DD_TRY(num(path, root, "replicas", 0, DD_PS_MAX_SERVERS - 1, 1, &rep));
    c->vnodes = (int)vn;
    c->replicas = (int)rep;
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(root, "servers");
    if (!cJSON_IsArray(sv) || cJSON_GetArraySize(sv) < 1)
        return dd_error(DD_ERR_FORMAT, "%s: servers: expected a non-empty array of {name, address, public_key}", path);
    int n = cJSON_GetArraySize(sv);
    if (n > DD_PS_MAX_SERVERS) return dd_error(DD_ERR_FORMAT, "%s: servers: %d entries, at most %d", path, n, DD_PS_MAX_SERVERS);
    c->servers = calloc((size_t)n, sizeof *c->servers);
    if (!c->servers) return dd_error(DD_ERR_NOMEM, "cluster");
    c->n = (size_t)n;
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(sv, i);
        dd_ps_server_info *s = &c->servers[i];
        if (!cJSON_IsObject(e)) return dd_error(DD_ERR_FORMAT, "%s: servers[%d]: expected an object", path, i);
        for (const cJSON *it = e->child; it; it = it->next)
            if (strcmp(it->string, "name") != 0 && strcmp(it->string, "address") != 0 && strcmp(it->string, "public_key") != 0)
                return dd_error(DD_ERR_FORMAT, "%s: servers[%d]: unknown field '%s' (known: name, address, public_key)", path, i, it->string);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "address");
        if (!cJSON_IsString(a) || strncmp(a->valuestring, "tcp://", 6) != 0 || strlen(a->valuestring) >= sizeof s->address ||
            !strchr(a->valuestring + 6, ':'))
            return dd_error(DD_ERR_FORMAT, "%s: servers[%d].address: expected \"tcp://HOST:PORT\"", path, i);
        snprintf(s->address, sizeof s->address, "%s", a->valuestring);
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (nm && (!cJSON_IsString(nm) || !nm->valuestring[0] || strlen(nm->valuestring) >= sizeof s->name))
            return dd_error(DD_ERR_FORMAT, "%s: servers[%d].name: expected a string of 1..63 characters", path, i);
        snprintf(s->name, sizeof s->name, "%s", nm ? nm->valuestring : s->address + 6);
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, "public_key");
        if (k || !insecure) {
            if (!cJSON_IsString(k) || !dd_net_key_valid(k->valuestring))
                return dd_error(DD_ERR_FORMAT, "%s: servers[%d].public_key: expected a 40-character Z85 key (distdpd keygen writes NAME.pub)", path, i);
            snprintf(s->public_key, sizeof s->public_key, "%s", k->valuestring);
        }
        for (int j = 0; j < i; j++) {
            if (strcmp(c->servers[j].address, s->address) == 0)
                return dd_error(DD_ERR_FORMAT, "%s: servers[%d].address: '%s' is also servers[%d]'s", path, i, s->address, j);
            if (strcmp(c->servers[j].name, s->name) == 0)
                return dd_error(DD_ERR_FORMAT, "%s: servers[%d].name: '%s' is also servers[%d]'s", path, i, s->name, j);
        }
    }
    if (!cJSON_GetObjectItemCaseSensitive(root, "replicas")) c->replicas = n > 1 ? 1 : 0;
    if (c->replicas > n - 1)
        return dd_error(DD_ERR_FORMAT, "%s: replicas: %d replicas need at least %d servers, the file has %d", path, c->replicas, c->replicas + 1, n);
    const cJSON *co = cJSON_GetObjectItemCaseSensitive(root, "coordinator");
    if (co) { /* training (phase 2): where workers find the coordinator */
        if (!cJSON_IsObject(co)) return dd_error(DD_ERR_FORMAT, "%s: coordinator: expected an object {address, public_key}", path);
        for (const cJSON *it = co->child; it; it = it->next)
            if (strcmp(it->string, "address") != 0 && strcmp(it->string, "public_key") != 0)
                return dd_error(DD_ERR_FORMAT, "%s: coordinator: unknown field '%s' (known: address, public_key)", path, it->string);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(co, "address");
        if (!cJSON_IsString(a) || strncmp(a->valuestring, "tcp://", 6) != 0 || strlen(a->valuestring) >= sizeof c->coord_address ||
            !strchr(a->valuestring + 6, ':'))
            return dd_error(DD_ERR_FORMAT, "%s: coordinator.address: expected \"tcp://HOST:PORT\"", path);
        snprintf(c->coord_address, sizeof c->coord_address, "%s", a->valuestring);
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(co, "public_key");
        if (k || !insecure) {
            if (!cJSON_IsString(k) || !dd_net_key_valid(k->valuestring))
                return dd_error(DD_ERR_FORMAT, "%s: coordinator.public_key: expected a 40-character Z85 key (distdpd keygen writes NAME.pub)", path);
            snprintf(c->coord_key, sizeof c->coord_key, "%s", k->valuestring);
        }
    }
    c->optim = DD_OPTIM_SGD;
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
    if (op) {
        if (!cJSON_IsObject(op)) return dd_error(DD_ERR_FORMAT, "%s: optimizer: expected an object", path);
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(op, "kind");
        if (!cJSON_IsString(kind) || dd_optim_kind_parse(kind->valuestring, &c->optim) != DD_OK)
            return dd_error(DD_ERR_FORMAT, "%s: optimizer.kind: expected \"sgd\", \"adam\", \"adamw\" or \"rmsprop\"", path);
    }
    c->optim_cfg = dd_optim_cfg_default(c->optim);
    if (op) {
        struct { const char *k; double *v; double lo, hi; } f[] = {
            {"momentum", &c->optim_cfg.momentum, 0, 1}, {"dampening", &c->optim_cfg.dampening, 0, 1},
            {"beta1", &c->optim_cfg.beta1, 0, 1},       {"beta2", &c->optim_cfg.beta2, 0, 1},
            {"eps", &c->optim_cfg.eps, 0, 1},           {"weight_decay", &c->optim_cfg.weight_decay, 0, 1e6}};
        for (const cJSON *it = op->child; it; it = it->next) {
            int ok = strcmp(it->string, "kind") == 0 || strcmp(it->string, "nesterov") == 0;
            for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) ok |= strcmp(it->string, f[i].k) == 0;
            if (!ok)
                return dd_error(DD_ERR_FORMAT, "%s: optimizer: unknown field '%s' (known: kind, momentum, dampening, nesterov, beta1, beta2, eps, weight_decay; the learning rate comes with each push)", path, it->string);
        }
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
            char key[64];
            snprintf(key, sizeof key, "optimizer.%s", f[i].k);
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(op, f[i].k);
            if (x && (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < f[i].lo || x->valuedouble > f[i].hi))
                return dd_error(DD_ERR_FORMAT, "%s: %s: expected a number in [%g, %g]", path, key, f[i].lo, f[i].hi);
            if (x) *f[i].v = x->valuedouble;
        }
        const cJSON *nest = cJSON_GetObjectItemCaseSensitive(op, "nesterov");
        if (nest && !cJSON_IsBool(nest)) return dd_error(DD_ERR_FORMAT, "%s: optimizer.nesterov: expected true or false", path);
        c->optim_cfg.nesterov = nest && cJSON_IsTrue(nest);
        dd_optim *probe = NULL; /* validates the combination (e.g. nesterov without momentum) */
        dd_status s = dd_optim_create(dd_optim_kind_name(c->optim), &c->optim_cfg, 1, &probe);
        dd_optim_destroy(&probe);
        if (s) return dd_error_prefix(DD_ERR_FORMAT, "%s: optimizer: ", path);
    }
    return DD_OK;
}

dd_status dd_ps_cluster_read(const char *path, int insecure, dd_ps_cluster *c) {
    memset(c, 0, sizeof *c);
    char *text;
    DD_TRY(dd_read_text(path, &text, NULL));
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        size_t off = end ? (size_t)(end - text) : 0;
        free(text);
        return dd_error(DD_ERR_FORMAT, "%s: not valid JSON (near byte %zu)", path, off);
    }
    free(text);
    dd_status s = parse(path, root, insecure, c);
    cJSON_Delete(root);
    if (s) dd_ps_cluster_free(c);
    return s;
}
