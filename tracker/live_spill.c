/* live_spill.c -- a snapshot's live list past a bound, on an unlinked
 * temporary file, so that writing a dump adds a bounded amount of resident
 * memory at any number of live allocations.
 *
 * The snapshot copies the first VRAMTRACE_SPILL bytes of records into
 * memory as it always did; past them it opens a file that has no name
 * (O_TMPFILE, else mkstemp and unlink at once) in $TMPDIR (else /tmp) and
 * writes the rest there a stage of 256 KiB at a time, under the tracker's
 * lock. After the lock the list is sorted as runs of that many records,
 * each read into the memory of the first, sorted in place and written back
 * (tracker/live_read.c merges them on the way out). The file is read and
 * written with pread and pwrite, never mapped, so that what the process
 * holds of it is exactly its buffers: the page cache keeps the rest, and
 * may write it out. Where no file can be made the list stays in memory
 * (one warning); where a write fails (the disk full: ENOSPC, EDQUOT,
 * EFBIG...) nothing more is written, the stages not written are kept in
 * memory, and at the flush the list is read back into memory whole, as
 * if no file could have been made (one warning). Only what memory cannot
 * hold then is dropped, counted in records_lost. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "../common/warn.h"
#include "live_spill.h"
#include "lockprobe.h"

#define STAGE (256 * 1024 / sizeof(struct vt_live))

static size_t spill_bytes = 16u << 20;
/* The folder vt_tracker_spill named; empty (zero-filled, in no page of
 * the file) until then, read as /tmp: 4 KiB of initialised data was a
 * page that every process's start copied. */
static char spill_dir[PATH_MAX];
static int warned_open, warned_io;

static const char *spill_folder(void) { return spill_dir[0] ? spill_dir : "/tmp"; }

void vt_tracker_spill(size_t bytes, const char *dir) {
    spill_bytes = bytes;
    snprintf(spill_dir, sizeof spill_dir, "%s", dir && *dir && strlen(dir) < sizeof spill_dir ? dir : "/tmp");
}

size_t vt_live_spill_run(void) {
    size_t page = 4096 / sizeof(struct vt_live);
    size_t n = spill_bytes / sizeof(struct vt_live);
    return n > page ? n : page;
}

/* An unlinked file of mode 0600 in dir, or -1 (errno set). */
static int nameless_file(const char *dir) {
    int fd = vt_fd_open(AT_FDCWD, dir, O_TMPFILE | O_RDWR, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/.vramtrace-live-XXXXXX", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int held[3];
    vt_fd_std_hold(held);
    fd = mkostemp(path, O_CLOEXEC);
    vt_fd_std_free(held);
    fd = vt_fd_high(fd);
    if (fd >= 0) unlink(path);
    return fd;
}

struct vt_live_spill *vt_live_spill_open(size_t run) {
    struct vt_live_spill *sp = calloc(1, sizeof *sp);
    struct vt_live *stage = malloc(STAGE * sizeof *stage);
    int fd = sp && stage ? nameless_file(spill_folder()) : -1;
    if (fd < 0) {
        if (!__atomic_exchange_n(&warned_open, 1, __ATOMIC_RELAXED))
            vt_warn("no temporary file for a dump's live list in %s (%s); keeping it in memory", spill_folder(),
                    sp && stage ? strerror(errno) : "out of memory");
        free(sp);
        free(stage);
        return NULL;
    }
    *sp = (struct vt_live_spill){.fd = fd, .run = run, .inmem = run, .stage = stage};
    return sp;
}

/* Write all n bytes of p at offset at, or fail (errno set). */
static int write_all(int fd, const void *p, size_t n, off_t at) {
    for (const char *c = p; n;) {
        ssize_t k = pwrite(fd, c, n, at);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = EIO;
            return -1;
        }
        c += k, n -= (size_t)k, at += k;
    }
    return 0;
}

/* Read n bytes at offset at into p; how many were read before the end of
 * the file or an error. */
