/* format.c -- byte counts for people, strings for JSON. */
#include <inttypes.h>
#include <string.h>

#include "format.h"

/* A figure that rounds to 1024.00 of a unit is 1.00 of the next: 1048575
 * bytes, 1023.999 KiB, read "1024.00 KiB" where 1048576 read "1.00 MiB". */
const char *vt_fmt_bytes(uint64_t bytes, char *buf, size_t size) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) { v /= 1024.0; u++; }
    char num[32];
    snprintf(num, sizeof num, "%.2f", v);
    if (u < 5 && strcmp(num, "1024.00") == 0) { v /= 1024.0; u++; }
    snprintf(buf, size, "%.2f %s", v, units[u]);
    return buf;
}

const char *vt_fmt_growth(uint64_t rise, uint64_t units, const char *unit, uint64_t span_ns,
                          uint64_t per_unit, uint64_t run_steps, char *buf, size_t size) {
    char a[32], b[32], of[48] = "";
    if (run_steps > units) snprintf(of, sizeof of, " of the run's %llu", (unsigned long long)run_steps);
    if (strcmp(unit, "step") == 0)
        snprintf(buf, size, "+%s per step over the last %llu%s step%s (+%s in %.3f s)",
                 vt_fmt_bytes(per_unit, b, sizeof b), (unsigned long long)units, of, units == 1 && !of[0] ? "" : "s",
                 vt_fmt_bytes(rise, a, sizeof a), (double)span_ns / 1e9);
    else
        snprintf(buf, size, "+%s over %llu %s%s in %.3f s, %s per %s", vt_fmt_bytes(rise, a, sizeof a),
                 (unsigned long long)units, strcmp(unit, "second") == 0 ? "allocation" : unit, units == 1 ? "" : "s",
                 (double)span_ns / 1e9, vt_fmt_bytes(per_unit, b, sizeof b), unit);
    return buf;
}

char *vt_fmt_held(const char *holder, char *buf, size_t size) {
    size_t n = strlen(buf);
    if (holder && *holder && n < size) snprintf(buf + n, size - n, ", held by `%s`", holder);
    return buf;
}

char *vt_fmt_kept(uint64_t history_from_ns, char *buf, size_t size) {
    size_t n = strlen(buf);
    if (history_from_ns && n < size)
        snprintf(buf + n, size - n, "; figures of the history kept (events from %.3f s; before them, only its "
                 "allocations still live)", (double)history_from_ns / 1e9);
    return buf;
}

/* Length of a valid UTF-8 sequence starting at s, or 0. */
static int utf8_len(const unsigned char *s) {
    int n;
    if (s[0] < 0x80) return 1;
    else if ((s[0] & 0xe0) == 0xc0 && s[0] >= 0xc2) n = 2;
    else if ((s[0] & 0xf0) == 0xe0) n = 3;
    else if ((s[0] & 0xf8) == 0xf0 && s[0] <= 0xf4) n = 4;
    else return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return n;
}

void vt_json_string(FILE *f, const char *s) {
    if (s == NULL) { fputs("null", f); return; }
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') { fputc('\\', f); fputc(c, f); p++; continue; }
        if (c < 0x20) {
            switch (c) {
            case '\n': fputs("\\n", f); break;
            case '\t': fputs("\\t", f); break;
            case '\r': fputs("\\r", f); break;
            default: fprintf(f, "\\u%04x", c); break;
            }
            p++;
            continue;
        }
        int n = utf8_len(p);
        /* A byte that is not UTF-8 has no character to stand for: it is
         * written as the text \xNN (what every report shows for it), not as
         * U+00NN, which read back as another, real name ("lat\xe9n1" became
         * "lat\u00e9n1", a path that is not there). */
        if (n == 0) { fprintf(f, "\\\\x%02x", c); p++; continue; }
        fwrite(p, 1, (size_t)n, f);
        p += n;
    }
    fputc('"', f);
}

const char *vt_utf8_whole(char *buf, size_t size) {
    size_t n = strlen(buf);
    if (size == 0 || n + 1 < size) return buf;
    size_t i = n;
    while (i > 0 && ((unsigned char)buf[i - 1] & 0xc0) == 0x80) i--;
    if (i == 0) return buf;
    unsigned char lead = (unsigned char)buf[i - 1];
    size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    if (n - (i - 1) < want) buf[i - 1] = '\0';
    return buf;
}

