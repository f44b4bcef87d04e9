/* t_model_frames.c -- every stack of a dump as the report's model reads it
 * (tests/integration/test_reader_mem.py).
 *
 * Prints, for each stack, "stack S frames N site I through J" and then each
 * frame from vm_stack_frame(d, S, i), innermost first, as
 * "FUNCTION|FILE|LINE|MODULE|OFFSET|ADDRESS|PYTHON" ("-" for no string);
 * says "MISMATCH stack S frame i" where vm_stack_frames or vm_stack_flat
 * disagree with it, or vm_site with frame `site`. Exit status 1 when the
 * dump cannot be read or a mismatch was found. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../../cli/model.h"

static const char *s(const char *v) { return v ? v : "-"; }

static int same(const struct vt_frame *a, const struct vt_frame *b) {
    return a->function == b->function && a->file == b->file && a->module == b->module && a->line == b->line &&
           a->offset == b->offset && a->address == b->address && a->python == b->python;
}

int main(int argc, char **argv) {
    struct vm_dump d;
    char err[512];
    if (argc != 2 || vm_load(argv[1], &d, err, sizeof err) != 0) {
        fprintf(stderr, "t_model_frames: %s\n", argc == 2 ? err : "usage: t_model_frames DUMP");
        return 1;
    }
    int bad = 0;
    for (size_t k = 0; k < d.nstacks; k++) {
        const struct vm_stack *st = &d.stacks[k];
        printf("stack %zu frames %u site %d through %d\n", k, (unsigned)st->nframes, st->site, st->through);
        const struct vt_frame *const *all = vm_stack_frames(&d, k);
        for (size_t i = 0; i < st->nframes; i++) {
            const struct vt_frame *f = vm_stack_frame(&d, k, i);
            const struct vt_frame *flat = vm_stack_flat(&d, k);
            if (!f || !all || all[i] != f || !flat || !same(&flat[i], f) ||
                ((int)i == st->site && vm_site(&d, k) != f)) {
                printf("MISMATCH stack %zu frame %zu\n", k, i);
                bad = 1;
                continue;
            }
            printf("%s|%s|%ld|%s|0x%" PRIx64 "|0x%" PRIx64 "|%d\n", s(f->function), s(f->file), f->line, s(f->module),
                   f->offset, f->address, f->python);
        }
        if (vm_stack_frame(&d, k, st->nframes) || (st->nframes == 0 && (all || vm_stack_flat(&d, k)))) {
            printf("MISMATCH stack %zu past its end\n", k);
            bad = 1;
        }
    }
    vm_free(&d);
    return bad;
}
