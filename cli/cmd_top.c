/* cmd_top.c -- `vramtrace top [PID] [--once] [--bytes] [--interval S]
 * [--sort KEY]`: every traced process of this user on this host, from
 * their live segments (livefile.h), refreshed like top.
 *
 * One frame is a list of lines (frame()), drawn by ncurses or, with
 * --once or on a terminal that cannot move its cursor, printed as plain
 * text: a header, a row per process and device, and the call sites of the
 * selected process. */
#define _GNU_SOURCE
#include <errno.h>
#include <locale.h>
#include <ncurses.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <term.h>
#include <time.h>
#include <unistd.h>

#include "../common/format.h"
#include "cli.h"
#include "livefile.h"
#include "reporters.h"

enum sort_key { SORT_LIVE, SORT_PEAK, SORT_GROWTH, SORT_PID };
static const char *const sort_names[] = {"live", "peak", "growth", "pid"};

struct top_opts {
    int pid;           /* 0: every process */
    int pid_seen;      /* that process was shown in an earlier frame */
    size_t traced;     /* traced processes of this user, shown or not */
    int once, bytes;
    long interval_ms;
    enum sort_key sort;
    int sites;         /* rows of call sites */
};

/* A byte count as a column shows it: exact with --bytes, else for people. */
static const char *bytes_cell(const struct top_opts *o, uint64_t b, char *buf, size_t size) {
    if (o->bytes) snprintf(buf, size, "%llu", (unsigned long long)b);
    else vt_fmt_bytes(b, buf, size);
    return buf;
}

/* A process as a frame shows it: its segment, and whether it is stopped
 * (livefile.h's vt_live_stopped: its growth and time to full are what
 * they were when it stopped, not now, and not shown). */
struct proc {
    const struct vt_live_segment *s;
    int stopped;
    /* The growth sort's keys (growth_keys). */
    uint64_t full_ns, growth;
};

/* The growth sort's keys of a process: the time until its first device
 * to fill is full (UINT64_MAX without a forecast), and its growth as its
 * GROWTH column shows it, summed over its devices: bytes a step where it
 * has steps, else a minute. Growth a step and growth a minute are not one
 * measure; the time to full, which both forecasts have, is: a process
 * with steps had none of growth a minute, and sorted by pid. A stopped
 * process grows not now: neither. */
static void growth_keys(struct proc *p) {
    const struct vt_live_segment *s = p->s;
    int64_t g = 0; /* held at the ends of its range: any figure may be in a segment */
    p->full_ns = UINT64_MAX;
    for (int i = 0; i < s->ndevices && !p->stopped; i++) {
        const struct vt_live_device *d = &s->devices[i];
        int64_t by = (d->flags & VT_LIVE_DEV_PER_STEP) ? d->growth_per_step : d->growth_per_min;
        if (__builtin_add_overflow(g, by, &g)) g = by > 0 ? INT64_MAX : INT64_MIN;
        if ((d->flags & VT_LIVE_DEV_FORECAST) && d->forecast_ns < p->full_ns) p->full_ns = d->forecast_ns;
    }
    p->growth = g > 0 ? (uint64_t)g : 0;
}

static enum sort_key sort_by;
static int proc_order(const void *a, const void *b) {
    const struct proc *px = a, *py = b;
    const struct vt_live_segment *x = px->s, *y = py->s;
    uint64_t kx = 0, ky = 0;
    switch (sort_by) {
    case SORT_LIVE: kx = x->live_bytes; ky = y->live_bytes; break;
    case SORT_PEAK: kx = x->peak_bytes; ky = y->peak_bytes; break;
    case SORT_GROWTH: /* the soonest full first, then the largest growth */
        if (px->full_ns != py->full_ns) return px->full_ns < py->full_ns ? -1 : 1;
        kx = px->growth;
        ky = py->growth;
        break;
    case SORT_PID: break;
    }
    if (kx != ky) return kx < ky ? 1 : -1;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* The lines of one frame. */
struct text_lines {
    char **v;
    size_t n, cap;
    size_t selected_line; /* the selected process's first row, or SIZE_MAX */
    size_t tail_line;     /* the first line after the process rows (the call sites'), or SIZE_MAX */
};

static void add_line(struct text_lines *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_line(struct text_lines *L, const char *fmt, ...) {
    if (L->n == L->cap) {
        size_t want = L->cap ? L->cap * 2 : 64;
        char **bigger = realloc(L->v, want * sizeof *bigger);
        if (!bigger) return;
        L->v = bigger;
        L->cap = want;
    }
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) >= 0) L->v[L->n++] = s;
    va_end(ap);
}

