/* Helper of the tests that build models: a model configuration from a "name=value,..."
 * list (dd_model_cfg_parse), by value. Header-only. */
#ifndef DD_TEST_MODEL_UTIL_H
#define DD_TEST_MODEL_UTIL_H

#include <string.h>

#include "distdpd/model.h"

/* The configuration of spec ("" or NULL: all defaults); a bad spec aborts the test
 * program, which is a bug in the test. */
static inline dd_model_cfg tm_mcfg(const char *spec) {
    dd_model_cfg c;
    memset(&c, 0, sizeof c);
    if (spec && dd_model_cfg_parse(&c, spec) != DD_OK) abort();
    return c;
}

#endif
