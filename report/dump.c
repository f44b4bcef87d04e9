/* dump.c -- writing the JSON dump. */
#include <inttypes.h>
#include <stdlib.h>

#include "analysis.h"
#include "dump.h"
#include "dump_put.h"
#include "dump_tables.h"
#include "torch.h"
#include "../common/format.h"
#include "../common/warn.h"

#define U64 "%" PRIu64


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

static void write_totals(FILE *f, const struct vt_snapshot *s, const struct vt_analysis *an) {
    const struct vt_totals *t = &s->totals;
    const struct vt_totals *c = t;
    const char *sep = "";
    fputs("\"totals\":{", f);
    VT_COUNTERS(WRITE_COUNTER)
    fprintf(f, ",\"unknown_frees\":" U64 ",\"missed\":" U64 ",\"records_lost\":" U64 ",\"oom_survived\":" U64,
            t->unknown_frees, t->missed, vt_records_lost_count(), an ? an->oom_survived : 0);
    if (t->oom_count) fprintf(f, ",\"last_oom_survived\":%s", an && an->last_oom_survived ? "true" : "false");
    if (s->events_dropped_while_read)
        fprintf(f, ",\"events_dropped_while_read\":" U64, s->events_dropped_while_read);
    fputs("},\n", f);
    fprintf(f, "\"host_memory\":{\"live_bytes\":" U64 ",\"live_count\":" U64
               ",\"peak_bytes\":" U64 "},\n",
            t->host_live_bytes, t->host_live_count, t->host_peak_bytes);
    fprintf(f, "\"imported_memory\":{\"live_bytes\":" U64 ",\"live_count\":" U64 "},\n",
            t->imported_live_bytes, t->imported_live_count);
}

/* Holder i of a flat array of (stack, bytes, count), eight to a line. */
static void put_holder(FILE *f, size_t i, const struct vt_holder *h, const char *sep) {
    char b[128], *o = b;
    if (i) *o++ = ',';
    if (i % 8 == 0) o = vt_put_str(o, sep);
    o = vt_put_u64(o, h->stack);
    *o++ = ',';
    o = vt_put_u64(o, h->bytes);
    *o++ = ',';
    o = vt_put_u64(o, h->count);
    fwrite(b, 1, (size_t)(o - b), f);
}

static void write_holder_list(FILE *f, const struct vt_holder *h, size_t n, const char *sep) {
    fputc('[', f);
    for (size_t i = 0; i < n; i++) put_holder(f, i, &h[i], sep);
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
        fprintf(f, "%s\n {\"number\":" U64 ",\"requested_bytes\":" U64 "%s,\"api\":", i ? "," : "", o->number,
                o->requested, o->requested_rounded ? ",\"requested_rounded\":true" : "");
        vt_json_string(f, o->api);
        fprintf(f, ",\"kind\":\"%s\",\"device\":%d,\"stack\":%" PRIu32 ",\"thread\":%d",
                vt_kind_name(o->kind), o->device, o->stack, o->thread);
        if (o->have_info)
            fprintf(f, ",\"free_bytes\":" U64 ",\"total_bytes\":" U64, o->free_bytes,
                    o->total_bytes);
        else
            fputs(",\"free_bytes\":null,\"total_bytes\":null", f);
        if (o->graph_reserved || o->graph_used)
            fprintf(f, ",\"graph_reserved_bytes\":" U64 ",\"graph_used_bytes\":" U64, o->graph_reserved,
                    o->graph_used);
        if (o->pool_reserved || o->pool_used)
            fprintf(f, ",\"pool_reserved_bytes\":" U64 ",\"pool_used_bytes\":" U64, o->pool_reserved,
                    o->pool_used);
        fprintf(f, ",\"live_bytes\":" U64, o->live_bytes);
        if (o->raised_allocated) fprintf(f, ",\"raised_allocated_bytes\":" U64, o->raised_allocated);
        if (o->taken_count)
            fprintf(f, ",\"taken_bytes\":" U64 ",\"taken_count\":" U64, o->taken_bytes, o->taken_count);
        if (o->have_counts)
            fprintf(f, ",\"live_count\":" U64 ",\"peak_bytes\":" U64 ",\"peak_time_ns\":" U64, o->live_count,
                    o->peak_bytes, o->peak_time_ns);
        fprintf(f, ",\"time_ns\":" U64 ",\"holders\":", o->time_ns);
        if (o->holders) write_holder_list(f, o->holders, o->nholders, "");
        else fputs("null", f);
        if (o->holders && o->device_holders) {
            fputs(",\"device_holders\":", f);
            write_holder_list(f, o->device_holders, o->ndevice_holders, "");
        }
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
        if (i < an->nfindings) vt_torch_write_oom(f, s, i, &an->findings[i].growth, 1);
        else vt_torch_write_oom(f, s, i, NULL, 0);
        fputc('}', f);
    }
    fputs("],\n", f);
}