static void free_lines(struct text_lines *L) {
    for (size_t i = 0; i < L->n; i++) free(L->v[i]);
    free(L->v);
    memset(L, 0, sizeof *L);
}

/* The time (or, where the process has steps, the steps) left before a
 * forecast fills its device, for people. */
static const char *forecast_cell(const struct vt_live_device *d, char *buf, size_t size) {
    if (!(d->flags & VT_LIVE_DEV_FORECAST)) snprintf(buf, size, "-");
    else if (d->flags & VT_LIVE_DEV_PER_STEP) snprintf(buf, size, "%llu steps", (unsigned long long)d->forecast_steps);
    else if (d->forecast_ns < 60000000000ull) snprintf(buf, size, "%.0f s", (double)d->forecast_ns / 1e9);
    else snprintf(buf, size, "%.1f min", (double)d->forecast_ns / 60e9);
    return buf;
}

/* Why a frame shows no process. Of `top PID`, what became of that process
 * and how many others run: "no traced process of this user is running"
 * read as the whole job stopped, when one rank had ended. Its status is
 * not known here (vramtrace top is not its parent). */
static void absent_line(const struct top_opts *o, struct text_lines *L) {
    if (o->pid <= 0) {
        add_line(L, "(no traced process of this user is running)");
        return;
    }
    const char *what;
    if (o->pid_seen) what = "has ended";
    else if (kill(o->pid, 0) == 0 || errno == EPERM) what = "runs but publishes no live counters (not traced, or VRAMTRACE_LIVE=0)";
    else what = "is not running";
    /* Not among them: the others. */
    if (o->traced == 0) add_line(L, "(pid %d %s; no other traced process of this user is running)", o->pid, what);
    else add_line(L, "(pid %d %s; %zu other traced process%s of this user %s running)", o->pid, what, o->traced,
                  o->traced == 1 ? "" : "es", o->traced == 1 ? "is" : "are");
}

/* The frame for procs[0..n) (sorted), `sel` the selected process. */
static void frame(const struct top_opts *o, const struct proc *procs, size_t n, size_t sel, struct text_lines *L) {
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    char when[32];
    strftime(when, sizeof when, "%H:%M:%S", localtime_r(&now, &tm));
    char showing[48] = "";
    if (o->pid > 0) snprintf(showing, sizeof showing, ", showing pid %d", o->pid);
    add_line(L, "vramtrace top - %s - %s - %zu traced process%s%s - sort: %s", when, host, o->traced,
             o->traced == 1 ? "" : "es", showing, sort_names[o->sort]);
    add_line(L, "%7s %4s %3s %12s %12s %12s %12s %9s  %s", "PID", "RANK", "DEV", "LIVE", "PEAK", "RESERVED",
             "GROWTH", "FULL IN", "COMMAND");
    L->selected_line = L->tail_line = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const struct vt_live_segment *s = procs[i].s;
        char cmd[256];
        vr_safe(s->command, cmd, sizeof cmd);
        if (i == sel) L->selected_line = L->n;
        int rows = s->ndevices > 0 ? s->ndevices : 1;
        for (int r = 0; r < rows; r++) {
            char live[32], peak[32], res[32], grow[40], full[32], dev[16];
            const struct vt_live_device *d = s->ndevices > 0 ? &s->devices[r] : NULL;
            snprintf(dev, sizeof dev, "%d", d ? d->ordinal : 0);
            bytes_cell(o, d ? d->live_bytes : 0, live, sizeof live);
            bytes_cell(o, d ? d->peak_bytes : 0, peak, sizeof peak);
            if (d && (d->flags & VT_LIVE_DEV_TORCH)) bytes_cell(o, d->torch_reserved_bytes, res, sizeof res);
            else snprintf(res, sizeof res, "-");
            int per_step = d && (d->flags & VT_LIVE_DEV_PER_STEP);
            int64_t g = !d ? 0 : per_step ? d->growth_per_step : d->growth_per_min;
            if (d && procs[i].stopped) {
                snprintf(grow, sizeof grow, "stopped");
            } else if (g > 0) {
                char b[32];
                snprintf(grow, sizeof grow, "+%s/%s", bytes_cell(o, (uint64_t)g, b, sizeof b), per_step ? "step" : "min");
            } else {
                snprintf(grow, sizeof grow, "0");
            }
            if (d && !procs[i].stopped) forecast_cell(d, full, sizeof full);
            else snprintf(full, sizeof full, "-");
            if (r == 0)
                add_line(L, "%7d %4d %3s %12s %12s %12s %12s %9s  %s", s->pid, s->rank, dev, live, peak, res, grow,
                         full, cmd);
            else
                add_line(L, "%7s %4s %3s %12s %12s %12s %12s %9s", "", "", dev, live, peak, res, grow, full);
        }
        /* Pinned host memory (and memory of no device) on a row of its own,
         * as the metrics give it with gpu="host": a process holding only
         * that read 0 B. Its peak is per kind only: none shown. */
        if (s->host_live_bytes > 0) {
            char live[32];
            bytes_cell(o, s->host_live_bytes, live, sizeof live);
            add_line(L, "%7s %4s %4s%12s %12s %12s %12s %9s", "", "", "host", live, "-", "-", "-", "-");
        }
    }
    if (n == 0) {
        absent_line(o, L);
        return;
    }
    const struct vt_live_segment *s = procs[sel].s;
    char cmd[256];
    vr_safe(s->command, cmd, sizeof cmd);
    L->tail_line = L->n;
    add_line(L, "%s", "");
    char fc[sizeof s->forecast * 4];
    vr_safe(s->forecast, fc, sizeof fc);
    /* The forecast here is the last one made, as the dump keeps it; of a
     * stopped process, made before it stopped. */
    add_line(L, "call sites of pid %d (%s)%s: %llu allocations, %llu frees, %llu failed%s%s", s->pid, cmd,
             procs[sel].stopped ? ", stopped" : "", (unsigned long long)s->alloc_count,
             (unsigned long long)s->free_count, (unsigned long long)s->failed_count,
             fc[0] ? procs[sel].stopped ? "; forecast before it stopped: " : "; forecast: " : "", fc);
    add_line(L, "%12s %8s  %s", "BYTES", "COUNT", "SITE");
    for (int i = 0; i < s->nsites && i < o->sites; i++) {
        char b[32], label[VT_LIVE_LABEL * 4];
        vr_safe(s->sites[i].label, label, sizeof label);
        add_line(L, "%12s %8llu  %s", bytes_cell(o, s->sites[i].bytes, b, sizeof b),
                 (unsigned long long)s->sites[i].count, label);
    }
    if (s->nsites == 0) add_line(L, "%12s %8s  %s", "0", "0", "(nothing live)");
}

