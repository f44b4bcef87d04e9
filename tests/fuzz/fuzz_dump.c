/* fuzz_dump.c -- libFuzzer target for the dump reader and every report
 * format: whatever the bytes, vm_load_buffer either refuses them with a
 * reason or yields a model that every writer can turn into output; read
 * with the events only counted (VM_LOAD_COUNT_EVENTS), as the writers that
 * need no event are given it, it refuses the same bytes with the same
 * reason and counts what the kept events hold. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/model.h"
#include "../../cli/reporters.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct vm_dump d, c;
    char err[512], cerr[512];
    int rc = vm_load_buffer((const char *)data, size, 0, "fuzz", &d, err, sizeof err);
    int crc = vm_load_buffer((const char *)data, size, VM_LOAD_COUNT_EVENTS, "fuzz", &c, cerr, sizeof cerr);
    if (rc != crc || (rc != 0 && strcmp(err, cerr) != 0)) abort();
    if (rc != 0) return 0;
    uint64_t allocs = 0, frees = 0, ooms = 0, first_oom = 0;
    struct vm_ev_cursor cur;
    struct vm_event e;
    for (vm_ev_from(&cur, &d.events, 0); vm_ev_next(&cur, &e);) {
        if (e.type == 'a') allocs++;
        else if (e.type == 'f') frees++;
        else if (ooms++ == 0) first_oom = e.time_ns;
    }
    /* The packed events read the same in order, one by one and backward. */
    struct vm_ev_back back;
    struct vm_event b;
    vm_ev_back_from_end(&back, &d.events);
    for (size_t i = d.events.n; i-- > 0;) {
        e = vm_event_at(&d.events, i);
        if (!vm_ev_prev(&back, &b) || back.i != i || memcmp(&e, &b, sizeof e) != 0) abort();
        vm_ev_from(&cur, &d.events, i);
        if (!vm_ev_next(&cur, &b) || memcmp(&e, &b, sizeof e) != 0) abort();
    }
    if (vm_ev_prev(&back, &b)) abort();
    if (d.events.n != d.nevents || c.events.n || c.nevents != d.nevents || c.event_counts.allocs != allocs || c.event_counts.frees != frees ||
        c.event_counts.ooms != ooms || c.event_counts.first_oom_ns != first_oom ||
        memcmp(&c.event_counts, &d.event_counts, sizeof c.event_counts) != 0)
        abort();
    static const enum vr_moment moments[] = {VR_AT_EXIT, VR_AT_PEAK, VR_AT_OOM};
    for (const struct vt_reporter *r = vt_reporters; r->name; r++) {
        struct vr_input in = {.dumps = r->needs_events ? &d : &c, .n = 1};
        for (size_t m = 0; m < 3; m++) {
            FILE *f = fopen("/dev/null", "w");
            if (!f) break;
            struct vr_opts o = {moments[m], 5};
            r->write(f, &in, &o, err, sizeof err);
            fclose(f);
        }
    }
    vm_free(&d);
    vm_free(&c);
    return 0;
}
