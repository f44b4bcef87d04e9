/* cmd_metrics.c -- `vramtrace metrics [--textfile DIR | --listen [HOST:]PORT]
 * [--top N] [--interval S] [--once] [--openmetrics]`: the live counters of
 * every traced process of this user on this host (livefile.h) for
 * Prometheus.
 *
 * One writer, two dialects of the same series: the Prometheus text format
 * 0.0.4 (node_exporter's textfile collector and promtool read it) and the
 * OpenMetrics text format (its counter families named without _total,
 * units declared, "# EOF"), which a Prometheus server asks for. Bytes end
 * in _bytes, counters in _total. Every series carries pid, rank, host and
 * command; a device's also gpu (its ordinal) and UUID, spelled as NVIDIA's
 * DCGM exporter spells it ("GPU-..."), so that the two join. Call sites are
 * the N largest of each process (by call-site label), so that the number of
 * series stays bounded. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/labels.h"
#include "cli.h"
#include "livefile.h"
#include "metrics.h"
#include "reporters.h"


/* A label value: made printable (vr_safe), then \, " and newline escaped. */
static void put_label(FILE *f, const char *name, const char *value, int first) {
    char safe[1024];
    vr_safe(value, safe, sizeof safe);
    fprintf(f, "%s%s=\"", first ? "" : ",", name);
    for (const char *p = safe; *p; p++) {
        if (*p == '\\' || *p == '"') fputc('\\', f);
        if (*p == '\n') { fputs("\\n", f); continue; }
        fputc(*p, f);
    }
    fputc('"', f);
}

static void process_labels(FILE *f, const struct vt_live_segment *s) {
    char pid[16], rank[16];
    snprintf(pid, sizeof pid, "%d", s->pid);
    snprintf(rank, sizeof rank, "%d", s->rank);
    put_label(f, "pid", pid, 1);
    put_label(f, "rank", rank, 0);
    put_label(f, "host", s->host, 0);
    put_label(f, "command", s->command, 0);
}

static void device_labels(FILE *f, const struct vt_live_segment *s, const struct vt_live_device *d) {
    char gpu[16];
    snprintf(gpu, sizeof gpu, "%d", d->ordinal);
    process_labels(f, s);
    put_label(f, "gpu", gpu, 0);
    put_label(f, "UUID", (d->flags & VT_LIVE_DEV_FACTS) ? d->uuid : "", 0);
}

enum { GAUGE, COUNTER };

/* A family's header: HELP and TYPE (and UNIT in OpenMetrics); a counter's
 * family is named with _total in the text format, without in OpenMetrics. */
static void family(FILE *f, int om, const char *name, int type, const char *unit, const char *help) {
    char fam[128];
    snprintf(fam, sizeof fam, "%s%s", name, type == COUNTER && !om ? "_total" : "");
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fam, help, fam, type == COUNTER ? "counter" : "gauge");
    if (om && unit) fprintf(f, "# UNIT %s %s\n", fam, unit);
}

/* The device figures, one family each. */
struct dev_metric {
    const char *name;
    int type;
    const char *unit, *help;
    uint32_t needs; /* device flags the figure needs */
    int (*value)(const struct vt_live_device *, double *);
    /* A figure of the growth now, which a stopped process (livefile.h's
     * vt_live_stopped) does not have: NOW_ZERO exported as 0, NOW_NONE
     * left out (a time to full that would not count down while it is
     * stopped, and kept an alert on it firing). */
    int now;
};
enum { NOW_ANY, NOW_ZERO, NOW_NONE };

#define DEV_U64(fn, field) \
    static int fn(const struct vt_live_device *d, double *v) { *v = (double)d->field; return 1; }
