/* Helpers shared by the planners of src/comm (plan_shard.c, plan_mp.c): sizes the trainer
 * allocates, computed the way it computes them. Internal to libdistdpd. */
#ifndef DISTDPD_PLAN_INTERNAL_H
#define DISTDPD_PLAN_INTERNAL_H

#include <stddef.h>

#include "distdpd/model.h"

/* Floats of the evaluation buffers the trainer allocates on a rank that runs evaluation
 * forwards (src/train/trainer.c setup_eval): the workspaces of model m (and of the frozen
 * PA model pa, may be NULL) for eb = min(eval_batch, eval_segments) segments of nperseg
 * samples per call (eval_segments 0: eval_batch), fewer segments while they exceed
 * DD_TRAIN_EVAL_WS_CAP bytes and none when even one does (streamed), plus the DPD's
 * output buffer when there is a PA model; 16 floats of slack per workspace. */
size_t dd_plan_eval_floats(const dd_model *m, const dd_model *pa, size_t eval_batch, size_t eval_segments,
                           size_t nperseg);

#endif
