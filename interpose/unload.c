/* unload.c -- which libraries a dlclose took out of the process. See
 * unload.h. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../tracker/departed.h"
#include "hook.h"
#include "unload.h"

struct vt_loaded {
    struct vt_code_span *span;
    uint8_t *gone;          /* per span: not found after the dlclose */
    size_t n, cap;
    char *names;            /* the paths, copied: the loader's go with the library */
    size_t names_used, names_cap;
    size_t cursor;          /* where the next library after the dlclose is looked for first */
    uint32_t from, mark;    /* the stacks interned when the dlclose began, and when it returned */
    int maps;               /* a library needs from_maps */
    int failed;
};

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

/* Whether a library needs the kernel's word on its file: named relative
 * to a folder (dlopen("./x.so"): the folder meant is the one the program
 * was in at the dlopen, which it may have left since), or without a
 * build ID (what its file was, to tell a file replaced since). */
static int needs_maps(const struct vt_loaded *l, size_t i) {
    const char *name = l->names + (uintptr_t)l->span[i].path;
    return (name[0] != '/' && strchr(name, '/')) || !l->span[i].build_id_len;
}

static int list_one(struct dl_phdr_info *info, size_t size, void *arg) {
    struct vt_loaded *l = arg;
    /* The program itself and the vDSO never leave. */
    if (!info->dlpi_name || !info->dlpi_name[0] || l->failed) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        struct vt_code_span *v = realloc(l->span, cap * sizeof *v);
        if (!v) { l->failed = 1; return 1; }
        l->span = v;
        l->cap = cap;
    }
    size_t len = strlen(info->dlpi_name) + 1;
    if (l->names_used + len > l->names_cap) {
        size_t cap = l->names_cap ? 2 * l->names_cap : 8192;
        while (l->names_used + len > cap) cap *= 2;
        char *v = realloc(l->names, cap);
        if (!v) { l->failed = 1; return 1; }
        l->names = v;
        l->names_cap = cap;
    }
    struct vt_code_span *s = &l->span[l->n++];
    span_of(info, s);
    memcpy(l->names + l->names_used, info->dlpi_name, len);
    s->path = (const char *)(uintptr_t)l->names_used;  /* an offset until the names stop moving */
    l->names_used += len;
    build_id_of(info, s);
    if (!s->build_id_len) fingerprint_of(info, s);
    if (needs_maps(l, l->n - 1)) l->maps = 1;
    return 0;
}

/* Name into l's names (its offset there), or (uintptr_t)-1. */
static uintptr_t add_name(struct vt_loaded *l, const char *name, size_t len) {
    if (l->names_used + len + 1 > l->names_cap) {
        size_t cap = l->names_cap ? 2 * l->names_cap : 8192;
        while (l->names_used + len + 1 > cap) cap *= 2;
        char *v = realloc(l->names, cap);
        if (!v) return (uintptr_t)-1;
        l->names = v;
        l->names_cap = cap;
    }
    uintptr_t at = l->names_used;
    memcpy(l->names + at, name, len);
    l->names[at + len] = '\0';
    l->names_used += len + 1;
    return at;
}

/* Those libraries named as the kernel maps them (whole), with the
 * device and inode of the file mapped, and, where the name still leads to
 * that file, its size and modification time. */
static void from_maps(struct vt_loaded *l) {
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    char line[4096 + 128];
    while (fgets(line, sizeof line, f)) {
        unsigned long start, ino;
        unsigned maj, min;
        int at = 0;
        if (sscanf(line, "%lx-%*x %*s %*x %x:%x %lu %n", &start, &maj, &min, &ino, &at) != 4 || !at ||
            line[at] != '/')
            continue;
        char *path = line + at;
        size_t len = strcspn(path, "\n");
        path[len] = '\0';
        for (size_t i = 0; i < l->n; i++) {
            struct vt_code_span *s = &l->span[i];
            if ((s->lo & ~(page - 1)) != start || !needs_maps(l, i)) continue;
            const char *name = l->names + (uintptr_t)s->path;
            if (name[0] != '/') {
                uintptr_t o = add_name(l, path, len);
                if (o != (uintptr_t)-1) s->path = (const char *)o;
            }
            struct stat st;
            if (!s->build_id_len && stat(path, &st) == 0 && st.st_dev == makedev(maj, min) && st.st_ino == ino) {
                s->file = 1;
                s->dev = st.st_dev;
                s->ino = st.st_ino;
                s->size = (uint64_t)st.st_size;
                s->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
            }
        }
    }
    fclose(f);
}

struct vt_loaded *vt_unload_before(void) {
    /* A dlclose from a signal handler that interrupted vramtrace's own
     * work (which may hold the lock the note takes) goes untold. */
    if (vt_busy > 0) return NULL;
    struct vt_loaded *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    dl_iterate_phdr(list_one, l);
    if (l->failed) {
        free(l->span);
        free(l->names);
        free(l);
        return NULL;
    }
    if (l->maps) from_maps(l);
    l->from = vt_departed_mark();
    return l;
}

static int same_build(const struct vt_code_span *was, const struct dl_phdr_info *info) {
    struct vt_code_span now;
    memset(&now, 0, sizeof now);
    build_id_of(info, &now);
    if (now.build_id_len != was->build_id_len || memcmp(now.build_id, was->build_id, now.build_id_len) != 0) return 0;
    if (!now.build_id_len) {
        fingerprint_of(info, &now);
        if (now.text_hash != was->text_hash) return 0;
    }
    return 1;
}

static int mark_present(struct dl_phdr_info *info, size_t size, void *arg) {
    struct vt_loaded *l = arg;
    if (!info->dlpi_name || !info->dlpi_name[0]) return 0;
    struct vt_code_span s;
    span_of(info, &s);
    /* The loader lists in load order, before and after: the library
     * after the last one found is nearly always the next one. */
    for (size_t k = 0; k < l->n; k++) {
        size_t i = (l->cursor + k) % l->n;
        /* The same library: the same place and build ID (another one
         * loaded at once where this one was is not it). */
        if (l->span[i].base == s.base && l->span[i].lo == s.lo && l->span[i].hi == s.hi && same_build(&l->span[i], info)) {
            l->gone[i] = 0;
            l->cursor = i + 1;
            break;
        }
    }
    return 0;
}

void vt_unload_after(struct vt_loaded *l) {
    if (!l) return;
    /* The stacks interned by now (see vt_departed_mark). */
    l->mark = vt_departed_mark();
    l->gone = malloc(l->n ? l->n : 1);
    if (l->gone) {
        memset(l->gone, 1, l->n);
        dl_iterate_phdr(mark_present, l);
        size_t k = 0;
        for (size_t i = 0; i < l->n; i++) {
            if (!l->gone[i]) continue;
            l->span[k] = l->span[i];
            /* Named whole, as /proc/self/maps names the libraries still
             * loaded (a name relative to a folder was made whole before
             * the dlclose, name_whole); symbolic links resolved. */
            const char *name = l->names + (uintptr_t)l->span[i].path;
            char *whole = name[0] == '/' ? realpath(name, NULL) : NULL;
            l->span[k].path = whole ? whole : name;
            l->gone[k] = whole != NULL;
            k++;
        }
        if (k) vt_departed_note(l->span, k, l->from, l->mark);
        for (size_t i = 0; i < k; i++)
            if (l->gone[i]) free((void *)l->span[i].path);
    }
    free(l->gone);
    free(l->span);
    free(l->names);
    free(l);
}
