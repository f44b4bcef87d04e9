/* model_label.c -- the names of a dump's frames and call sites (model.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/callsite.h"
#include "../common/format.h"
#include "model.h"

static const char *base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

char *vm_clamp_name(char *s) { return vt_clamp_name(s, VM_NAME_MAX); }

const char *vm_frame_label(const struct vt_frame *f, char *buf, size_t size) {
    /* An empty name (a hostile or damaged dump) is no name: a frame of no
     * text is an empty frame to a flame graph's reader. */
    const char *fn = f->function && f->function[0] ? f->function : NULL;
    if (fn && vt_frame_is_cut(f)) snprintf(buf, size, "%s", fn);
    else if (f->python && fn && f->file) snprintf(buf, size, "%s (%s:%ld)", fn, base(f->file), f->line);
    else if (fn) snprintf(buf, size, "%s", fn);
    else if (f->module && f->module[0]) snprintf(buf, size, "%s+0x%" PRIx64, base(f->module), f->offset);
    else snprintf(buf, size, "0x%" PRIx64, f->address);
    return vt_utf8_whole(buf, size);
}

int vm_event_kind_index(struct vm_dump *d, const char *k) {
    for (size_t i = 0; i < d->nevent_kinds; i++)
        if (d->event_kinds[i] == k || strcmp(d->event_kinds[i], k) == 0) return (int)i;
    if (d->nevent_kinds == VM_EVENT_KINDS) return -1;
    d->event_kinds[d->nevent_kinds] = k;
    return (int)d->nevent_kinds++;
}

const struct vt_frame *vm_site(const struct vm_dump *d, size_t stack) {
    if (stack >= d->nstacks || d->stacks[stack].site < 0) return NULL;
    return vm_stack_frame(d, stack, (size_t)d->stacks[stack].site);
}

const char *vm_site_label(const struct vm_dump *d, size_t stack, char *buf, size_t size) {
    const struct vt_frame *site = vm_site(d, stack);
    int t = site ? d->stacks[stack].through : -1;
    return vt_site_label_of(site, t >= 0 ? vm_stack_frame(d, stack, (size_t)t) : NULL, buf, size);
}
