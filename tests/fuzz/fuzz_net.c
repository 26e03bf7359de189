/* libFuzzer target: the parameter server's message header (dd_net_parse) and the
 * bounds-checked payload reader (dd_nrd_*) that every payload decoder uses.
 * Invariants: an accepted message re-encodes (dd_net_hdr_write) to the same 32 header
 * bytes and its payload is the rest of the input; a reader never reads past its end,
 * and once bad returns only zeros / NULL / "". */
#include "distdpd/net.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dd_fuzz_init();
    dd_net_hdr h;
    const uint8_t *pl = NULL;
    uint32_t limit = size > 4 ? (uint32_t)data[size - 1] * 16 : UINT32_MAX; /* also the oversized path */
    for (int pass = 0; pass < 2; pass++) {
        if (dd_net_parse(data, size, pass ? limit : UINT32_MAX, &h, &pl) == DD_OK) {
            uint8_t hdr[DD_NET_HEADER];
            if (pl != data + DD_NET_HEADER || h.len != size - DD_NET_HEADER) abort();
            dd_net_hdr_write(hdr, h.type, h.seq, h.sender, pl, h.len);
            if (memcmp(hdr, data, DD_NET_HEADER) != 0) abort();
        }
    }
    /* the reader, driven by the input: each op byte picks a read */
    dd_nrd r;
    dd_nrd_init(&r, data, size);
    char s[DD_NET_HEADER * 3];
    for (size_t i = 0; i < size && i < 64; i++) {
        int was_bad = r.bad;
        uint8_t op = data[i];
        uint64_t v = 0;
        switch (op % 7) {
        case 0: v = dd_nrd_u8(&r); break;
        case 1: v = dd_nrd_u16(&r); break;
        case 2: v = dd_nrd_u32(&r); break;
        case 3: v = dd_nrd_u64(&r); break;
        case 4: {
            double d = dd_nrd_f64(&r);
            memcpy(&v, &d, sizeof v);
            break;
        }
        case 5: v = (uintptr_t)dd_nrd_bytes(&r, op >> 3); break;
        default:
            dd_nrd_str(&r, s, 1 + (op >> 3) % sizeof s);
            v = (uint8_t)s[0];
            if (!r.bad && strlen(s) == 0) abort();
        }
        if (r.off > r.n) abort();
        if (was_bad && (v != 0 || !r.bad)) abort();
    }
    dd_error_clear();
    return 0;
}
