/* unload.c -- which libraries a dlclose took out of the process. See
 * unload.h. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uthash.h>

#include "../common/fdkeep.h"
#include "../common/loadername.h"
#include "../common/procself.h"
#include "../tracker/departed.h"
#include "hook.h"
#include "unload.h"

/* What is known of a loaded library, made at the first dlclose that finds
 * it loaded and kept while it stays (the file it maps cannot change while
 * it is mapped), so that a dlclose costs a look-up a library: its span,
 * build ID or fingerprint, and its file as the kernel names the mapping
 * (whole, through any link as it was followed at the load; with
 * " (deleted)" when it was removed since) with, for a library without a
 * build ID, what that file is. Found by its lowest address and its
 * loader's name. Under `lock`. */
struct known {
    uintptr_t lo;
    struct vt_code_span span;   /* path: the kernel's name, malloc'd */
    char *loader_name;          /* malloc'd */
    int departed;               /* told to the tracker by one dlclose: not by another */
    int is_buried;              /* out of the table (a dlclose under way may still hold it) */
    struct known *next_buried;
    UT_hash_handle hh;
};

/* The table; entries taken out of it (their library left, or another is
 * at its place) are buried, and freed once no dlclose that may hold them
 * in its list is under way. */
static struct known *known, *buried;
static int in_flight, forked;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

struct vt_loaded {
    struct known **before;      /* the libraries loaded before the dlclose */
    size_t n, cap;
    struct known **after;       /* those of them found after it */
    size_t nafter, capafter;
    uint32_t from, mark;        /* the stacks interned when the dlclose began, and when it returned */
    unsigned long long adds;    /* the loader's count of loads before the dlclose */
    uintptr_t handle_base;      /* the load bias of the library the handle is (0: not known) */
    int have_adds, failed;
};

/* What the loader writes (its objects' names, a handle's load bias) is
 * read with no lock a thread sanitizer sees (the loader's own): the names
 * are copied and compared by common/loadername.h, and the functions here
 * that read the loader's memory besides are unchecked by it, so that a
 * ThreadSanitizer build does not report the loader's writes of another
 * thread's dlopen as a race. */
#define VT_LOADER_READ __attribute__((no_sanitize("thread")))

VT_LOADER_READ static uintptr_t load_bias_of(void *handle) { return ((struct link_map *)handle)->l_addr; }

/* The GNU build ID among a library's notes, as mapped. */
static void build_id_of(const struct dl_phdr_info *info, struct vt_code_span *s) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *nh;
            const char *desc = name + ((nh->n_namesz + 3) & ~3u);
            const char *next = desc + ((nh->n_descsz + 3) & ~3u);
            if (next > end || next <= p) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
                nh->n_descsz <= sizeof s->build_id) {
                memcpy(s->build_id, desc, nh->n_descsz);
                s->build_id_len = (uint8_t)nh->n_descsz;
                return;
            }
            p = next;
        }
    }
}

/* For a library without a build ID: the fingerprint of its first
 * executable segment, as mapped, and where that segment is in its file. */
static void fingerprint_of(const struct dl_phdr_info *info, struct vt_code_span *s) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || !(ph->p_flags & PF_R) || ph->p_filesz == 0) continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        uint64_t len = ph->p_filesz, h = vt_print_start(len);
        for (uint32_t k = 0; k < vt_print_samples(len); k++) h = vt_print_add(h, p + vt_print_at(len, k), vt_print_len(len));
        s->text_hash = h;
        s->text_off = ph->p_offset;
        s->text_len = len;
        return;
    }
}

static void span_of(const struct dl_phdr_info *info, struct vt_code_span *s) {
    memset(s, 0, sizeof *s);
    s->base = info->dlpi_addr;
    s->lo = UINTPTR_MAX;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (lo < s->lo) s->lo = lo;
        if (hi > s->hi) s->hi = hi;
    }
    if (s->lo > s->hi) s->lo = s->hi = 0;
}

/* The file the kernel maps at the library's lowest address, as it names
 * it (malloc'd), or NULL. /proc/self/map_files names each mapping by its
 * range: the first segment's, as the loader mapped it; where that range
 * is not one mapping, the maps are read (common/procself.h: where, once
 * the main thread has ended). */