DEV_U64(v_live, live_bytes)
DEV_U64(v_peak, peak_bytes)
DEV_U64(v_count, live_count)
DEV_U64(v_res, torch_reserved_bytes)
DEV_U64(v_alloc, torch_allocated_bytes)
DEV_U64(v_allocs, alloc_count)
DEV_U64(v_frees, free_count)
DEV_U64(v_failed, failed_count)
DEV_U64(v_ooms, oom_count)
static int v_cap(const struct vt_live_device *d, double *v) { *v = (double)d->capacity_bytes; return d->capacity_bytes > 0; }
static int v_total(const struct vt_live_device *d, double *v) { *v = (double)d->total_bytes; return 1; }
static int v_growth(const struct vt_live_device *d, double *v) { *v = (double)d->growth_per_min / 60.0; return 1; }
static int v_full(const struct vt_live_device *d, double *v) { *v = (double)d->forecast_ns / 1e9; return 1; }
static int v_step(const struct vt_live_device *d, double *v) { *v = (double)d->growth_per_step; return 1; }
DEV_U64(v_full_steps, forecast_steps)

static const struct dev_metric dev_metrics[] = {
    {"vramtrace_live_bytes", GAUGE, "bytes", "Device memory the process holds now (tracked allocations).", 0, v_live, NOW_ANY},
    {"vramtrace_peak_bytes", GAUGE, "bytes", "Most device memory the process held at once.", 0, v_peak, NOW_ANY},
    {"vramtrace_live_allocations", GAUGE, NULL, "Device allocations the process holds now.", 0, v_count, NOW_ANY},
    {"vramtrace_device_memory_bytes", GAUGE, "bytes", "The device's memory.", VT_LIVE_DEV_FACTS, v_total, NOW_ANY},
    {"vramtrace_capacity_bytes", GAUGE, "bytes", "What the forecast fills: VRAMTRACE_LIMIT where the device has more room, else the device's memory.", 0, v_cap, NOW_ANY},
    {"vramtrace_torch_reserved_bytes", GAUGE, "bytes", "PyTorch's caching allocator: memory reserved.", VT_LIVE_DEV_TORCH, v_res, NOW_ANY},
    {"vramtrace_torch_allocated_bytes", GAUGE, "bytes", "PyTorch's caching allocator: memory in tensors.", VT_LIVE_DEV_TORCH, v_alloc, NOW_ANY},
    {"vramtrace_growth_bytes_per_second", GAUGE, NULL, "Sustained growth of the live bytes (0 when there is none, or the process is stopped).", 0, v_growth, NOW_ZERO},
    {"vramtrace_forecast_full_seconds", GAUGE, "seconds", "Time until the live bytes fill the capacity at the sustained growth (none while the process is stopped).", VT_LIVE_DEV_FORECAST, v_full, NOW_NONE},
    {"vramtrace_growth_bytes_per_step", GAUGE, NULL, "Sustained growth of the live bytes a step, where the program has steps (0 when there is none, or the process is stopped).", VT_LIVE_DEV_PER_STEP, v_step, NOW_ZERO},
    {"vramtrace_forecast_full_steps", GAUGE, NULL, "Steps until the live bytes fill the capacity at the sustained growth a step (none while the process is stopped).", VT_LIVE_DEV_PER_STEP | VT_LIVE_DEV_FORECAST, v_full_steps, NOW_NONE},
    {"vramtrace_allocations", COUNTER, NULL, "Device allocations made.", 0, v_allocs, NOW_ANY},
    {"vramtrace_frees", COUNTER, NULL, "Device frees made.", 0, v_frees, NOW_ANY},
    {"vramtrace_failures", COUNTER, NULL, "Failed device allocations.", 0, v_failed, NOW_ANY},
    {"vramtrace_ooms", COUNTER, NULL, "Device allocations refused for lack of memory.", 0, v_ooms, NOW_ANY},
};

/* A process's call sites grouped by label as the exposition shows it (its
 * display form: two labels that differ only where one holds a newline and
 * the other the text "\x0a" are one series, not two samples with the same
 * labels, which Prometheus drops), largest first: at most `top`. */
struct site_sum {
    char label[VT_LIVE_LABEL * VT_CHAR_MAX + 1];
    uint64_t bytes, count;
};

