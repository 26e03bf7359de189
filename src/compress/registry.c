/* The compressor registry: the one list of gradient codecs selectable by name
 * (--compress NAME, dd_compress_names(), `distdpd compressors`). Adding a compressor is
 * one file in src/compress/ (ending in DD_CODEC_DEFINE(NAME, ...), compress_impl.h) plus
 * one X(NAME) line here. Order = display order in `distdpd compressors` and the
 * "choices" of an unknown name. */
#include <string.h>

#include "compress/compress_impl.h"

#define DD_CODECS(X) \
    X(none)          \
    X(fp32)          \
    X(fp16)          \
    X(bf16)          \
    X(int8)          \
    X(int4)          \
    X(sign)          \
    X(topk)          \
    X(randk)         \
    X(powersgd)      \
    X(dgc)

#define DD_DECLARE(n) extern const dd_codec dd_codec_##n;
DD_CODECS(DD_DECLARE)
#undef DD_DECLARE

#define DD_ENTRY(n) &dd_codec_##n,
static const dd_codec *const registry[] = {DD_CODECS(DD_ENTRY)};
#undef DD_ENTRY

#define DD_NAME(n) #n,
static const char *const names[] = {DD_CODECS(DD_NAME) NULL}; /* = each entry's .name */
#undef DD_NAME

const dd_codec *const *dd_codec_registry(size_t *count) {
    if (count) *count = sizeof registry / sizeof registry[0];
    return registry;
}

const dd_codec *dd_codec_find(const char *name) {
    for (size_t i = 0; name && i < sizeof registry / sizeof registry[0]; i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    return NULL;
}

const char *const *dd_compress_names(void) { return names; }