static char *mapped_file(const struct dl_phdr_info *info, uintptr_t lo) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = lo & ~(page - 1), end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && info->dlpi_addr + ph->p_vaddr == lo) {
            end = (lo + ph->p_memsz + page - 1) & ~(page - 1);
            break;
        }
    }
    char dir[VT_PROC_SELF_MAX], link[VT_PROC_SELF_MAX + 64], buf[4096 + 16];
    vt_proc_self(dir);
    snprintf(link, sizeof link, "%s/map_files/%lx-%lx", dir, (unsigned long)start, (unsigned long)end);
    ssize_t n = end ? readlink(link, buf, sizeof buf - 1) : -1;
    if (n > 0) {
        buf[n] = '\0';
        return strdup(buf);
    }
    snprintf(link, sizeof link, "%s/maps", dir);
    FILE *f = vt_fd_fopen(link);
    if (!f) return NULL;
    char *found = NULL, *line = NULL;
    size_t cap = 0;
    /* A line as long as its path (past PATH_MAX too). */
    while (!found && getline(&line, &cap, f) > 0) {
        unsigned long from;
        int at = 0;
        if (sscanf(line, "%lx-%*x %*s %*x %*s %*u %n", &from, &at) != 1 || !at || from != start || line[at] != '/')
            continue;
        line[at + strcspn(line + at, "\n")] = '\0';
        found = strdup(line + at);
    }
    free(line);
    fclose(f);
    return found;
}

/* A library first seen: what is known of it (NULL: out of memory). */
static struct known *learn(const struct dl_phdr_info *info, uintptr_t lo) {
    struct known *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    span_of(info, &k->span);
    k->lo = lo;
    k->loader_name = vt_loader_name_dup(info->dlpi_name);
    build_id_of(info, &k->span);
    if (!k->span.build_id_len) fingerprint_of(info, &k->span);
    char *path = mapped_file(info, lo);
    /* Not the kernel's word: the loader's name made whole (a name
     * relative to a folder is relative to the one the program is in). */
    if (!path && k->loader_name) path = realpath(k->loader_name, NULL);
    if (!path && k->loader_name) path = strdup(k->loader_name);
    k->span.path = path;
    struct stat st;
    size_t len = path ? strlen(path) : 0;
    static const char deleted[] = " (deleted)";
    if (!k->span.build_id_len && path && !(len >= sizeof deleted - 1 && strcmp(path + len - (sizeof deleted - 1), deleted) == 0) &&
        stat(path, &st) == 0) {
        k->span.file = 1;
        k->span.dev = st.st_dev;
        k->span.ino = st.st_ino;
        k->span.size = (uint64_t)st.st_size;
        k->span.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    }
    if (!k->loader_name || !k->span.path) {
        free(k->loader_name);
        free((void *)k->span.path);
        free(k);
        return NULL;
    }
    return k;
}

static void bury(struct known *k) {
    if (k->is_buried) return;
    k->is_buried = 1;
    HASH_DEL(known, k);
    k->next_buried = buried;
    buried = k;
}

/* No dlclose under way holds a buried entry any more. */
static void free_buried(void) {
    while (buried) {
        struct known *k = buried;
        buried = k->next_buried;
        free(k->loader_name);
        free((void *)k->span.path);
        free(k);
    }
}

/* The entry of the library info describes, made when it is new (NULL:
 * out of memory). A library at the same place under another name is
 * another library: the old entry goes. */
VT_LOADER_READ static struct known *entry_of(const struct dl_phdr_info *info) {
    struct vt_code_span s;
    span_of(info, &s);
    struct known *k;
    HASH_FIND(hh, known, &s.lo, sizeof s.lo, k);
    if (k && (k->span.hi != s.hi || k->span.base != s.base || !vt_loader_name_is(k->loader_name, info->dlpi_name))) {
        bury(k);
        k = NULL;
    }
    if (!k && (k = learn(info, s.lo)) != NULL) HASH_ADD(hh, known, lo, sizeof k->lo, k);
    return k;
}

/* k appended to the list *v of *n entries and *cap room; -1: no memory. */
static int push(struct known ***v, size_t *n, size_t *cap, struct known *k) {
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        struct known **w = realloc(*v, c * sizeof *w);
        if (!w) return -1;
        *v = w;
        *cap = c;
    }
    (*v)[(*n)++] = k;
    return 0;
}

VT_LOADER_READ static int list_one(struct dl_phdr_info *info, size_t size, void *arg) {
    struct vt_loaded *l = arg;
    /* The program itself and the vDSO never leave. */
    if (!info->dlpi_name || !info->dlpi_name[0] || l->failed) return 0;
    struct known *k = entry_of(info);
    if (!k || push(&l->before, &l->n, &l->cap, k) != 0) { l->failed = 1; return 1; }
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds) {
        l->adds = info->dlpi_adds;
        l->have_adds = 1;
    }
    return 0;
}