static size_t read_all(int fd, void *p, size_t n, off_t at) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)p + got, n - got, at + (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    return got;
}

static void io_failed(const char *what) {
    if (!__atomic_exchange_n(&warned_io, 1, __ATOMIC_RELAXED))
        vt_warn("a dump's live list: the temporary file could not be %s (%s)", what, strerror(errno));
}

/* A write to the file failed (errno): nothing more is written to it, and
 * what was not written stays in memory until the flush reads the list
 * back (said once, with the reason: a full disk is not a lack of memory). */
static void spill_failed(struct vt_live_spill *sp) {
    sp->err = errno;
    sp->broken = 1;
    if (!__atomic_exchange_n(&warned_io, 1, __ATOMIC_RELAXED))
        vt_warn("a dump's live list: its temporary file in %s could not be written (%s); keeping the rest in memory",
                spill_folder(), strerror(sp->err));
}

static int queue_stage(struct vt_live_spill *sp, size_t *n);

/* Write the stage; when it cannot be written, keep it queued in memory
 * (where memory is short too, it is dropped: it is the newest). */
static void write_stage(struct vt_live_spill *sp, size_t *n) {
    if (!sp->nstage) return;
    if (write_all(sp->fd, sp->stage, sp->nstage * sizeof *sp->stage, (off_t)(sp->stage_at * sizeof *sp->stage))) {
        spill_failed(sp);
        if (queue_stage(sp, NULL)) return;
        sp->lost += sp->nstage;
        *n = sp->stage_at;
    }
    sp->nstage = 0;
}

void vt_live_spill_reserve(struct vt_live_spill *sp, size_t n) {
    if (n <= sp->reserved) return;
    VT_PROBE_COUNT(VT_PC_RESERVE, 1);
    if (ftruncate(sp->fd, (off_t)(n * sizeof(struct vt_live))) == 0) sp->reserved = n;
}

/* Room in the queue for one more full stage: the taken ones' room used
 * again, else the queue doubled; 0 when out of memory. */
static int queue_room(struct vt_live_spill *sp) {
    if (sp->nfull == sp->full_cap && sp->full_head) {
        memmove(sp->full, sp->full + sp->full_head, (sp->nfull - sp->full_head) * sizeof *sp->full);
        sp->nfull -= sp->full_head;
        sp->full_head = 0;
    }
    if (sp->nfull == sp->full_cap) {
        size_t want = sp->full_cap ? 2 * sp->full_cap : 8;
        struct vt_live_stage *more = realloc(sp->full, want * sizeof *more);
        if (!more) return 0;
        sp->full = more;
        sp->full_cap = want;
    }
    return 1;
}

/* The full stage queued behind the others waiting, and a new one begun
 * (the spare, else fresh memory); 0 when out of memory. Where the queue
 * is full its oldest stage is written first; where that write fails the
 * stage stays queued and the queue has no bound any more (the list is
 * going back to memory). n: the list's length, NULL where the queue is
 * to grow without a write. */
static int queue_stage(struct vt_live_spill *sp, size_t *n) {
    if (n && !sp->broken && sp->nfull - sp->full_head >= VT_SPILL_QUEUE_MAX) {
        struct vt_live_stage *old = &sp->full[sp->full_head];
        if (write_all(sp->fd, old->buf, old->n * sizeof *old->buf, (off_t)(old->at * sizeof *old->buf)) == 0) {
            VT_PROBE_COUNT(VT_PC_SYNC_WRITES, 1);
            if (!sp->spare) sp->spare = old->buf;
            else free(old->buf);
            sp->full_head++;
        } else {
            spill_failed(sp);
        }
    }
    if (!queue_room(sp)) return 0;
    struct vt_live *fresh = sp->spare ? sp->spare : malloc(STAGE * sizeof *fresh);
    if (!fresh) return 0;
    VT_PROBE_COUNT(VT_PC_STAGE_GROW, !sp->spare);
    sp->spare = NULL;
    sp->full[sp->nfull++] = (struct vt_live_stage){sp->stage, sp->nstage, sp->stage_at};
    sp->stage = fresh;
    sp->nstage = 0;
    return 1;
}