/* Every failed request with its count (tracker.h's vt_oom_request). */
static void write_oom_requests(FILE *f, const struct vt_snapshot *s) {
    fputs("\"oom_requests\":[", f);
    for (size_t i = 0, n = 0; i < s->noom_requests; i++) {
        const struct vt_oom_request *r = &s->oom_requests[i];
        if (!r->count) continue; /* all of its failures came after the one the dump is of */
        fprintf(f, "%s\n {\"requested_bytes\":" U64 ",\"api\":", n++ ? "," : "", r->requested);
        vt_json_string(f, r->api);
        fprintf(f, ",\"kind\":\"%s\",\"device\":%d,\"stack\":%" PRIu32 ",\"count\":" U64
                   ",\"first_number\":" U64 ",\"first_ns\":" U64 ",\"first_thread\":%d,\"last_number\":" U64
                   ",\"last_ns\":" U64 ",\"last_thread\":%d}",
                vt_kind_name(r->kind), r->device, r->stack, r->count, r->first_number, r->first_ns, r->first_thread,
                r->last_number, r->last_ns, r->last_thread);
    }
    fprintf(f, "],\n\"oom_requests_other\":" U64 ",\n", s->oom_requests_other);
}

static void write_holders(FILE *f, const struct vt_snapshot *s, const struct vt_analysis *an) {
    fputs("\"holders\":", f);
    write_holder_list(f, an->holders, an->nholders, "\n ");
    fputs(",\n\"peak_holders\":[", f);
    struct vt_peak_cursor c = {0, 0};
    struct vt_holder h;
    for (size_t i = 0; vt_peak_holder_next(s, &c, &h); i++) put_holder(f, i, &h, "\n ");
    fputc(']', f);
    fputs(",\n", f);
}

/* Every live allocation as [address, bytes, kind, api, device, stack,
 * thread, time_ns] and, for one known by handle, the handle last, in the
 * snapshot's order (largest first), read through vt_live_read wherever
 * the list lies; kind and api are indexes into "strings". */
static int write_live(FILE *f, const struct vt_snapshot *s, struct vt_strtab *strs) {
    fputs("\"live_fields\":[\"address\",\"bytes\",\"kind\",\"api\",\"device\",\"stack\",\"thread\","
          "\"time_ns\",\"handle\"],\n\"live\":[", f);
    struct vt_live_reader *rd = vt_live_read(s, 1);
    const struct vt_live *a;
    for (size_t i = 0; rd && (a = vt_live_next(rd)); i++) {
        int by_handle = vt_kind_space(a->kind) == VT_SPACE_HANDLE;
        uint64_t mapped = by_handle ? vt_live_mapped(s, a) : 0;
        int64_t kind = vt_strtab_index(strs, vt_kind_name(a->kind)), api = vt_strtab_index(strs, vt_live_api(s, a));
        if (kind < -1 || api < -1) {
            vt_live_read_end(rd);
            return -1;
        }
        char line[256], *o = line;
        o = vt_put_str(o, i ? ",\n[" : "\n[");
        o = vt_put_hex(o, by_handle && mapped ? mapped : a->address);
        *o++ = ',';
        o = vt_put_u64(o, a->bytes);
        *o++ = ',';
        o = vt_put_i64(o, kind);
        *o++ = ',';
        o = vt_put_i64(o, api);
        *o++ = ',';
        o = vt_put_i64(o, a->device);
        *o++ = ',';
        o = vt_put_u64(o, a->stack);
        *o++ = ',';
        o = vt_put_i64(o, a->thread);
        *o++ = ',';
        o = vt_put_u64(o, a->time_ns);
        if (by_handle) {
            *o++ = ',';
            o = vt_put_hex(o, a->address);
        }
        *o++ = ']';
        fwrite(line, 1, (size_t)(o - line), f);
    }
    vt_live_read_end(rd);
    fputc(']', f);
    return 0;
}