static int by_pointer(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(struct known *const *)a, y = (uintptr_t)*(struct known *const *)b;
    return x < y ? -1 : x > y;
}

static void done(struct vt_loaded *l) {
    if (--in_flight == 0) free_buried();
    pthread_mutex_unlock(&lock);
    free(l->before);
    free(l->after);
    free(l);
}

struct vt_loaded *vt_unload_before(void *handle) {
    /* A dlclose from a signal handler that interrupted vramtrace's own
     * work (which may hold the lock the note takes) goes untold. */
    if (vt_busy > 0 || forked) return NULL;
    struct vt_loaded *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    /* A handle is the library's link map (glibc's dlclose reads it as one
     * too, before it checks anything). */
    if ((uintptr_t)handle >= 4096) l->handle_base = load_bias_of(handle);
    pthread_mutex_lock(&lock);
    in_flight++;
    dl_iterate_phdr(list_one, l);
    pthread_mutex_unlock(&lock);
    if (l->failed) {
        pthread_mutex_lock(&lock);
        done(l);
        return NULL;
    }
    l->from = vt_departed_mark();
    return l;
}

/* A library still loaded after the dlclose: the same place, name and
 * build (another loaded at once where one was is not it). */
VT_LOADER_READ static int mark_present(struct dl_phdr_info *info, size_t size, void *arg) {
    struct vt_loaded *l = arg;
    if (!info->dlpi_name || !info->dlpi_name[0] || l->failed) return 0;
    struct vt_code_span s;
    span_of(info, &s);
    struct known *k;
    HASH_FIND(hh, known, &s.lo, sizeof s.lo, k);
    if (!k || k->span.hi != s.hi || k->span.base != s.base || !vt_loader_name_is(k->loader_name, info->dlpi_name)) return 0;
    /* Nothing was loaded during the dlclose: it is the same library. Else
     * it may be another build loaded at once under the same name. */
    int loads = !l->have_adds || size < offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds ||
                info->dlpi_adds != l->adds;
    /* Libraries were loaded while the dlclose ran: the one it closed,
     * found where it was and the same, may have been unloaded and loaded
     * again by another thread at once. It is told as gone (if it was not,
     * its record names its frames from the same file). */
    if (loads && l->handle_base && k->span.base == l->handle_base) return 0;
    struct vt_code_span now;
    memset(&now, 0, sizeof now);
    if (loads) build_id_of(info, &now);
    if (loads && (now.build_id_len != k->span.build_id_len || memcmp(now.build_id, k->span.build_id, now.build_id_len) != 0))
        return 0;
    if (loads && !now.build_id_len) {
        fingerprint_of(info, &now);
        if (now.text_hash != k->span.text_hash) return 0;
    }
    if (push(&l->after, &l->nafter, &l->capafter, k) != 0) { l->failed = 1; return 1; }
    return 0;
}

void vt_unload_after(struct vt_loaded *l) {
    if (!l) return;
    l->mark = vt_departed_mark();
    pthread_mutex_lock(&lock);
    dl_iterate_phdr(mark_present, l);
    struct vt_code_span *gone = l->failed ? NULL : malloc((l->n ? l->n : 1) * sizeof *gone);
    if (!gone) {
        done(l);
        return;
    }
    /* Those of the list before not found after it left, unless another
     * dlclose under way at the same time told them already. */
    qsort(l->after, l->nafter, sizeof *l->after, by_pointer);
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        struct known *e = l->before[i];
        if (e->departed || bsearch(&e, l->after, l->nafter, sizeof *l->after, by_pointer)) continue;
        e->departed = 1;
        gone[k++] = e->span;
        bury(e);
    }
    /* The spans' paths are the buried entries': freed after this. */
    if (k) vt_departed_note(gone, k, l->from, l->mark);
    free(gone);
    done(l);
}

void vt_unload_reset_child(void) {
    /* Another thread may have been changing the table at the fork: the
     * child starts a new one (the old one's memory is left). And another
     * thread may have held the loader's list lock then, which the child
     * inherits held (glibc makes only the loader's main lock anew):
     * dl_iterate_phdr would wait for ever where the child's dlclose of a
     * library that stays loaded never takes it. Until it execs, a forked
     * child's dlclose is told nothing (CUDA itself does not work in a
     * child forked after the parent used it). */
    known = buried = NULL;
    in_flight = 0;
    forked = 1;
    pthread_mutex_init(&lock, NULL);
}
