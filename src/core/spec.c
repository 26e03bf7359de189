/* Default signal specification (matches OpenDPD's DPA_200MHz spec.json). */
#include "distdpd/spec.h"

void dd_spec_default(dd_spec *s) {
    s->fs = 800e6;
    s->bw_main = 200e6;
    s->bw_sub = 20e6;
    s->n_sub = 10;
    s->nperseg = 2560;
    s->bw_occupied = 0.0;
    s->split[0] = 0.6;
    s->split[1] = 0.2;
    s->split[2] = 0.2;
}