void vt_live_spill_put(struct vt_live_spill *sp, size_t *n, const struct vt_live *a) {
    if (sp->nstage == STAGE) {
        if (sp->broken) queue_stage(sp, NULL); /* in memory from now on */
        else if (!(sp->defer && queue_stage(sp, n))) write_stage(sp, n);
    }
    if (sp->nstage == STAGE) { /* memory short as well */
        sp->lost++;
        return;
    }
    if (!sp->nstage) sp->stage_at = *n;
    sp->stage[sp->nstage++] = *a;
    (*n)++;
    if (sp->nstage == STAGE && !sp->defer && !sp->broken) write_stage(sp, n);
}

int vt_live_spill_take_stage(struct vt_live_spill *sp, struct vt_live_stage *out) {
    if (sp->broken) return 0;
    if (sp->full_head == sp->nfull && !(sp->nstage == STAGE && queue_stage(sp, NULL))) return 0;
    *out = sp->full[sp->full_head++];
    return 1;
}

int vt_live_spill_write_stage(struct vt_live_spill *sp, const struct vt_live_stage *st) {
    int ok = write_all(sp->fd, st->buf, st->n * sizeof *st->buf, (off_t)(st->at * sizeof *st->buf)) == 0;
    if (!ok) spill_failed(sp);
    return ok;
}

void vt_live_spill_keep_stage(struct vt_live_spill *sp, size_t *n, struct vt_live_stage *st) {
    if (!queue_room(sp)) { /* every record after it was put after it: all go */
        vt_live_spill_drop_from(sp, n, st->at);
        vt_live_spill_give_stage(sp, st);
        return;
    }
    sp->full[sp->nfull++] = *st;
    st->buf = NULL;
}

void vt_live_spill_give_stage(struct vt_live_spill *sp, struct vt_live_stage *st) {
    if (!sp->spare) sp->spare = st->buf;
    else free(st->buf);
    st->buf = NULL;
}

/* Every queued stage let go, unwritten. */
static void drop_queued(struct vt_live_spill *sp) {
    for (size_t i = sp->full_head; i < sp->nfull; i++) free(sp->full[i].buf);
    sp->full_head = sp->nfull = 0;
}

void vt_live_spill_drop_from(struct vt_live_spill *sp, size_t *n, size_t at) {
    if (*n > at) sp->lost += *n - at;
    if (*n > at) *n = at;
    sp->broken = 1;
    sp->nstage = 0;
    drop_queued(sp); /* all after the stage that failed */
}

/* After a write failed: the whole list in memory (s->live, s->spill
 * NULL), the records written read back from the file and those never
 * written taken from the stages that held them. Where memory is short
 * too, the first run alone is kept and the rest counted lost, with both
 * reasons. */
static void recall(struct vt_snapshot *s) {
    struct vt_live_spill *sp = s->spill;
    size_t n = s->nlive, size = sizeof *s->live;
    struct vt_live *all = n > sp->inmem ? realloc(s->live, n * size) : s->live;
    if (n <= sp->inmem) {
        /* nothing past the first run: it is all in memory */
    } else if (!all) {
        char why[160];
        snprintf(why, sizeof why, "live allocations a dump could keep neither in its temporary file (%s) nor in memory",
                 strerror(sp->err));
        vt_records_lost_n(n - sp->inmem, why);
        sp->lost += n - sp->inmem;
        s->nlive = sp->inmem;
    } else {
        s->live = all;
        size_t want = (n - sp->inmem) * size, got = read_all(sp->fd, all + sp->inmem, want, (off_t)(sp->inmem * size));
        memset((char *)(all + sp->inmem) + got, 0, want - got); /* holes: every one is in a stage below */
        for (size_t i = sp->full_head; i < sp->nfull; i++)
            memcpy(all + sp->full[i].at, sp->full[i].buf, sp->full[i].n * size);
        if (sp->nstage) memcpy(all + sp->stage_at, sp->stage, sp->nstage * size);
    }
    s->live_lost += sp->lost;
    vt_live_spill_close(sp);
    s->spill = NULL;
}

