/* Model export and import (docs/deploy.md): a model's parameters as named float32
 * tensors in NumPy's .npz or in safetensors (the parameter names are the PyTorch
 * state_dict names of the equivalent torch module, OpenDPD's backbone names: a PyTorch
 * user loads them with load_state_dict), the reverse (a tensor file into a model's
 * parameter arena, by name, every shape checked), and C code generation: a
 * self-contained C99 source + header that runs a trained model sample by sample, in
 * float32 or in fixed point (int16 / int8) with the loss of fixed point measured here.
 */
#ifndef DISTDPD_EXPORT_H
#define DISTDPD_EXPORT_H

#include <stddef.h>

#include "distdpd/core.h"
#include "distdpd/model.h"
#include "distdpd/param.h"
#include "distdpd/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tensor files ---------------------------------------------------------------- */

typedef enum { DD_TENSORS_NPZ = 0, DD_TENSORS_SAFETENSORS = 1 } dd_tensor_format;

/* Writes every entry of table t (names, shapes, float32 values from the arena params),
 * each name prefixed with `prefix` (NULL or "": none; OpenDPD's full-model state_dict
 * uses "backbone."), to path, atomically:
 *   npz: a zip archive (libzip, stored) of NAME.npy files (NPY format 1.0, '<f4', C order);
 *   safetensors: u64 little-endian header length, the JSON header (dtype "F32", shape,
 *   data_offsets; "__metadata__" holds the string pairs meta[0..2*nmeta), e.g. "model",
 *   "gru"), space-padded to a multiple of 8, then the raw little-endian data.
 * Errors: DD_ERR_IO naming the file, DD_ERR_NOMEM, DD_ERR_ARG. */
dd_status dd_tensors_write(dd_tensor_format fmt, const char *path, const dd_param_table *t, const float *params,
                           const char *prefix, const char *const *meta, size_t nmeta);

/* Tensors read from a file (float32; float64 files are converted). */
typedef struct {
    char name[DD_PARAM_NAME_MAX + 32];
    int ndim;                      /* 0..4 */
    size_t shape[DD_PARAM_MAX_NDIM];
    size_t size;                   /* product of the shape */
    float *data;                   /* owned */
} dd_tensor;
typedef struct {
    dd_tensor *t;
    size_t n;
    char meta_model[64];           /* safetensors "__metadata__" "model" ("" if none) */
    char meta_opts[256];           /* and "model_opts" */
} dd_tensor_set;

/* Reads an .npz (zip of .npy files; NPY 1.0-3.0, '<f4' or '<f8', C order) or a
 * safetensors file (F32 or F64), recognised by content. Every malformed field is
 * DD_ERR_FORMAT naming the file and the member or key. Free with dd_tensors_free. */
dd_status dd_tensors_read(const char *path, dd_tensor_set *out);
void dd_tensors_free(dd_tensor_set *s);

/* Fills the arena params (laid out by t, zero padding) from s by name: a tensor named
 * NAME or PREFIX.NAME for any prefix ending in '.' that is not itself a parameter name
 * (e.g. OpenDPD's "backbone."), with exactly the entry's shape (a 1-D tensor also fills a
 * 2-D entry with the same number of values only if the shapes agree: no reshaping).
 * Errors (DD_ERR_MISMATCH, naming `where`, the tensor and both shapes): a missing
 * parameter, a wrong shape, a tensor the model has no parameter for; DD_ERR_RANGE: a
 * value that is not finite. */
dd_status dd_tensors_to_params(const dd_tensor_set *s, const dd_param_table *t, const char *where, float *params);

