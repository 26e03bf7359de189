/* Model of library behaviour for the static analyzer, included only by `make lint`
 * (clang-tidy --extra-arg=-include...; never part of a build). The analyzer does not see
 * into libcjson, so it does not know that cJSON's type tests are false for NULL, and after
 * `if (!cJSON_IsNumber(x)) return ...;` it still follows x == NULL into x->valuedouble.
 * These macros say what the library does (cJSON.c: `if (item == NULL) return false;`). */
#ifndef DD_LINT_MODEL_H
#define DD_LINT_MODEL_H
#include <cjson/cJSON.h>
#define cJSON_IsNumber(x) ((x) != NULL && (cJSON_IsNumber)(x))
#define cJSON_IsString(x) ((x) != NULL && (cJSON_IsString)(x))
#define cJSON_IsArray(x) ((x) != NULL && (cJSON_IsArray)(x))
#define cJSON_IsObject(x) ((x) != NULL && (cJSON_IsObject)(x))
#define cJSON_IsBool(x) ((x) != NULL && (cJSON_IsBool)(x))
#define cJSON_IsTrue(x) ((x) != NULL && (cJSON_IsTrue)(x))
#define cJSON_IsNull(x) ((x) != NULL && (cJSON_IsNull)(x))
#endif
