/* fuzz_dump.c -- libFuzzer target for the dump reader and every report
 * format: whatever the bytes, vm_load_buffer either refuses them with a
 * reason or yields a model that every writer can turn into output. */
#include <stdint.h>
#include <stdio.h>

#include "../../cli/model.h"
#include "../../cli/reporters.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct vm_dump d;
    char err[512];
    if (vm_load_buffer((const char *)data, size, "fuzz", &d, err, sizeof err) != 0) return 0;
    struct vr_input in = {&d, 1};
    static const enum vr_moment moments[] = {VR_AT_EXIT, VR_AT_PEAK, VR_AT_OOM};
    for (const struct vt_reporter *r = vt_reporters; r->name; r++) {
        for (size_t m = 0; m < 3; m++) {
            FILE *f = fopen("/dev/null", "w");
            if (!f) break;
            struct vr_opts o = {moments[m], 5};
            r->write(f, &in, &o, err, sizeof err);
            fclose(f);
        }
    }
    vm_free(&d);
    return 0;
}