/* A new run directory `out` (created; refused when it already holds a best.ckpt) whose
 * best.ckpt and last.ckpt hold the tensors of file `tensors` (dd_tensors_read) as the
 * trained model of configuration cfg on data set `data` (the trainer's checkpoint of
 * epoch 0: `distdpd eval`, `run` and `export` read it; import.json records the source).
 * cfg->model "" takes the file's "__metadata__" model (else "gru"); model options cfg
 * leaves unset come from the metadata's model_opts, else "hidden" from
 * rnn.weight_hh_l0's shape and "layers" from the number of rnn.weight_ih_l<k>. A DPD
 * task needs pa_run (its best PA model is frozen into the checkpoints). desc (may be
 * NULL) receives the model's description. Errors name the file and the tensor. */
dd_status dd_run_import(const char *tensors, const dd_train_cfg *cfg, const char *data, const char *pa_run,
                        const char *out, char *desc, size_t cap);

/* ONNX (IR 7, opset 13) of a gru model (DD_EXPORT_ONNX_MODELS):
 * input "x" (T, B, 2) float, output "y" (T, B, 2), time first (ONNX GRU layout 0), zero
 * initial state; one GRU node per layer (linear_before_reset = 1, gate blocks permuted
 * to ONNX's z, r, h), Squeeze, MatMul, Add. Errors: DD_ERR_UNSUPPORTED, DD_ERR_IO. */
dd_status dd_export_onnx(const dd_model *m, const float *params, const char *path);

/* ---- C code generation ----------------------------------------------------------- */

/* The models --format c supports (gru and lstm with any hidden size and number of
 * layers, and OpenDPD's dgru); 1 when m is one of them. --format onnx supports gru. */
int dd_export_c_supported(const dd_model *m);
#define DD_EXPORT_C_MODELS "gru, lstm, dgru"
#define DD_EXPORT_ONNX_MODELS "gru"

typedef struct {
    int bits;            /* 0: float32; 16 or 8: fixed point */
    const char *prefix;  /* C identifier prefix of the generated API (e.g. "dpd") */
    const char *about;   /* one line for the header comment (run, task, epoch) */
    /* fixed point: the calibration signal (the model's inputs on the training split) */
    const dd_cf32 *calib;
    size_t ncalib;
} dd_export_c_opts;

/* The fixed-point formats an export chose (fraction bits: value = integer * 2^-frac). */
typedef struct {
    int x_frac, y_frac;  /* input and output samples */
    int w_frac[4 * 64 + 4]; /* per tensor in table order (4 per layer, up to 64 layers, and
                               the head's): weights' formats; biases' are the accumulator
                               formats of their layer */
    size_t nw;
    double x_max, y_max; /* calibrated |I|, |Q| maxima of the input and output */
    int feat_frac[6], feat_up[6]; /* dgru: each feature's format, and the left shift of its
                                     products to the finest of them */
    int hid_frac;                 /* dgru: ReLU(fc_hid)'s output */
} dd_export_q;

/* A model prepared for the runtime (float or quantised), usable by dd_export_c_run. */
typedef struct dd_export_c dd_export_c;

/* Prepares model m (a supported model) with parameters params; fixed point calibrates on
 * opts->calib (required then). Errors: DD_ERR_UNSUPPORTED naming the supported models,
 * DD_ERR_ARG, DD_ERR_NOMEM. */
dd_status dd_export_c_create(const dd_model *m, const float *params, const dd_export_c_opts *opts, dd_export_c **out);
void dd_export_c_destroy(dd_export_c **e);
/* Its formats (fixed point). */
const dd_export_q *dd_export_c_formats(const dd_export_c *e);
/* Runs x (n samples) through the runtime the generated code contains (the same
 * arithmetic, bit for bit in fixed point), from zero state, into y. */
dd_status dd_export_c_run(const dd_export_c *e, const dd_cf32 *x, dd_cf32 *y, size_t n);
/* Writes the generated source to c_path and the header to h_path (the source includes
 * the header by its base name). Errors: DD_ERR_IO naming the file. */
dd_status dd_export_c_write(const dd_export_c *e, const char *c_path, const char *h_path);

#ifdef __cplusplus
}
#endif
#endif