char *vt_clamp_name(char *s, size_t max) {
    if (!s || max < 4 || strnlen(s, max) < max) return s;
    static const char more[] = "...";
    size_t keep = max - sizeof more; /* the name's bytes kept, the marker and its NUL after */
    while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80) keep--; /* s[keep] begins a character */
    memcpy(s + keep, more, sizeof more);
    return s;
}

const char *vt_cut_middle(char *buf, size_t size, const char *src) {
    if (size == 0) return buf;
    size_t n = strlen(src);
    if (n < size || size < 16) {
        snprintf(buf, size, "%s", src);
        return vt_utf8_whole(buf, size);
    }
    size_t room = size - 1 - 3, head = room / 3, tail = room - head;
    while (head > 0 && ((unsigned char)src[head] & 0xc0) == 0x80) head--;   /* src[head] starts a character */
    size_t from = n - tail;
    while (from < n && ((unsigned char)src[from] & 0xc0) == 0x80) from++;
    memcpy(buf, src, head);
    memcpy(buf + head, "...", 3);
    memcpy(buf + head + 3, src + from, n - from);
    buf[head + 3 + (n - from)] = '\0';
    return buf;
}

const char *vt_fmt_pct(uint64_t part, uint64_t whole, int decimals, char *buf, size_t size) {
    int d = decimals > 0 ? 1 : 0;
    double unit = d ? 0.1 : 1.0;   /* the smallest step printed */
    double p = whole ? 100.0 * (double)part / (double)whole : 0;
    if (whole && part > 0 && p < unit) snprintf(buf, size, "<%.*f%%", d, unit);
    else snprintf(buf, size, "%.*f%%", d, part < whole && p > 100.0 - unit ? 100.0 - unit : p);
    return buf;
}

const char *vt_fmt_missed(uint64_t missed, char *buf, size_t size) {
    if (missed == 0) return NULL;
    snprintf(buf, size, "%" PRIu64 " call%s passed through unrecorded (made while vramtrace was busy on "
             "that thread: a signal handler?)", missed, missed == 1 ? "" : "s");
    return buf;
}

const char *vt_fmt_secs_cell(uint64_t ns, char *buf, size_t size) {
    double s = (double)ns / 1e9;
    if (s < 9999.9995) snprintf(buf, size, "%.3fs", s);
    else if (s < 99999999.5) snprintf(buf, size, "%.0fs", s);
    else snprintf(buf, size, "%.0fh", s / 3600 < 99999999 ? s / 3600 : 99999999);
    return buf;
}

const char *vt_fmt_ended_by(const char *signal, long from_pid, long own_pid, const char *from, char *buf,
                            size_t size) {
    if (from_pid > 0 && from_pid == own_pid)
        snprintf(buf, size, "ended by %s it sent itself", signal);
    else if (from_pid > 0)
        snprintf(buf, size, "ended by %s from pid %ld%s%s%s", signal, from_pid, from && from[0] ? " (" : "",
                 from && from[0] ? from : "", from && from[0] ? ")" : "");
    else
        snprintf(buf, size, "ended by %s", signal);
    return buf;
}

static void put_text(FILE *f, const char *s, void (*put)(FILE *, const char *)) {
    if (put) put(f, s);
    else fputs(s, f);
}

void vt_put_finding(FILE *f, const char *prefix, int number, const char *finding, const char *next,
                    void (*put)(FILE *, const char *)) {
    fprintf(f, "%s  %d. ", prefix, number);
    put_text(f, finding, put);
    fprintf(f, "\n%s     next: ", prefix);
    put_text(f, next, put);
    fputc('\n', f);
}

void vt_put_growth(FILE *f, const char *prefix, const char *site, uint64_t first_bytes, uint64_t end_bytes,
                   const char *rate) {
    char a[32], b[32];
    fprintf(f, "%s  %s: %s -> %s, %s\n", prefix, site, vt_fmt_bytes(first_bytes, a, sizeof a),
            vt_fmt_bytes(end_bytes, b, sizeof b), rate);
}

const char *vt_fmt_proc(int first, int pid, const char *name, int used_known, uint64_t used_bytes,
                        char *buf, size_t size) {
    char b[32];
    int named = name && name[0];
    snprintf(buf, size, "%s pid %d%s%s%s %s", first ? "" : ",", pid, named ? " (" : "", named ? name : "",
             named ? ")" : "", used_known ? vt_fmt_bytes(used_bytes, b, sizeof b) : "?");
    return buf;
}