/* The processes to show (o->pid's alone where it is set), sorted, in
 * *procs (every traced process's segment in *segs, their count in
 * o->traced); both malloc'd, or NULL. */
static void scan_sorted(struct top_opts *o, struct vt_live_segment **segs, struct proc **procs, size_t *n) {
    size_t all;
    *segs = vt_live_scan(0, &all);
    *procs = all ? malloc(all * sizeof **procs) : NULL;
    o->traced = *procs ? all : 0;
    *n = 0;
    if (!*procs) {
        free(*segs);
        *segs = NULL;
        return;
    }
    for (size_t i = 0; i < all; i++) {
        if (o->pid > 0 && (*segs)[i].pid != o->pid) continue;
        struct proc *p = &(*procs)[(*n)++];
        *p = (struct proc){&(*segs)[i], vt_live_stopped((*segs)[i].pid), 0, 0};
        growth_keys(p);
    }
    if (*n && o->pid > 0) o->pid_seen = 1;
    sort_by = o->sort;
    qsort(*procs, *n, sizeof **procs, proc_order);
}

/* scan_sorted, and the index of the process selected before (*sel_pid,
 * kept; the first when it is gone). */
static size_t scan_selected(struct top_opts *o, struct vt_live_segment **segs, struct proc **procs, size_t *n,
                            int *sel_pid) {
    scan_sorted(o, segs, procs, n);
    size_t sel = 0;
    for (size_t i = 0; i < *n; i++)
        if ((*procs)[i].s->pid == *sel_pid) sel = i;
    if (*n) *sel_pid = (*procs)[sel].s->pid;
    return sel;
}

static int top_once(struct top_opts *o) {
    size_t n;
    struct vt_live_segment *segs;
    struct proc *procs;
    scan_sorted(o, &segs, &procs, &n);
    struct text_lines L = {0};
    frame(o, procs, n, 0, &L);
    for (size_t i = 0; i < L.n; i++) printf("%s\n", L.v[i]);
    free_lines(&L);
    free(procs);
    free(segs);
    if (o->pid > 0 && n == 0) {
        fprintf(stderr, "vramtrace top: pid %d is not a traced process of this user\n", o->pid);
        return 1;
    }
    return vt_cli_flush("vramtrace top");
}

/* A key's effect on the sort or the selection (of procs[0..n), sel the
 * selected one); 1 for q. */
