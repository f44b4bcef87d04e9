/* live.c -- the publisher of the live segment (live.h, common/live.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "../common/callsite.h"
#include "../common/format.h"
#include "../common/live.h"
#include "../common/thread.h"
#include "../common/warn.h"
#include "../tracker/options.h"
#include "../tracker/tracker.h"
#include "output.h"
#include "forecast.h"
#include "live.h"
#include "output.h"
#include "symbolize.h"

#define VT_LIVE_ROUNDS 16 /* step counts whose call sites are kept for the per-step forecast */

/* The publisher's state: its thread's alone, but for `path` and `lock`
 * (the exit path reads them) and the forecast line (the dump's). */
static struct {
    int started;
    volatile struct vt_live_segment *seg;
    char path[4096];
    struct vt_view view;
    struct vt_live_segment next;
    char **labels;           /* by stack id, once named */
    size_t nlabels;
    struct vt_forecast fc[VT_MAX_DEVICES];
    int warned;
    char last_site[VT_MAX_DEVICES][VT_SITE_NAME_MAX]; /* each device's forecast's growing site, once named */
    int created, placed;     /* under place_lock: made, renamed into place */
    /* The view's stacks added up by call site, largest first. */
    struct site_group { const char *label; uint64_t bytes, count, most, devices; uint32_t stack; } groups[VT_VIEW_SITES];
    uint32_t ngroups;
    /* The call sites at each closed growth window, for the one that grew. */
    struct past_site { const char *label; uint64_t bytes; } past[VT_FORECAST_RISES + 1][VT_LIVE_SITES];
    uint32_t npast[VT_FORECAST_RISES + 1];
    int npasts;
    /* The call sites at the newest round of each step count, oldest
     * first, for the per-step forecast's site: its stretch is of steps, not
     * of the windows' time (a run of a few seconds closes none). */
    struct past_round { uint64_t steps; uint32_t n; struct past_site s[VT_LIVE_SITES]; } rounds[VT_LIVE_ROUNDS];
    int nrounds;
} L;
/* The segment's descriptor (fdkeep.h: out of the program's way; its lock
 * says the writer lives), beside L rather than in it: L's other fields
 * start as zeros, and this one's initialiser would put all of L's 550 KB
 * into the library file's .data. */
static struct vt_fd live_fd = VT_FD_NONE;
_Static_assert(VT_KIND_COUNT <= VT_LIVE_KINDS, "the segment has room for every kind");
static pthread_mutex_t forecast_lock = PTHREAD_MUTEX_INITIALIZER;
/* Held around the segment file's making, naming and removal, never long:
 * the exit removes what exists and after it nothing is made. */
static pthread_mutex_t place_lock = PTHREAD_MUTEX_INITIALIZER;
/* Held by the publisher for each round: the exit waits for it (boundedly),
 * so that no round runs while the process tears down. */
static pthread_mutex_t round_lock = PTHREAD_MUTEX_INITIALIZER;
/* Where a publisher that cannot publish waits for the exit. */
static pthread_cond_t parked = PTHREAD_COND_INITIALIZER;
#define VT_LIVE_EXIT_WAIT_NS 1000000000ull
/* The forecast that holds at the newest round, of the device that fills
 * first ("" when none holds), under forecast_lock: the segment's and the
 * dump's. Made per step, its device and the newest boundary then (its
 * number, the device's live bytes there), so that a dump written after
 * later boundaries can tell the growth has stopped since. */
static struct {
    char line[256];
    int device;
    uint64_t step, step_live;
} kept_forecast;

/* Create the segment under a temporary name, locked (the lock is what
 * tells a reader that its writer lives); publish() renames it into place
 * once it is filled, so that a reader never meets one unlocked or empty. */