static int site_order(const void *a, const void *b) {
    const struct site_sum *x = a, *y = b;
    return vt_rank_order(x->bytes, x->label, 0, y->bytes, y->label, 0);
}

/* The segment's sites (by stack) grouped by label, common/labels.h's rule
 * (the reports'); where memory runs out, the sites grouped so far. */
static size_t sites_of(const struct vt_live_segment *s, struct site_sum *out) {
    struct vt_labels *groups = vt_labels_new();
    size_t n = 0;
    for (int i = 0; groups && i < s->nsites && i < VT_LIVE_SITES; i++) {
        int added;
        char shown[sizeof out->label];
        uint32_t g = vt_label_group(groups, vr_safe(s->sites[i].label, shown, sizeof shown), &added);
        if (g == UINT32_MAX) break;
        if (added) {
            memcpy(out[n].label, shown, sizeof shown);
            out[n].bytes = out[n].count = 0;
            n++;
        }
        out[g].bytes += s->sites[i].bytes;
        out[g].count += s->sites[i].count;
    }
    vt_labels_free(groups);
    qsort(out, n, sizeof *out, site_order);
    return n;
}

/* A value: an integer as one; else with 15 significant digits, which a
 * double holds exactly, so that nanoseconds in seconds read "33.8", not
 * "33.799999999999997". */
static void sample_value(FILE *f, double v) {
    if (v == (double)(uint64_t)v) fprintf(f, " %llu\n", (unsigned long long)v);
    else fprintf(f, " %.15g\n", v);
}

/* Live and peak bytes by kind of memory (device, managed, pinned host,
 * imported, pool...): a device's kinds with its gpu and UUID, the host's
 * (pinned host memory) with gpu "host" and no UUID; only the kinds a
 * process ever held, so that the series stay few. */
static void write_kinds(FILE *f, const struct vt_live_segment *segs, size_t n, int om) {
    static const char *const names[] = {VT_LIVE_KIND_NAMES};
    for (int peak = 0; peak < 2; peak++) {
        const char *name = peak ? "vramtrace_kind_peak_bytes" : "vramtrace_kind_live_bytes";
        int header = 0;
        for (size_t i = 0; i < n; i++) {
            int ndev = segs[i].ndevices < VT_LIVE_DEVICES ? segs[i].ndevices : VT_LIVE_DEVICES;
            for (int k = 0; k <= ndev; k++) {
                const struct vt_live_device *d = k < ndev ? &segs[i].devices[k] : NULL;
                const uint64_t *live = d ? d->kind_live_bytes : segs[i].host_kind_live_bytes;
                const uint64_t *most = d ? d->kind_peak_bytes : segs[i].host_kind_peak_bytes;
                for (size_t m = 0; m < sizeof names / sizeof *names; m++) {
                    if (!most[m]) continue;
                    if (!header++)
                        family(f, om, name, GAUGE, "bytes",
                               peak ? "Most memory of one kind the process held at once, by device."
                                    : "Memory of one kind the process holds now, by device.");
                    fprintf(f, "%s{", name);
                    if (d) {
                        device_labels(f, &segs[i], d);
                    } else {
                        process_labels(f, &segs[i]);
                        put_label(f, "gpu", "host", 0);
                        put_label(f, "UUID", "", 0);
                    }
                    put_label(f, "kind", names[m], 0);
                    fprintf(f, "} %llu\n", (unsigned long long)(peak ? most[m] : live[m]));
                }
            }
        }
    }
}

/* Every family over segs[0..n), stopped[i] whether segs[i]'s process is
 * stopped. */