static int key(struct top_opts *o, int c, const struct proc *procs, size_t n, size_t sel, int *sel_pid) {
    if (c == 'q' || c == 'Q') return 1;
    if ((c == KEY_DOWN || c == 'j') && sel + 1 < n) *sel_pid = procs[sel + 1].s->pid;
    if ((c == KEY_UP || c == 'k') && sel > 0) *sel_pid = procs[sel - 1].s->pid;
    if (c == 'l') o->sort = SORT_LIVE;
    if (c == 'p') o->sort = SORT_PEAK;
    if (c == 'g') o->sort = SORT_GROWTH;
    if (c == 'n') o->sort = SORT_PID;
    return 0;
}

/* The terminal's width for the plain frames: $COLUMNS as curses takes it,
 * else the terminal's own; 0 when neither says. */
static size_t plain_width(void) {
    const char *cols = getenv("COLUMNS");
    long v;
    if (cols && vt_cli_count(cols, 1, 100000, &v) == 0) return (size_t)v;
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 0;
}

/* A line cut to `width` characters (0: whole), a UTF-8 character never
 * cut in two. */
static void put_cut(const char *line, size_t width) {
    size_t chars = 0, at = 0;
    for (; line[at]; at++) {
        if (((unsigned char)line[at] & 0xC0) == 0x80) continue;
        if (width && chars == width) break;
        chars++;
    }
    fwrite(line, 1, at, stdout);
    putchar('\n');
}

/* On a terminal that cannot move its cursor (TERM=dumb: Emacs's shell,
 * some CI and web consoles), where curses drew a title and half a header
 * and never a row: each frame printed whole, one after another, without
 * escapes, cut to the terminal's width, every interval; keys (the
 * screen's) read as lines, after Enter. */
static int top_plain(struct top_opts *o) {
    size_t width = plain_width();
    int sel_pid = 0, input = 1, frames = 0;
    for (;;) {
        size_t n;
        struct vt_live_segment *segs;
        struct proc *procs;
        size_t sel = scan_selected(o, &segs, &procs, &n, &sel_pid);
        struct text_lines L = {0};
        frame(o, procs, n, sel, &L);
        if (frames++) putchar('\n');
        for (size_t i = 0; i < L.n; i++) put_cut(L.v[i], width);
        free_lines(&L);
        if (fflush(stdout) != 0) {
            free(procs);
            free(segs);
            return vt_cli_flush("vramtrace top");
        }
        /* Until the interval is over or a line of keys comes (standard
         * input closed: no more keys, frames still). */
        struct pollfd pf = {STDIN_FILENO, POLLIN, 0};
        int quit = 0, r = poll(&pf, input, (int)o->interval_ms);
        if (!input) pf.revents = 0;
        if (r > 0 && (pf.revents & (POLLIN | POLLHUP))) {
            char buf[256];
            ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
            if (got <= 0) input = 0;
            for (ssize_t i = 0; i < got && !quit; i++) quit = key(o, buf[i], procs, n, sel, &sel_pid);
        }
        free(procs);
        free(segs);
        if (quit) return vt_cli_flush("vramtrace top");
    }
}

/* The screen, refreshed every interval or at a key: up/down (or k/j)
 * select a process, l/p/g/n sort by live, peak, growth, pid, q quits. */
