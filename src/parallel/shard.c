/* Sharding helpers shared by the data-parallel strategies (parallel.h): the names of the
 * --shard modes and the partition of a parameter arena over the ranks. */
#include <string.h>

#include "distdpd/parallel.h"

static const char *const shard_names[] = {"none", "zero1", "zero2", "zero3"};

dd_status dd_shard_parse(const char *name, dd_shard_mode *mode) {
    for (int i = 0; name && i < 4; i++)
        if (strcmp(name, shard_names[i]) == 0) {
            *mode = (dd_shard_mode)i;
            return DD_OK;
        }
    return dd_error(DD_ERR_ARG, "sharding mode '%s': expected none, zero1, zero2 or zero3", name ? name : "(null)");
}

const char *dd_shard_name(dd_shard_mode mode) {
    return (int)mode >= 0 && (int)mode < 4 ? shard_names[mode] : "?";
}

void dd_shard_partition(size_t n, int p, size_t *bounds) {
    if (p < 1) p = 1;
    size_t per = (n + (size_t)p - 1) / (size_t)p;
    per = (per + 15) / 16 * 16;
    for (int r = 0; r <= p; r++) {
        size_t b = (size_t)r * per;
        bounds[r] = b < n ? b : n;
    }
}