static void write_metrics(FILE *f, const struct vt_live_segment *segs, const unsigned char *stopped, size_t n,
                          const struct vt_metrics_opts *o) {
    for (size_t m = 0; m < sizeof dev_metrics / sizeof dev_metrics[0]; m++) {
        const struct dev_metric *dm = &dev_metrics[m];
        int header = 0;
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < segs[i].ndevices && k < VT_LIVE_DEVICES; k++) {
                const struct vt_live_device *d = &segs[i].devices[k];
                double v;
                if ((d->flags & dm->needs) != dm->needs || !dm->value(d, &v)) continue;
                if (stopped[i] && dm->now == NOW_NONE) continue;
                if (stopped[i] && dm->now == NOW_ZERO) v = 0;
                if (!header++) family(f, o->om, dm->name, dm->type, dm->unit, dm->help);
                fprintf(f, "%s%s{", dm->name, dm->type == COUNTER ? "_total" : "");
                device_labels(f, &segs[i], d);
                fputc('}', f);
                sample_value(f, v);
            }
    }
    if (n) family(f, o->om, "vramtrace_host_live_bytes", GAUGE, "bytes", "Pinned host memory the process holds now.");
    for (size_t i = 0; i < n; i++) {
        fputs("vramtrace_host_live_bytes{", f);
        process_labels(f, &segs[i]);
        fprintf(f, "} %llu\n", (unsigned long long)segs[i].host_live_bytes);
    }
    if (n) family(f, o->om, "vramtrace_stopped", GAUGE, NULL,
                  "1 while the process is stopped (SIGSTOP, a debugger, a frozen cgroup): its growth reads 0 and "
                  "its forecast is left out until it runs again.");
    for (size_t i = 0; i < n; i++) {
        fputs("vramtrace_stopped{", f);
        process_labels(f, &segs[i]);
        fprintf(f, "} %d\n", stopped[i] ? 1 : 0);
    }
    write_kinds(f, segs, n, o->om);
    int steps = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(segs[i].flags & VT_LIVE_STEPS)) continue;
        if (!steps++) family(f, o->om, "vramtrace_steps", COUNTER, NULL, "Optimizer steps PyTorch made (its companion counts them).");
        fputs("vramtrace_steps_total{", f);
        process_labels(f, &segs[i]);
        fprintf(f, "} %llu\n", (unsigned long long)segs[i].steps);
    }
    for (int which = 0; which < 2; which++) {
        int header = 0;
        for (size_t i = 0; i < n; i++) {
            struct site_sum sums[VT_LIVE_SITES];
            size_t ns = sites_of(&segs[i], sums);
            for (size_t j = 0; j < ns && (long)j < o->top; j++) {
                if (!header++) {
                    if (which == 0)
                        family(f, o->om, "vramtrace_site_live_bytes", GAUGE, "bytes",
                               "Device memory a call site holds now (the process's largest call sites).");
                    else
                        family(f, o->om, "vramtrace_site_live_allocations", GAUGE, NULL,
                               "Device allocations a call site holds now (the process's largest call sites).");
                }
                fputs(which == 0 ? "vramtrace_site_live_bytes{" : "vramtrace_site_live_allocations{", f);
                process_labels(f, &segs[i]);
                put_label(f, "site", sums[j].label, 0);
                fprintf(f, "} %llu\n", (unsigned long long)(which == 0 ? sums[j].bytes : sums[j].count));
            }
        }
    }
    if (o->om) fputs("# EOF\n", f);
}

char *vt_metrics_text(const struct vt_metrics_opts *o, size_t *len) {
    size_t n;
    struct vt_live_segment *segs = vt_live_scan(0, &n);
    unsigned char *stopped = calloc(n ? n : 1, 1);
    char *text = NULL;
    FILE *f = stopped ? open_memstream(&text, len) : NULL;
    if (!f) { free(stopped); free(segs); return NULL; }
    for (size_t i = 0; i < n; i++) stopped[i] = (unsigned char)vt_live_stopped(segs[i].pid);
    write_metrics(f, segs, stopped, n, o);
    fclose(f);
    free(stopped);
    free(segs);
    return text;
}

