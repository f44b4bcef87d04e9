/* dump.c -- writing the JSON dump. */
#include <inttypes.h>
#include <stdlib.h>

#include "analysis.h"
#include "dump.h"
#include "torch.h"
#include "../common/format.h"
#include "../common/warn.h"

#define U64 "%" PRIu64

static void hex(FILE *f, uint64_t v) { fprintf(f, "\"0x%" PRIx64 "\"", v); }

static const char *event_name(int type) {
    switch (type) {
    case VT_EV_ALLOC: return "alloc";
    case VT_EV_FREE: return "free";
    default: return "oom";
    }
}

/* The counters of common/counters.h of `c` (a device or the totals), each
 * as ,"NAME":VALUE, the first without the comma when sep is "". */
#define WRITE_COUNTER(name)                                         \
    do {                                                            \
        fprintf(f, "%s\"" #name "\":" U64, sep, c->name);           \
        sep = ",";                                                  \
    } while (0);

static void write_devices(FILE *f, const struct vt_snapshot *s) {
    fputs("\"devices\":[", f);
    int first = 1;
    for (int i = 0; i < s->ndevices; i++) {
        const struct vt_device *d = &s->devices[i];
        if (!d->used) continue;
        fprintf(f, "%s\n {\"ordinal\":%d,\"name\":", first ? "" : ",", i);
        vt_json_string(f, d->have_facts ? d->name : NULL);
        fputs(",\"uuid\":", f);
        vt_json_string(f, d->have_facts && d->uuid[0] ? d->uuid : NULL);
        fprintf(f, ",\"total_bytes\":" U64, d->total_bytes);
        const struct vt_device *c = d;
        const char *sep = ",";
        VT_COUNTERS(WRITE_COUNTER)
        fputc('}', f);
        first = 0;
    }
    fputs("],\n", f);
}

static void write_totals(FILE *f, const struct vt_snapshot *s) {
    const struct vt_totals *t = &s->totals;
    const struct vt_totals *c = t;
    const char *sep = "";
    fputs("\"totals\":{", f);
    VT_COUNTERS(WRITE_COUNTER)
    fprintf(f, ",\"unknown_frees\":" U64 ",\"missed\":" U64 ",\"records_lost\":" U64 "},\n", t->unknown_frees,
            t->missed, vt_records_lost_count());
    fprintf(f, "\"host_memory\":{\"live_bytes\":" U64 ",\"live_count\":" U64
               ",\"peak_bytes\":" U64 "},\n",
            t->host_live_bytes, t->host_live_count, t->host_peak_bytes);
    fprintf(f, "\"imported_memory\":{\"live_bytes\":" U64 ",\"live_count\":" U64 "},\n",
            t->imported_live_bytes, t->imported_live_count);
}

static void write_holder_list(FILE *f, const struct vt_holder *h, size_t n, const char *sep) {
    fputc('[', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%s{\"stack\":%" PRIu32 ",\"bytes\":" U64 ",\"count\":" U64 "}",
                i ? "," : "", sep, h[i].stack, h[i].bytes, h[i].count);
    fputc(']', f);
}

static void write_findings(FILE *f, const struct vt_oom_findings *fs) {
    fputs(",\"findings\":[", f);
    for (int k = 0; k < fs->n; k++) {
        fputs(k ? ",{\"id\":" : "{\"id\":", f);
        vt_json_string(f, fs->f[k].id);
        fputs(",\"finding\":", f);
        vt_json_string(f, fs->f[k].text);
        fputs(",\"next\":", f);
        vt_json_string(f, fs->f[k].next);
        fputc('}', f);
    }
    fputc(']', f);
}

static void write_ooms(FILE *f, const struct vt_snapshot *s, const struct vt_analysis *an) {
    fputs("\"ooms\":[", f);
    for (size_t i = 0; i < s->nooms; i++) {
        const struct vt_oom *o = &s->ooms[i];
        fprintf(f, "%s\n {\"requested_bytes\":" U64 ",\"api\":", i ? "," : "", o->requested);
        vt_json_string(f, o->api);
        fprintf(f, ",\"kind\":\"%s\",\"device\":%d,\"stack\":%" PRIu32 ",\"thread\":%d",
                vt_kind_name(o->kind), o->device, o->stack, o->thread);
        if (o->have_info)
            fprintf(f, ",\"free_bytes\":" U64 ",\"total_bytes\":" U64, o->free_bytes,
                    o->total_bytes);
        else
            fputs(",\"free_bytes\":null,\"total_bytes\":null", f);
        fprintf(f, ",\"live_bytes\":" U64 ",\"time_ns\":" U64 ",\"holders\":", o->live_bytes,
                o->time_ns);
        if (o->holders) write_holder_list(f, o->holders, o->nholders, "");
        else fputs("null", f);
        fprintf(f, ",\"budget\":%s,\"other_processes\":", o->budget ? "true" : "false");
        if (o->procs) {
            fputc('[', f);
            for (uint32_t k = 0; k < o->nprocs; k++) {
                const struct vt_proc *p = &o->procs[k];
                fprintf(f, "%s{\"pid\":%d,\"name\":", k ? "," : "", p->pid);
                vt_json_string(f, p->name[0] ? p->name : NULL);
                if (p->used_bytes == UINT64_MAX) fputs(",\"used_bytes\":null}", f);
                else fprintf(f, ",\"used_bytes\":" U64 "}", p->used_bytes);
            }
            fputc(']', f);
        } else {
            fputs("null", f);
        }
        if (i < an->nfindings) write_findings(f, &an->findings[i]);
        vt_torch_write_oom(f, s, i);
        fputc('}', f);
    }
    fputs("],\n", f);
}

static void write_holders(FILE *f, const struct vt_snapshot *s, const struct vt_analysis *an) {
    fputs("\"holders\":", f);
    write_holder_list(f, an->holders, an->nholders, "\n ");
    fputs(",\n\"peak_holders\":", f);
    write_holder_list(f, s->peak_holders, s->npeak_holders, "\n ");
    fputs(",\n", f);
}

static void write_live(FILE *f, const struct vt_snapshot *s) {
    fputs("\"live\":[", f);
    for (size_t i = 0; i < s->nlive; i++) {
        const struct vt_alloc *a = &s->live[i];
        fprintf(f, "%s\n {\"address\":", i ? "," : "");
        int by_handle = vt_kind_space(a->kind) == VT_SPACE_HANDLE;
        hex(f, by_handle && a->mapped ? a->mapped : a->address);
        if (by_handle) {
            fputs(",\"handle\":", f);
            hex(f, a->address);
        }
        fprintf(f, ",\"bytes\":" U64 ",\"kind\":\"%s\",\"api\":", a->bytes,
                vt_kind_name(a->kind));
        vt_json_string(f, a->api);
        fprintf(f, ",\"device\":%d,\"stack\":%" PRIu32 ",\"thread\":%d,\"time_ns\":" U64 "}",
                a->device, a->stack, a->thread, a->time_ns);
    }
    fputs("],\n", f);
}

static void write_events(FILE *f, const struct vt_snapshot *s) {
    fprintf(f, "\"events_dropped\":" U64 ",\n", s->events_dropped);
    fputs("\"event_fields\":[\"time_ns\",\"type\",\"address\",\"bytes\",\"device\",\"stack\",\"kind\"],\n", f);
    fputs("\"events\":[", f);
    for (size_t i = 0; i < s->nevents; i++) {
        const struct vt_event *e = &s->events[i];
        fprintf(f, "%s\n[" U64 ",\"%s\",", i ? "," : "", e->time_ns, event_name(e->type));
        hex(f, e->address);
        fprintf(f, "," U64 ",%d,%" PRIu32 ",\"%s\"]", e->bytes, e->device, e->stack,
                vt_kind_name(e->kind));
    }
    fputs("],\n", f);
}

/* The step boundaries, oldest first, each with the index in "events" of
 * the first event after it (vt_step_event). */
static void write_steps(FILE *f, const struct vt_snapshot *s) {
    fprintf(f, "\"steps_total\":" U64 ",\n\"steps\":[", s->steps_total);
    for (size_t i = 0; i < s->nsteps; i++)
        fprintf(f, "%s\n {\"step\":" U64 ",\"time_ns\":" U64 ",\"event\":%" PRId64 "}", i ? "," : "",
                s->steps[i].step, s->steps[i].time_ns, vt_step_event(s, &s->steps[i]));
    fputs("],\n", f);
}

static void write_stacks(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym) {
    fputs("\"stacks\":[", f);
    for (size_t i = 0; i < s->nstacks; i++) {
        const struct vt_stack *st = s->stacks[i];
        fprintf(f, "%s\n {\"frames\":[", i ? "," : "");
        for (uint32_t j = 0; j < st->depth; j++) {
            const struct vt_frame *fr = sym && i < sym->nstacks && sym->stacks[i]
                                            ? &sym->stacks[i][j] : NULL;
            fputs(j ? ",{\"function\":" : "{\"function\":", f);
            vt_json_string(f, fr ? fr->function : NULL);
            fputs(",\"file\":", f);
            vt_json_string(f, fr ? fr->file : NULL);
            fprintf(f, ",\"line\":%ld,\"module\":", fr ? fr->line : 0L);
            vt_json_string(f, fr ? fr->module : NULL);
            fputs(",\"offset\":", f);
            hex(f, fr ? fr->offset : 0);
            fputs(",\"address\":", f);
            hex(f, fr && fr->python ? 0 : st->frames[j]);
            fputs(fr && fr->python ? ",\"python\":true" : ",\"python\":false", f);
            fputs(fr && fr->borrowed ? ",\"borrowed\":true}" : "}", f);
        }
        /* The call site's frames as this process chose them
         * (common/callsite.h: its VRAMTRACE_APP and VRAMTRACE_LIBRARY). */
        int site = sym && i < sym->nstacks && sym->stacks[i] ? sym->site[i] : -1;
        fprintf(f, "],\"site\":%d,\"through\":%d}", site, site >= 0 ? sym->through[i] : -1);
    }
    fputs("]\n", f);
}

int vt_dump_write(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                  const struct vt_analysis *an, const struct vt_dump_meta *m) {
    fputs("{\"format\":\"vramtrace-dump\",\"version\":1,\"reason\":", f);
    vt_json_string(f, m->reason);
    fprintf(f, ",\"pid\":%d,", m->pid);
    /* Right after the pid, in the first bytes: output.c reads them back to
     * tell an earlier image of this process (it exec'd) from another. */
    if (m->boot_id) fprintf(f, "\"boot_id\":\"%s\",\"process_start\":%llu,", m->boot_id, m->process_start);
    fprintf(f, "\"rank\":%d,\"local_rank\":%d,\"host\":", m->rank, m->local_rank);
    vt_json_string(f, m->host);
    fputs(",\"argv\":[", f);
    for (int i = 0; i < m->argc; i++) {
        if (i) fputc(',', f);
        vt_json_string(f, m->argv[i]);
    }
    fprintf(f, "],\"start_unix_ns\":" U64 ",\"time_ns\":" U64 ",\n", s->start_unix_ns,
            s->now_ns);
    if (m->python_version)
        fprintf(f, "\"python\":\"%lu.%lu.%lu\",\n", m->python_version >> 24, (m->python_version >> 16) & 0xff,
                (m->python_version >> 8) & 0xff);
    if (m->forecast && m->forecast[0]) {
        fputs("\"forecast\":", f);
        vt_json_string(f, m->forecast);
        fputs(",\n", f);
    }
    write_devices(f, s);
    write_totals(f, s);
    write_ooms(f, s, an);
    write_holders(f, s, an);
    fputs("\"growing\":[", f);
    for (size_t i = 0; i < an->ngrowth; i++) {
        const struct vt_growth *g = &an->growth[i];
        struct vt_growth_rate r = vt_growth_rate(g);
        fprintf(f, "%s\n {\"stack\":%" PRIu32 ",\"first_bytes\":" U64 ",\"end_bytes\":" U64
                   ",\"allocations\":" U64 ",\"since_ns\":" U64 ",\"last_ns\":" U64
                   ",\"bytes_per_allocation\":" U64 ",\"bytes_per_second\":%.0f}",
                i ? "," : "", g->stack, g->first_floor, g->end_bytes, g->allocs, g->t_first_ns, g->t_last_ns,
                r.per_unit, r.bytes_per_second);
    }
    fputs("],\n", f);
    write_live(f, s);
    write_events(f, s);
    write_steps(f, s);
    write_stacks(f, s, sym);
    vt_torch_write_top(f, s, m->reason);
    fputs("}\n", f);
    return ferror(f) ? -1 : 0;
}