/* The step boundaries, oldest first, each with the index in "events" of
 * the first event after it (vt_step_event). */
static void write_steps(FILE *f, const struct vt_snapshot *s) {
    fprintf(f, ",\n\"steps_total\":" U64 ",\n\"steps\":[", s->steps_total);
    for (size_t i = 0; i < s->nsteps; i++)
        fprintf(f, "%s\n {\"step\":" U64 ",\"time_ns\":" U64 ",\"event\":%" PRId64 "}", i ? "," : "",
                s->steps[i].step, s->steps[i].time_ns, vt_step_event(s, &s->steps[i]));
    fputc(']', f);
}

/* The VMM mappings kept, oldest first, a row each in the order of
 * "mapping_fields", their points in the history as indexes in "events"
 * (vt_event_index); an unmap's two null while the mapping stays. */
static void write_mappings(FILE *f, const struct vt_snapshot *s) {
    fprintf(f, ",\n\"mappings_total\":" U64 ",\n\"mapping_fields\":[\"handle\",\"address\",\"bytes\","
               "\"device\",\"time_ns\",\"event\",\"unmap_ns\",\"unmap_event\"],\n\"mappings\":[",
            s->mappings_total);
    for (size_t i = 0; i < s->nmappings; i++) {
        const struct vt_mapping *m = &s->mappings[i];
        char line[256], *o = line;
        o = vt_put_str(o, i ? ",\n[" : "\n[");
        o = vt_put_hex(o, m->handle);
        *o++ = ',';
        o = vt_put_hex(o, m->address);
        *o++ = ',';
        o = vt_put_u64(o, m->bytes);
        *o++ = ',';
        o = vt_put_i64(o, m->device);
        *o++ = ',';
        o = vt_put_u64(o, m->time_ns);
        *o++ = ',';
        o = vt_put_i64(o, vt_event_index(s, m->event));
        *o++ = ',';
        if (m->unmapped) {
            o = vt_put_u64(o, m->unmap_ns);
            *o++ = ',';
            o = vt_put_i64(o, vt_event_index(s, m->unmap_event));
        } else {
            o = vt_put_str(o, "null,null");
        }
        *o++ = ']';
        fwrite(line, 1, (size_t)(o - line), f);
    }
    fputc(']', f);
}