static void metrics_help(void) {
    printf("usage: vramtrace metrics [--textfile DIR | --listen [HOST:]PORT] [--top N]\n"
           "                         [--interval S] [--once] [--openmetrics]\n\n"
           "The live counters of every process of this user traced by vramtrace on this\n"
           "host, for Prometheus: live and peak bytes, allocations, frees, failures and\n"
           "out-of-memory failures per process and device (labels pid, rank, host,\n"
           "command, gpu and UUID as NVIDIA's DCGM exporter spells it), growth and the\n"
           "forecast, and the largest call sites of each process.\n\n"
           "  (neither)          print the exposition once on standard output\n"
           "  --textfile DIR     write DIR/vramtrace.prom for node_exporter's textfile\n"
           "                     collector (whole: written aside, then renamed), every\n"
           "                     interval; with --once a single time\n"
           "  --listen ADDR      serve GET /metrics on [HOST:]PORT (HOST 127.0.0.1 unless\n"
           "                     given) until stopped (not with --once); OpenMetrics to\n"
           "                     a client that asks for it\n"
           "  --top N            call sites per process (default 10, 0 to %d)\n"
           "  --interval S       seconds between textfile writes (default 15; 0.1 to 86400)\n"
           "  --openmetrics      OpenMetrics text instead of the Prometheus text format\n",
           VT_LIVE_SITES);
}

int vt_cmd_metrics(int argc, char **argv) {
    struct vt_metrics_opts o = {.top = 10, .interval = 15};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            metrics_help();
            return vt_cli_flush("vramtrace metrics");
        } else if (strcmp(a, "--textfile") == 0 && i + 1 < argc) {
            o.textfile = argv[++i];
        } else if (strcmp(a, "--listen") == 0 && i + 1 < argc) {
            o.listen = argv[++i];
        } else if (strcmp(a, "--top") == 0 && i + 1 < argc) {
            if (vt_cli_count(argv[++i], 0, VT_LIVE_SITES, &o.top) != 0) {
                fprintf(stderr, "vramtrace metrics: --top takes a number from 0 to %d\n", VT_LIVE_SITES);
                return 2;
            }
        } else if (strcmp(a, "--interval") == 0 && i + 1 < argc) {
            char *end;
            o.interval = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(o.interval >= 0.1 && o.interval <= 86400)) {
                fprintf(stderr, "vramtrace metrics: --interval takes seconds from 0.1 to 86400\n");
                return 2;
            }
        } else if (strcmp(a, "--once") == 0) {
            o.once = 1;
        } else if (strcmp(a, "--openmetrics") == 0) {
            o.om = 1;
        } else if (strcmp(a, "--textfile") == 0 || strcmp(a, "--listen") == 0 || strcmp(a, "--top") == 0 ||
                   strcmp(a, "--interval") == 0) {
            fprintf(stderr, "vramtrace metrics: %s needs a value (see vramtrace metrics --help)\n", a);
            return 2;
        } else {
            char safe[128];
            fprintf(stderr, "vramtrace metrics: unknown argument '%s' (see vramtrace metrics --help)\n",
                    vr_safe(a, safe, sizeof safe));
            return 2;
        }
    }
    /* An empty DIR was the root folder's: DIR/vramtrace.prom made /vramtrace.prom. */
    if (o.textfile && !*o.textfile) {
        fprintf(stderr, "vramtrace metrics: --textfile takes a folder, not ''\n");
        return 2;
    }
    if (o.textfile && o.listen) {
        fprintf(stderr, "vramtrace metrics: --textfile and --listen: one at a time\n");
        return 2;
    }
    /* A server answers every scrape until it is stopped: --once, taken
     * there, was ignored and the command never ended. */
    if (o.once && o.listen) {
        fprintf(stderr, "vramtrace metrics: --once and --listen: --listen serves until stopped; --once writes once "
                        "(standard output or --textfile)\n");
        return 2;
    }
    if (o.textfile) return vt_metrics_textfile(&o);
    if (o.listen) return vt_metrics_listen(&o);
    size_t len;
    char *text = vt_metrics_text(&o, &len);
    if (text) fwrite(text, 1, len, stdout);
    free(text);
    return vt_cli_flush("vramtrace metrics");
}