void vt_live_spill_flush(struct vt_snapshot *s) {
    struct vt_live_spill *sp = s->spill;
    size_t *n = &s->nlive;
    /* The stages still queued, oldest first, then the one being filled;
     * from the first that cannot be written on, all stay in memory. */
    for (; sp->full_head < sp->nfull && !sp->broken; sp->full_head++) {
        struct vt_live_stage *st = &sp->full[sp->full_head];
        if (write_all(sp->fd, st->buf, st->n * sizeof *st->buf, (off_t)(st->at * sizeof *st->buf))) {
            spill_failed(sp);
            break;
        }
        free(st->buf);
    }
    if (!sp->broken) write_stage(sp, n);
    if (sp->lost) vt_records_lost_n(sp->lost, "live allocations a dump could keep neither in its temporary file nor in memory");
    if (sp->broken) {
        recall(s);
        return;
    }
    s->live_lost += sp->lost;
    drop_queued(sp);
    free(sp->stage);
    free(sp->spare);
    free(sp->full);
    sp->stage = sp->spare = NULL;
    sp->full = NULL;
    sp->full_cap = 0;
}

void vt_live_spill_sort(struct vt_snapshot *s) {
    struct vt_live_spill *sp = s->spill;
    struct vt_live *buf = s->live;
    size_t n = s->nlive, run = sp->run, size = sizeof *buf;
    vt_live_sort(buf, n < run ? n : run);
    int ok = write_all(sp->fd, buf, (n < run ? n : run) * size, 0) == 0, first_in_buf = 1;
    if (!ok) io_failed("written");
    for (size_t from = run; ok && from < n; from += run) {
        size_t len = n - from < run ? n - from : run;
        first_in_buf = 0;
        ok = read_all(sp->fd, buf, len * size, (off_t)(from * size)) == len * size;
        if (!ok) io_failed("read");
        if (!ok) break;
        vt_live_sort(buf, len);
        ok = write_all(sp->fd, buf, len * size, (off_t)(from * size)) == 0;
        if (!ok) io_failed("written");
    }
    if (ok) {
        free(buf);
        s->live = NULL;
        sp->inmem = 0;
        return;
    }
    /* The first run, sorted, is what is sure to be whole: in memory, or
     * read back from where it was written. */
    size_t keep = n < run ? n : run;
    if (!first_in_buf && read_all(sp->fd, buf, keep * size, 0) != keep * size) keep = 0;
    vt_records_lost_n(n - keep, "live allocations a dump could not sort in its temporary file");
    s->nlive = keep;
    vt_live_spill_close(sp);
    s->spill = NULL;
}

size_t vt_live_spill_read(const struct vt_snapshot *s, size_t from, size_t n, struct vt_live *out) {
    const struct vt_live_spill *sp = s->spill;
    size_t got = 0;
    if (from < sp->inmem) {
        got = sp->inmem - from < n ? sp->inmem - from : n;
        memcpy(out, s->live + from, got * sizeof *out);
    }
    if (got == n) return n;
    size_t want = (n - got) * sizeof *out;
    size_t k = read_all(sp->fd, out + got, want, (off_t)((from + got) * sizeof *out));
    if (k < want) io_failed("read");
    return got + k / sizeof *out;
}

void vt_live_spill_close(struct vt_live_spill *sp) {
    if (!sp) return;
    if (sp->fd >= 0) close(sp->fd);
    drop_queued(sp);
    free(sp->full);
    free(sp->stage);
    free(sp->spare);
    free(sp);
}