static char tmp_path[4096];
static int create_segment(void) {
    char dir[3900];
    vt_live_dir(dir, sizeof dir);
    snprintf(L.path, sizeof L.path, "%s/" VT_LIVE_PREFIX "%d" VT_LIVE_SUFFIX, dir, (int)getpid());
    snprintf(tmp_path, sizeof tmp_path, "%s/." VT_LIVE_PREFIX "%d.tmp", dir, (int)getpid());
    int fd = vt_fd_open(AT_FDCWD, tmp_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (fd < 0 && errno == EEXIST) { /* left by a process that had this pid */
        unlink(tmp_path);
        fd = vt_fd_open(AT_FDCWD, tmp_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    }
    if (fd < 0) return -1;
    struct vt_fd kept;
    if (vt_fd_keep(fd, &kept) != 0) {
        int e = errno;
        unlink(tmp_path);
        errno = e;
        return -1;
    }
    fd = kept.fd;
    void *m = MAP_FAILED;
    /* The pages are reserved, not a sparse size: the segment is written
     * through the mapping, and a store to a page a full tmpfs (/dev/shm of
     * a container is 64 MB) cannot give is a SIGBUS that kills the
     * program. Reserved, a full folder is ENOSPC here and one warning. */
    int fe = 0;
    if (fchmod(fd, 0600) != 0 || (fe = posix_fallocate(fd, 0, sizeof(struct vt_live_segment))) != 0 ||
        flock(fd, LOCK_EX | LOCK_NB) != 0 ||
        (m = mmap(NULL, sizeof(struct vt_live_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        int e = fe ? fe : errno; /* posix_fallocate returns its error */
        close(fd);
        unlink(tmp_path);
        errno = e;
        return -1;
    }
    live_fd = kept;
    L.seg = m;
    L.created = 1;
    return 0;
}

/* The filled segment under its own name; from then on the exit removes it. */
static int place_segment(void) {
    if (rename(tmp_path, L.path) != 0) {
        int e = errno;
        unlink(tmp_path);
        errno = e;
        return -1;
    }
    L.placed = 1;
    return 0;
}

/* Room in L.labels for stack id `id`; 0 when out of memory. */
static int label_room(uint32_t id) {
    if (id < L.nlabels) return 1;
    size_t n = L.nlabels ? L.nlabels : 64;
    while (n <= id) n *= 2;
    char **bigger = realloc(L.labels, n * sizeof *bigger);
    if (!bigger) return 0;
    memset(bigger + L.nlabels, 0, (n - L.nlabels) * sizeof *bigger);
    L.labels = bigger;
    L.nlabels = n;
    return 1;
}

/* Name the n stacks st[] (ids[]) in one symbolizing session. A session
 * reads the modules' debug information anew (measured: about 50 ms for a
 * small program built with -g; libtorch's symbols take about a second), so
 * a round names every new site of the view at once, not one at a time (at
 * 100,000 stacks the top sites change often, and one session a name kept
 * the publisher busy about half of a CPU). */
static void label_stacks(const struct vt_stack **st, const uint32_t *ids, size_t n) {
    struct vt_snapshot s;
    memset(&s, 0, sizeof s);
    s.stacks = st;
    s.nstacks = n;
    struct vt_symbols *sym = vt_symbolize(&s);
    for (size_t k = 0; k < n; k++) {
        char buf[VT_SITE_NAME_MAX]; /* whole, as the reports name it: sites are told apart by it */
        vt_site_name(sym ? vt_call_site(sym, (uint32_t)k) : NULL, buf, sizeof buf);
        L.labels[ids[k]] = strdup(buf);
    }
    vt_symbols_free(sym);
}

/* Every site of the view that has no name yet, named (label_stacks). */
static void label_new_sites(const struct vt_view *v) {
    static const struct vt_stack *st[VT_VIEW_SITES]; /* the publisher's alone */
    static uint32_t ids[VT_VIEW_SITES];
    size_t n = 0;
    for (uint32_t i = 0; i < v->nsites; i++) {
        uint32_t id = v->sites[i].stack;
        if (!label_room(id) || L.labels[id]) continue;
        st[n] = v->stacks[i];
        ids[n++] = id;
    }
    if (n) label_stacks(st, ids, n);
}

/* A stack's call-site name (named with the view's other new sites). */
static const char *label_of(uint32_t id, const struct vt_stack *st) {
    if (id < L.nlabels && L.labels[id]) return L.labels[id];
    if (!label_room(id)) return "(no stack)";
    if (!L.labels[id]) label_stacks(&st, &id, 1);
    return L.labels[id] ? L.labels[id] : "(no stack)";
}

static int by_label(const void *a, const void *b) {
    return strcmp(((const struct site_group *)a)->label, ((const struct site_group *)b)->label);
}

static int by_bytes(const void *a, const void *b) {
    const struct site_group *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return strcmp(x->label, y->label);
}

/* The view's stacks added up by call site (the holders table's rows, as
 * the dump's report makes them): each site its bytes and allocations over
 * all its stacks, named by its largest stack. */
static void group_sites(const struct vt_view *v) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < v->nsites; i++)
        L.groups[n++] = (struct site_group){label_of(v->sites[i].stack, v->stacks[i]), v->sites[i].bytes,
                                            v->sites[i].count, v->sites[i].bytes, v->site_devices[i],
                                            v->sites[i].stack};
    qsort(L.groups, n, sizeof *L.groups, by_label);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (k && strcmp(L.groups[k - 1].label, L.groups[i].label) == 0) {
            struct site_group *g = &L.groups[k - 1];
            g->bytes += L.groups[i].bytes;
            g->count += L.groups[i].count;
            g->devices |= L.groups[i].devices;
            if (L.groups[i].most > g->most) {
                g->most = L.groups[i].most;
                g->stack = L.groups[i].stack;
            }
        } else {
            L.groups[k++] = L.groups[i];
        }
    }
    qsort(L.groups, k, sizeof *L.groups, by_bytes);
    L.ngroups = k;
}

/* A site's bytes in one of the kept tables of past call sites (0 where it
 * held none then). */
static uint64_t bytes_then(const struct past_site *past, uint32_t n, const char *label) {
    for (uint32_t j = 0; j < n; j++)
        if (strcmp(past[j].label, label) == 0) return past[j].bytes;
    return 0;
}

/* The call site with memory on device d that grew the most over the
 * stretch the forecast measured. Per minute (sf NULL), the closed windows
 * kept: the site that rose in the most of them (and now), then by the
 * most bytes since the first; a load in one window is not the growth the
 * forecast's rate (the median window's rise) measures: a site that loaded
 * more than the leak added was named for it. Per step, the rounds
 * from the oldest one at or after the stretch's first boundary (the
 * oldest kept when every one kept is that late): the site whose rises add
 * up to the most, each rise counted as the forecast's rate counts the
 * device's (a load, more than VT_FORECAST_LOAD times the median rise over
 * the steps the rise spans, as the median): the count of rises named a
 * site that kept 8 MiB a step, rising at every round, for one that kept
 * 256 MiB once a step. A round before that boundary holds what was made
 * before the stretch, which its rate leaves out: from there, a 32 MiB
 * workspace made once in the first step, spread over the 19 steps to the
 * next round, passed for growth and was named for a leak of 1 MiB a step.
 * With nothing to compare with (no window closed, no round since the
 * stretch began), none, and *unknown set: the largest site was named, a
 * model loaded once before the first step rather than what grows. */
static const char *growing_site(int d, const struct vt_step_forecast *sf, uint64_t steps_now, int *unknown) {
    uint64_t from_step = sf ? sf->from_step : 0;
    int best_rises = 0;
    uint64_t best_sum = 0;
    int64_t best = 0;
    const char *at = NULL;
    int base = 0, npast = L.npasts;
    if (sf) {
        base = L.nrounds;
        for (int k = L.nrounds - 1; k >= 0 && L.rounds[k].steps >= from_step; k--) base = k;
        npast = L.nrounds - base;
    }
    *unknown = npast == 0;
    if (npast == 0) return NULL;
    for (uint32_t i = 0; i < L.ngroups; i++) {
        if (!(L.groups[i].devices >> d & 1)) continue;
        uint64_t was = 0, then = 0, sum = 0, steps_was = 0;
        int rises = 0;
        for (int k = 0; k <= npast; k++) {
            uint64_t v, steps = k == npast ? steps_now : sf ? L.rounds[base + k].steps : 0;
            if (k == npast) v = L.groups[i].bytes;
            else if (sf) v = bytes_then(L.rounds[base + k].s, L.rounds[base + k].n, L.groups[i].label);
            else v = bytes_then(L.past[k], L.npast[k], L.groups[i].label);
            if (k > 0 && v > was) {
                rises++;
                uint64_t r = v - was, span = steps > steps_was ? steps - steps_was : 1;
                sum += sf && sf->median_rise && r > sf->median_rise * VT_FORECAST_LOAD * span ? sf->median_rise : r;
            }
            if (k == 0) then = v;
            was = v;
            steps_was = steps;
        }
        int64_t rise = (int64_t)(L.groups[i].bytes - then);
        if (rise <= 0) continue;
        int better = sf ? sum > best_sum || (sum == best_sum && rise > best)
                        : rises > best_rises || (rises == best_rises && rise > best);
        if (better) {
            best_rises = rises;
            best_sum = sum;
            best = rise;
            at = L.groups[i].label;
        }
    }
    return at;
}

/* The forecast of device d, per step when sf is given, else per minute,
 * to `capacity` (VRAMTRACE_LIMIT's when by_limit) less `outside`: its line
 * for the segment and the dump, and the one warning. Asked of the device
 * that fills first alone: the line printed, top's header and the dump
 * name the same device (they named the last device with a forecast, one
 * of three times the margin). */
static void forecast_of(int d, const struct vt_forecast *f, const struct vt_step_forecast *sf, uint64_t capacity,
                        uint64_t outside, int by_limit) {
    char rate[32], cap[96], line[256], when[48];
    vt_fmt_bytes(sf ? (uint64_t)sf->growth_per_step : (uint64_t)f->growth_per_min, rate, sizeof rate);
    vt_fmt_bytes(capacity, cap, sizeof cap);
    if (outside) {
        char held[32];
        vt_fmt_bytes(outside, held, sizeof held);
        size_t k = strlen(cap);
        snprintf(cap + k, sizeof cap - k, ", %s of it held outside the tracked allocations", held);
    }
    /* The site that grew the most lately; where nothing grew since (a
     * program idle after its last step), the one named last. */
    int unknown;
    const char *site = growing_site(d, sf, L.view.steps_total, &unknown);
    if (site) snprintf(L.last_site[d], sizeof L.last_site[d], "%s", site);
    else if (L.last_site[d][0]) site = L.last_site[d];
    if (sf) snprintf(when, sizeof when, "%llu step%s", (unsigned long long)sf->full_in_steps, sf->full_in_steps == 1 ? "" : "s");
    else if (f->full_in_ns < 120000000000ull) snprintf(when, sizeof when, "%.0f seconds", (double)f->full_in_ns / 1e9);
    else snprintf(when, sizeof when, "%.1f minutes", (double)f->full_in_ns / 60e9);
    /* A site's name too long for the line is cut in its middle: its
     * function and its file:line stay. */
    int k = snprintf(line, sizeof line, "at +%s %s, device %d is full (%s%s) in %s%s", rate, sf ? "per step" : "a minute",
                     d, cap, by_limit ? ", VRAMTRACE_LIMIT" : "", when, site ? "; it grows at " : "");
    if (site && k > 0 && (size_t)k < sizeof line) vt_cut_middle(line + k, sizeof line - (size_t)k, site);
    const struct vt_view *v = &L.view;
    pthread_mutex_lock(&forecast_lock);
    snprintf(kept_forecast.line, sizeof kept_forecast.line, "%s", line);
    kept_forecast.device = d;
    kept_forecast.step = sf && v->nsteps ? v->steps[v->nsteps - 1].step : 0;
    kept_forecast.step_live = sf && v->nsteps && d < v->steps[v->nsteps - 1].ndevices
                                  ? v->steps[v->nsteps - 1].live_bytes[d] : 0;
    pthread_mutex_unlock(&forecast_lock);
    /* Once per process, the forecast's line goes where the reports go:
     * to stderr through the capped warning (vt_warn_as), to stdout, or
     * added to the report file (a program whose reports are sent away keeps its stderr
     * its own); to stderr when the reports are off or the file cannot take
     * it. The forecast is in the dump, top and the metrics either way.
     * Where no round since the growth began is known yet, the line waits
     * for the next round, which knows one: the one line a user sees
     * while the job runs names what grows. */
    if (!L.warned && !unknown) {
        L.warned = 1;
        struct vt_sigpipe held;
        vt_sigpipe_hold(&held);
        /* In a job of several ranks, which one it is about: their lines
         * share a log, as the post-mortems' first lines say. */
        char place[320], said[sizeof line + sizeof place + 4], full[sizeof said + 32];
        if (vt_output_job_place(place, sizeof place)) snprintf(said, sizeof said, "%s: %s", place, line);
        else snprintf(said, sizeof said, "%s", line);
        snprintf(full, sizeof full, "vramtrace: forecast: %s", said);
        if (strcmp(vt_opt.report, "stderr") == 0 || vt_output_report_line(full) != 0) vt_warn_as("forecast", "%s", said);
        vt_sigpipe_release(&held);
    }
}

/* Device d's growth per step and forecast from the view's newest step
 * boundaries (sf zero when the process has fewer than two). */
static void step_forecast(const struct vt_view *v, int d, uint64_t live, uint64_t capacity, uint64_t horizon_ns,
                          struct vt_step_forecast *sf) {
    uint64_t step[VT_VIEW_STEPS], at[VT_VIEW_STEPS], bytes[VT_VIEW_STEPS];
    for (uint32_t i = 0; i < v->nsteps; i++) {
        step[i] = v->steps[i].step;
        at[i] = v->steps[i].time_ns;
        bytes[i] = d < v->steps[i].ndevices ? v->steps[i].live_bytes[d] : 0;
    }
    vt_forecast_steps(sf, step, at, bytes, (int)v->nsteps, live, capacity, horizon_ns);
}

/* Whether growth is measured per step: the program marks steps, and its
 * newest boundary is no older than VT_LIVE_STEPS_STALE of its step times
 * (their mean over the boundaries of the view), VT_LIVE_STEPS_STALE_MIN_NS
 * at least (a program that waits between runs of steps, for its input or
 * the next batch, keeps its forecast per step meanwhile). Past
 * that (an evaluation or a checkpoint between steps), growth is measured
 * by time, as when it marks none: per step, what grew in a step that has
 * not ended was seen by nobody (top said 0 while memory climbed 160 MiB a
 * second toward full, and nothing was forecast). */
#define VT_LIVE_STEPS_STALE 3
#define VT_LIVE_STEPS_STALE_MIN_NS 5e9
static int steps_current(const struct vt_view *v) {
    if (v->nsteps < 2) return 0;
    const struct vt_step *a = &v->steps[0], *z = &v->steps[v->nsteps - 1];
    double per_step = z->step > a->step ? (double)(z->time_ns - a->time_ns) / (double)(z->step - a->step) : 0;
    double stale = per_step * VT_LIVE_STEPS_STALE;
    if (stale < VT_LIVE_STEPS_STALE_MIN_NS) stale = VT_LIVE_STEPS_STALE_MIN_NS;
    uint64_t now = vt_now_ns();
    return now <= z->time_ns || (double)(now - z->time_ns) <= stale;
}

static int stopping(void) { return __atomic_load_n(&L.started, __ATOMIC_ACQUIRE) == 3; }

/* The segment cannot be made: one warning, and the thread waits for the
 * exit (publisher). Where there is no live directory (a container without
 * /dev/shm) nothing is said: there is nowhere to publish. */
static void unusable(void) {
    int e = errno;
    int running = 1;
    if (!__atomic_compare_exchange_n(&L.started, &running, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
    char dir[4096];
    struct stat st;
    if (stat(vt_live_dir(dir, sizeof dir), &st) != 0) return;
    errno = e;
    vt_warn("cannot create the live segment %s: %s; vramtrace top and metrics will not see this process",
            L.path[0] ? L.path : "in the live directory", strerror(errno));
}

/* One round: the view, the forecast's samples, and the segment when
 * anything changed. */
static void publish(void) {
    int changed = vt_tracker_view(&L.view);
    const struct vt_view *v = &L.view;
    if (!v->stamp) return;
    if (changed) {
        label_new_sites(v);
        group_sites(v);
    }
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    uint64_t now = (uint64_t)mono.tv_sec * 1000000000ull + (uint64_t)mono.tv_nsec;
    struct vt_live_segment *n = &L.next;
    int ndev = 0, closed = 0;
    int per_step = steps_current(v);
    /* The device that fills first: its forecast is the process's. */
    struct soonest {
        int device, by_limit;
        uint64_t capacity, outside, when;
        struct vt_step_forecast sf;
    } first = {.device = -1};
    for (int d = 0; d < v->ndevices && d < VT_LIVE_DEVICES; d++) {
        const struct vt_device *src = &v->devices[d];
        if (!src->used) continue;
        /* What the tracked allocations can fill: the device less what is
         * held outside them (its CUDA context, other processes), as last
         * measured, or the budget (it counts the tracked bytes alone) where
         * that is less. A budget above the device's room counted steps the
         * device did not have: "full in 17 steps", its OOM 14 steps on. */
        uint64_t capacity = src->have_facts ? src->total_bytes : 0;
        uint64_t outside = v->outside[d] >= capacity ? 0 : v->outside[d];
        int by_limit = vt_opt.limit && (capacity == 0 || vt_opt.limit <= capacity - outside);
        if (by_limit) {
            capacity = vt_opt.limit;
            outside = 0;
        }
        struct vt_forecast *f = &L.fc[d];
        closed |= vt_forecast_sample(f, now, src->live_bytes, capacity - outside);
        struct vt_live_device *o = &n->devices[ndev++];
        memset(o, 0, sizeof *o);
        o->ordinal = d;
        if (src->have_facts) {
            o->flags |= VT_LIVE_DEV_FACTS;
            memcpy(o->name, src->name, sizeof o->name - 1); /* both end in a NUL */
            memcpy(o->uuid, src->uuid, sizeof o->uuid);
            vt_utf8_whole(o->name, sizeof o->name);
            o->total_bytes = src->total_bytes;
        }
        o->capacity_bytes = capacity;
        o->live_bytes = src->live_bytes;
        o->live_count = src->live_count;
        o->peak_bytes = src->peak_bytes;
        o->alloc_count = src->alloc_count;
        o->free_count = src->free_count;
        o->failed_count = src->failed_count;
        o->oom_count = src->oom_count;
        o->growth_per_min = f->growth_per_min;
        struct vt_step_forecast sf = {0};
        if (per_step) {
            step_forecast(v, d, src->live_bytes, capacity - outside, f->horizon_ns, &sf);
            o->flags |= VT_LIVE_DEV_PER_STEP;
            o->growth_per_step = sf.growth_per_step;
        }
        memcpy(o->kind_live_bytes, v->kinds[d + 1].live_bytes, sizeof v->kinds[d + 1].live_bytes);
        memcpy(o->kind_peak_bytes, v->kinds[d + 1].peak_bytes, sizeof v->kinds[d + 1].peak_bytes);
        if (per_step ? sf.full : f->full) {
            o->flags |= VT_LIVE_DEV_FORECAST;
            o->forecast_ns = per_step ? sf.full_in_ns : f->full_in_ns;
            o->forecast_steps = per_step ? sf.full_in_steps : 0;
            /* Per step, in the steps every device counts alike. */
            uint64_t when = per_step ? sf.full_in_steps : f->full_in_ns;
            if (first.device < 0 || when < first.when)
                first = (struct soonest){d, by_limit, capacity, outside, when, sf};
        }
    }
    if (first.device >= 0) {
        forecast_of(first.device, &L.fc[first.device], per_step ? &first.sf : NULL, first.capacity, first.outside,
                    first.by_limit);
    } else {
        /* None holds now (the growth stopped, or fell back to where it
         * was): the segment and the dump keep none. The line printed was
         * its moment's warning; kept, it told a job flat for 50 steps it
         * would be full in 301. */
        pthread_mutex_lock(&forecast_lock);
        kept_forecast.line[0] = '\0';
        pthread_mutex_unlock(&forecast_lock);
    }
    {
        /* The sites at this round, for the next rounds' per-step forecast:
         * one entry a step count, the newest round's at that count (the
         * last before the next step: a model loaded before the first step
         * is in the entry of step 0). */
        int same = L.nrounds && L.rounds[L.nrounds - 1].steps == v->steps_total;
        if (!same && L.nrounds == VT_LIVE_ROUNDS) {
            memmove(L.rounds, L.rounds + 1, (VT_LIVE_ROUNDS - 1) * sizeof L.rounds[0]);
            L.nrounds--;
        }
        struct past_round *r = &L.rounds[same ? L.nrounds - 1 : L.nrounds++];
        r->steps = v->steps_total;
        r->n = L.ngroups < VT_LIVE_SITES ? L.ngroups : VT_LIVE_SITES;
        for (uint32_t i = 0; i < r->n; i++) r->s[i] = (struct past_site){L.groups[i].label, L.groups[i].bytes};
    }
    if (closed) { /* the sites at this window's close, oldest first */
        if (L.npasts == VT_FORECAST_RISES + 1) {
            memmove(L.past, L.past + 1, VT_FORECAST_RISES * sizeof L.past[0]);
            memmove(L.npast, L.npast + 1, VT_FORECAST_RISES * sizeof L.npast[0]);
            L.npasts--;
        }
        uint32_t m = L.ngroups < VT_LIVE_SITES ? L.ngroups : VT_LIVE_SITES;
        for (uint32_t i = 0; i < m; i++) L.past[L.npasts][i] = (struct past_site){L.groups[i].label, L.groups[i].bytes};
        L.npast[L.npasts++] = m;
    }
    n->ndevices = ndev;
    changed |= vt_live_torch_fill(n);
    if (v->steps_total) { /* the tracker's count: vramtrace_step and the companion's steps */
        n->flags |= VT_LIVE_STEPS;
        n->steps = v->steps_total;
    }
    if (!changed && !closed && L.seg) return;
    if (!L.seg) {
        pthread_mutex_lock(&place_lock);
        int rc = stopping() ? 1 : create_segment();
        pthread_mutex_unlock(&place_lock);
        if (rc != 0) {
            if (rc < 0) unusable();
            return;
        }
    }
    n->nsites = (int32_t)(L.ngroups < VT_LIVE_SITES ? L.ngroups : VT_LIVE_SITES);
    for (int32_t i = 0; i < n->nsites; i++) {
        struct vt_live_site *s = &n->sites[i];
        s->bytes = L.groups[i].bytes;
        s->count = L.groups[i].count;
        s->stack = L.groups[i].stack;
        vt_cut_middle(s->label, sizeof s->label, L.groups[i].label);
    }
    n->live_bytes = v->totals.live_bytes;
    n->peak_bytes = v->totals.peak_bytes;
    n->host_live_bytes = v->totals.host_live_bytes;
    n->imported_live_bytes = v->totals.imported_live_bytes;
    n->alloc_count = v->totals.alloc_count;
    n->free_count = v->totals.free_count;
    n->failed_count = v->totals.failed_count;
    n->oom_count = v->totals.oom_count;
    n->unknown_frees = v->totals.unknown_frees;
    memcpy(n->host_kind_live_bytes, v->kinds[VT_KINDS_HOST].live_bytes, sizeof v->kinds[VT_KINDS_HOST].live_bytes);
    memcpy(n->host_kind_peak_bytes, v->kinds[VT_KINDS_HOST].peak_bytes, sizeof v->kinds[VT_KINDS_HOST].peak_bytes);
    n->missed = v->totals.missed;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    n->updated_unix_ns = (uint64_t)wall.tv_sec * 1000000000ull + (uint64_t)wall.tv_nsec;
    n->publications++;
    vt_live_forecast(n->forecast, sizeof n->forecast);
    /* The writer's half of the sequence lock: odd (an acquiring add, which
     * keeps the body's stores after it), the body, even (released). */
    uint64_t seq = __atomic_fetch_add(&L.seg->seq, 1, __ATOMIC_ACQUIRE);
    memcpy((void *)((char *)L.seg + offsetof(struct vt_live_segment, pid)), (char *)n + offsetof(struct vt_live_segment, pid),
           sizeof *n - offsetof(struct vt_live_segment, pid));
    __atomic_store_n(&L.seg->magic, VT_LIVE_MAGIC, __ATOMIC_RELAXED);
    L.seg->version = VT_LIVE_VERSION;
    L.seg->size = sizeof *n;
    __atomic_store_n(&L.seg->seq, seq + 2, __ATOMIC_RELEASE);
    if (!L.placed) {
        pthread_mutex_lock(&place_lock);
        int rc = stopping() ? 1 : place_segment();
        pthread_mutex_unlock(&place_lock);
        if (rc < 0) unusable();
    }
}

/* The publisher holds round_lock whenever it is not asleep, from its first
 * line on (the facts it reads allocate), so that the fork handler, which
 * takes the lock, never forks it mid-allocation. Where the segment cannot
 * be made it waits, holding nothing, until the exit: a thread that ended
 * would free its own memory at a moment nobody chose. */
static void *publisher(void *arg) {
    (void)arg;
    pthread_mutex_lock(&round_lock);
    struct vt_process_facts pf;
    vt_process_facts(&pf);
    struct vt_live_segment *n = &L.next;
    n->pid = pf.pid;
    n->rank = pf.rank;
    n->local_rank = pf.local_rank;
    n->process_start = pf.start;
    memcpy(n->boot_id, pf.boot_id, sizeof n->boot_id);
    memcpy(n->host, pf.host, sizeof n->host);
    memcpy(n->command, pf.command, sizeof n->command);
    vt_utf8_whole(n->command, sizeof n->command);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    n->start_unix_ns = (uint64_t)wall.tv_sec * 1000000000ull + (uint64_t)wall.tv_nsec - vt_now_ns();
    for (int d = 0; d < VT_MAX_DEVICES; d++) vt_forecast_init(&L.fc[d], vt_opt.forecast);
    while (__atomic_load_n(&L.started, __ATOMIC_ACQUIRE) == 1) {
        publish();
        pthread_mutex_unlock(&round_lock);
        struct timespec ts = {0, (long)VT_LIVE_INTERVAL_NS};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        pthread_mutex_lock(&round_lock);
    }
    while (__atomic_load_n(&L.started, __ATOMIC_ACQUIRE) == 2) pthread_cond_wait(&parked, &round_lock);
    pthread_mutex_unlock(&round_lock);
    return NULL;
}

void vt_live_start(void) {
    if (!vt_opt.live || __atomic_exchange_n(&L.started, 1, __ATOMIC_ACQ_REL)) return;
    vt_thread_stop_with(vt_live_stop);
    int rc = vt_thread_start_quiet(publisher, "vramtrace-live");
    if (rc != 0) vt_warn("cannot start the live publisher: %s; vramtrace top and metrics will not see this process",
                         strerror(rc));
}

/* No round starts after this; one under way is waited for up to
 * VT_LIVE_EXIT_WAIT_NS (then the mapping stays, only the name goes). The
 * segment's file goes either way, under its name or its temporary one:
 * the publisher makes and names it only under place_lock, and not once
 * the exit has begun. */
void vt_live_stop(void) {
    /* Never started (most processes): nothing to take down, and no start
     * after this one begins. */
    int never = 0;
    if (__atomic_compare_exchange_n(&L.started, &never, 3, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
    __atomic_store_n(&L.started, 3, __ATOMIC_RELEASE);
    struct timespec until;
    vt_deadline(&until, VT_LIVE_EXIT_WAIT_NS);
    int held = pthread_mutex_timedlock(&round_lock, &until) == 0;
    pthread_mutex_lock(&place_lock);
    if (L.placed) unlink(L.path);
    else if (L.created) unlink(tmp_path);
    pthread_mutex_unlock(&place_lock);
    if (held) {
        pthread_cond_broadcast(&parked);
        pthread_mutex_unlock(&round_lock);
    }
}

void vt_live_fork_prepare(void) { pthread_mutex_lock(&round_lock); }
void vt_live_fork_parent(void) { pthread_mutex_unlock(&round_lock); }

void vt_live_reset_child(void) {
    if (L.seg) munmap((void *)L.seg, sizeof(struct vt_live_segment));
    vt_fd_drop(&live_fd); /* only where still the segment: the number may be the program's now */
    for (size_t i = 0; i < L.nlabels; i++) free(L.labels[i]);
    free(L.labels);
    memset(&L, 0, sizeof L);
    live_fd = (struct vt_fd)VT_FD_NONE;
    pthread_mutex_init(&forecast_lock, NULL);
    pthread_mutex_init(&round_lock, NULL);
    pthread_mutex_init(&place_lock, NULL);
    pthread_cond_init(&parked, NULL);
    memset(&kept_forecast, 0, sizeof kept_forecast);
    vt_live_torch_reset_child();
}

const char *vt_live_forecast(char *buf, size_t size) {
    pthread_mutex_lock(&forecast_lock);
    snprintf(buf, size, "%s", kept_forecast.line);
    pthread_mutex_unlock(&forecast_lock);
    return buf;
}

const char *vt_live_forecast_at(const struct vt_snapshot *s, char *buf, size_t size) {
    pthread_mutex_lock(&forecast_lock);
    snprintf(buf, size, "%s", kept_forecast.line);
    if (buf[0] && kept_forecast.step && s->nsteps) {
        const struct vt_step *z = &s->steps[s->nsteps - 1];
        int d = kept_forecast.device;
        uint64_t now = d < z->ndevices ? z->live_bytes[d] : 0;
        if (z->step > kept_forecast.step && now < kept_forecast.step_live) buf[0] = '\0';
    }
    pthread_mutex_unlock(&forecast_lock);
    return buf;
}
