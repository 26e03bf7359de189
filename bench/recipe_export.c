/* Exports what distdpd's trainer would start from, so that the PyTorch twin of the
 * reference recipe (bench/torch_recipe.py) trains the same problem: the initial
 * parameters of a model (dd_model_init with the run's seed, names as torch state_dict
 * keys) and the frame order of each epoch (dd_sampler_index: the keyed Feistel
 * permutation the trainer uses). Output: one JSON object
 *   {"model": "gru", "hidden": 23, "seed": 0, "frames": N, "epochs": E,
 *    "params": {"rnn.weight_ih_l0": {"shape": [69, 2], "data": [...]}, ...},
 *    "order": [[epoch 0 positions 0..N-1], [epoch 1 ...], ...]}
 * Floats are printed with %.9g (exact round trip of float32).
 *
 * Build: see bench/run.sh. Usage:
 *   recipe_export MODEL HIDDEN SEED FRAMES EPOCHS OUT.json
 * FRAMES is the number of training frames, floor((n - F) / S) + 1 (22,841 on
 * DPA_200MHz with F 200, S 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distdpd/model.h"
#include "distdpd/train.h"

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: recipe_export MODEL HIDDEN SEED FRAMES EPOCHS OUT.json\n");
        return 2;
    }
    const char *name = argv[1], *out = argv[6];
    dd_model_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    dd_model_cfg_set(&cfg, "hidden", atoi(argv[2]));
    uint64_t seed = strtoull(argv[3], NULL, 10);
    uint64_t frames = strtoull(argv[4], NULL, 10);
    int epochs = atoi(argv[5]);
    if (atoi(argv[2]) < 1 || frames < 1 || epochs < 1) {
        fprintf(stderr, "recipe_export: HIDDEN, FRAMES and EPOCHS must be >= 1\n");
        return 2;
    }
    dd_model *m = NULL;
    if (dd_model_create(name, &cfg, &m) != DD_OK) {
        fprintf(stderr, "recipe_export: %s\n", dd_last_error());
        return 1;
    }
    const dd_param_table *t = dd_model_params(m);
    float *p = dd_calloc(t->total, sizeof(float));
    FILE *f = fopen(out, "w");
    if (!p || !f) {
        fprintf(stderr, "recipe_export: cannot allocate or open %s\n", out);
        return 1;
    }
    dd_model_init(m, p, seed);
    fprintf(f, "{\"model\": \"%s\", \"hidden\": %d, \"seed\": %llu, \"frames\": %llu, \"epochs\": %d,\n",
            name, dd_model_cfg_get(dd_model_config(m), "hidden"), (unsigned long long)seed, (unsigned long long)frames,
            epochs);
    fprintf(f, "\"params\": {");
    for (size_t e = 0; e < t->count; e++) {
        const dd_param_entry *pe = &t->entries[e];
        fprintf(f, "%s\n\"%s\": {\"shape\": [", e ? "," : "", pe->name);
        for (int d = 0; d < pe->ndim; d++) fprintf(f, "%s%zu", d ? ", " : "", pe->shape[d]);
        fprintf(f, "], \"data\": [");
        for (size_t i = 0; i < pe->size; i++) fprintf(f, "%s%.9g", i ? "," : "", p[pe->offset + i]);
        fprintf(f, "]}");
    }
    fprintf(f, "},\n\"order\": [");
    dd_sampler s;
    if (dd_sampler_init(&s, frames, seed, 1) != DD_OK) {
        fprintf(stderr, "recipe_export: %s\n", dd_last_error());
        return 1;
    }
    for (int e = 0; e < epochs; e++) {
        fprintf(f, "%s\n[", e ? "," : "");
        for (uint64_t i = 0; i < frames; i++)
            fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)dd_sampler_index(&s, (uint64_t)e, i));
        fprintf(f, "]");
    }
    fprintf(f, "]}\n");
    int bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = 1;
    dd_free(p);
    dd_model_destroy(&m);
    if (bad) {
        fprintf(stderr, "recipe_export: write error on %s\n", out);
        return 1;
    }
    return 0;
}