static int top_screen(struct top_opts *o) {
    setlocale(LC_ALL, "");
    if (!isatty(STDOUT_FILENO)) {
        fprintf(stderr, "vramtrace top: cannot draw on this terminal (try --once)\n");
        return 1;
    }
    /* A terminal that curses knows but that cannot move its cursor gets
     * plain frames (top_plain). */
    int err = 0;
    if (setupterm(NULL, STDOUT_FILENO, &err) == OK) {
        char *cup = tigetstr("cup");
        del_curterm(cur_term);
        if (!cup || cup == (char *)-1) return top_plain(o);
    }
    /* newterm, not initscr: initscr on a terminal it does not know (TERM
     * unset or wrong) prints its own line and exits. */
    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        fprintf(stderr, "vramtrace top: cannot draw on this terminal (try --once)\n");
        return 1;
    }
    set_term(scr);
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    int sel_pid = 0;
    for (;;) {
        size_t n;
        struct vt_live_segment *segs;
        struct proc *procs;
        size_t sel = scan_selected(o, &segs, &procs, &n, &sel_pid);
        o->sites = LINES - 6 - (int)n > 4 ? LINES - 6 - (int)n : 4;
        struct text_lines L = {0};
        frame(o, procs, n, sel, &L);
        erase();
        /* More lines than rows: the process rows scroll so that the
         * selected one shows, and the selected process's call sites keep
         * at least their title, header and two rows below them (they were
         * cut off, the selection run off the screen). */
        size_t rows = LINES > 0 ? (size_t)LINES : 0, head = 2, first = head, shown = L.n;
        size_t tail = L.tail_line == SIZE_MAX ? L.n : L.tail_line;
        if (L.n > rows && tail > head && rows > head) {
            size_t avail = rows - head, procs = tail - head, after = L.n - tail;
            size_t keep = after < 5 ? after : avail / 2 > 5 ? (after < avail / 2 ? after : avail / 2) : 5;
            if (keep > avail) keep = avail;
            shown = avail - keep < procs ? avail - keep : procs;
            size_t sel_at = L.selected_line == SIZE_MAX ? head : L.selected_line;
            first = sel_at >= head + shown / 2 ? sel_at - shown / 2 : head;
            if (first + shown > tail) first = tail - shown;
        }
        int y = 0;
        for (size_t i = 0; i < L.n && y < LINES; i++) {
            if (L.n > rows && i >= head && i < tail && (i < first || i >= first + shown)) continue;
            int hi = i == 1 || i == L.selected_line;
            if (hi) attron(A_REVERSE);
            mvaddnstr(y++, 0, L.v[i], COLS);
            if (hi) attroff(A_REVERSE);
        }
        refresh();
        free_lines(&L);
        timeout((int)o->interval_ms);
        int quit = key(o, getch(), procs, n, sel, &sel_pid);
        free(procs);
        free(segs);
        if (quit) break;
    }
    endwin();
    delscreen(scr);
    return 0;
}

static void top_help(void) {
    printf("usage: vramtrace top [PID] [--once] [--bytes] [--interval SECONDS] [--sort KEY]\n\n"
           "Every process of this user traced by vramtrace on this host, from the live\n"
           "counters each publishes (VRAMTRACE_LIVE): per device live, peak and PyTorch's\n"
           "reserved bytes, sustained growth a minute, the time until a forecast fills\n"
           "the device, and the call sites of the selected process.\n\n"
           "  PID               that process only\n"
           "  --once            print one frame as plain text and exit\n"
           "  --bytes           exact byte counts instead of KiB, MiB, GiB\n"
           "  --interval S      seconds between refreshes (default 1; 0.1 to 3600)\n"
           "  --sort KEY        live (default), peak, growth (the soonest full first, then\n"
           "                    the largest growth) or pid\n\n"
           "keys: up/down or k/j select a process; l, p, g, n sort by live, peak, growth,\n"
           "pid; q quits. On a terminal that cannot move its cursor (TERM=dumb) frames\n"
           "are printed one after another, and keys read after Enter. A stopped process\n"
           "(SIGSTOP, a debugger, a frozen cgroup) shows GROWTH 'stopped'.\n");
}

int vt_cmd_top(int argc, char **argv) {
    struct top_opts o = {.interval_ms = 1000, .sort = SORT_LIVE, .sites = 10};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long v;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            top_help();
            return vt_cli_flush("vramtrace top");
        } else if (strcmp(a, "--once") == 0) {
            o.once = 1;
        } else if (strcmp(a, "--bytes") == 0) {
            o.bytes = 1;
        } else if (strcmp(a, "--interval") == 0 && i + 1 < argc) {
            char *end;
            double s = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(s >= 0.1 && s <= 3600)) {
                fprintf(stderr, "vramtrace top: --interval takes seconds from 0.1 to 3600\n");
                return 2;
            }
            o.interval_ms = (long)(s * 1000);
        } else if (strcmp(a, "--sort") == 0 && i + 1 < argc) {
            const char *k = argv[++i];
            int found = -1;
            for (int s = 0; s < 4; s++)
                if (strcmp(k, sort_names[s]) == 0) found = s;
            if (found < 0) {
                fprintf(stderr, "vramtrace top: --sort takes live, peak, growth or pid\n");
                return 2;
            }
            o.sort = (enum sort_key)found;
        } else if (vt_cli_count(a, 1, 0x7fffffff, &v) == 0 && !o.pid) {
            o.pid = (int)v;
        } else if (strcmp(a, "--interval") == 0 || strcmp(a, "--sort") == 0) {
            fprintf(stderr, "vramtrace top: %s needs a value (see vramtrace top --help)\n", a);
            return 2;
        } else {
            char safe[128];
            fprintf(stderr, "vramtrace top: unknown argument '%s' (see vramtrace top --help)\n",
                    vr_safe(a, safe, sizeof safe));
            return 2;
        }
    }
    if (o.once) return top_once(&o);
    return top_screen(&o);
}