int vt_dump_write(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                  const struct vt_analysis *an, const struct vt_dump_meta *m) {
    fputs("{\"format\":\"vramtrace-dump\",\"version\":2,\"reason\":", f);
    vt_json_string(f, m->reason);
    fprintf(f, ",\"pid\":%d,", m->pid);
    /* Right after the pid, in the first bytes: output.c reads them back to
     * tell an earlier image of this process (it exec'd) from another. */
    if (m->boot_id) fprintf(f, "\"boot_id\":\"%s\",\"process_start\":%llu,\"pid_ns\":%llu,", m->boot_id,
                            m->process_start, m->pid_ns);
    fprintf(f, "\"rank\":%d,\"local_rank\":%d,", m->rank, m->local_rank);
    if (m->rank_unknown) fputs("\"rank_known\":false,", f);
    else if (m->rank_from) fprintf(f, "\"rank_from\":\"%s\",", m->rank_from);   /* a name of rankvars.h's */
    if (m->world_size > 0) fprintf(f, "\"world_size\":%d,", m->world_size);
    fputs("\"host\":", f);
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
    if (m->ended_signal) {
        fputs("\"ended_by\":{\"signal\":", f);
        vt_json_string(f, m->ended_signal);
        if (m->ended_from_pid > 0) fprintf(f, ",\"from_pid\":%d", m->ended_from_pid);
        if (m->ended_from && m->ended_from[0]) {
            fputs(",\"from\":", f);
            vt_json_string(f, m->ended_from);
        }
        fputs("},\n", f);
    }
    if (m->exit_status_known) fprintf(f, "\"exit_status\":%d,\n", m->exit_status);
    if (m->dump_number) fprintf(f, "\"dump_number\":%u,\n", m->dump_number);
    if (m->forecast && m->forecast[0]) {
        fputs("\"forecast\":", f);
        vt_json_string(f, m->forecast);
        fputs(",\n", f);
    }
    write_devices(f, s);
    write_totals(f, s, an);
    write_ooms(f, s, an);
    write_oom_requests(f, s);
    write_holders(f, s, an);
    fputs("\"growing\":[", f);
    for (size_t i = 0; i < an->ngrowth; i++) {
        const struct vt_growth *g = &an->growth[i];
        struct vt_growth_rate r = vt_growth_rate(g);
        fprintf(f, "%s\n {\"stack\":%" PRIu32 ",\"first_bytes\":" U64 ",\"end_bytes\":" U64
                   ",\"allocations\":" U64 ",\"since_ns\":" U64 ",\"last_ns\":" U64
                   ",\"bytes_per_allocation\":" U64 ",\"bytes_per_second\":%.0f,\"unit\":\"%s\",\"units\":" U64
                   ",\"bytes_per_unit\":" U64 ",\"rise_bytes\":" U64 ",\"span_ns\":" U64,
                i ? "," : "", g->stack, g->first_floor, g->end_bytes, g->allocs, g->t_first_ns, g->t_last_ns,
                g->allocs ? (g->end_bytes - g->first_floor) / g->allocs : 0,
                r.bytes_per_second, r.unit, r.units, r.per_unit, r.rise, r.span_ns);
        if (r.run_steps) fprintf(f, ",\"run_steps\":" U64, r.run_steps);
        if (r.history_from_ns) fprintf(f, ",\"history_from_ns\":" U64, r.history_from_ns);
        if (g->cache_bytes) fprintf(f, ",\"cache_bytes\":" U64, g->cache_bytes);
        if (g->holder[0]) {   /* what holds it, as PyTorch's record names it */
            fputs(",\"holder\":", f);
            vt_json_string(f, g->holder);
        }
        fputc('}', f);
    }
    fputs("],\n\"released\":", f);
    write_holder_list(f, s->released, s->nreleased, "\n ");
    fputs(",\n", f);
    /* Pinned host memory a reset released, apart from the device's as the
     * totals keep it; only when there is some (readers take its absence
     * as none, as in dumps of earlier vramtrace). */
    if (s->nreleased_host) {
        fputs("\"released_host\":", f);
        write_holder_list(f, s->released_host, s->nreleased_host, "\n ");
        fputs(",\n", f);
    }
    struct vt_strtab *strs = vt_strtab_new();
    int rc = strs ? write_live(f, s, strs) : -1;
    if (rc == 0) vt_dump_write_events(f, s);
    if (rc == 0) write_steps(f, s);
    if (rc == 0) write_mappings(f, s);
    if (rc == 0) rc = vt_dump_write_stacks(f, s, sym, strs);
    if (rc == 0) vt_strtab_write(f, strs);
    vt_strtab_free(strs);
    if (rc != 0) return -1;
    vt_torch_write_top(f, s, m->reason, an->growth, an->ngrowth);
    fputs("\n}\n", f);
    return ferror(f) ? -1 : 0;
}
