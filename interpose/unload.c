/* unload.c -- which libraries a dlclose took out of the process. See
 * unload.h. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

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
    return 0;
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
    return l;
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
        if (l->span[i].base == s.base && l->span[i].lo == s.lo && l->span[i].hi == s.hi) {
            l->gone[i] = 0;
            l->cursor = i + 1;
            break;
        }
    }
    return 0;
}

void vt_unload_after(struct vt_loaded *l) {
    if (!l) return;
    l->gone = malloc(l->n ? l->n : 1);
    if (l->gone) {
        memset(l->gone, 1, l->n);
        dl_iterate_phdr(mark_present, l);
        size_t k = 0;
        for (size_t i = 0; i < l->n; i++) {
            if (!l->gone[i]) continue;
            l->span[k] = l->span[i];
            /* The loader's name can be relative to the folder the program
             * is in now: the file is named whole, as /proc/self/maps
             * names the libraries still loaded (NULL: the loader's). */
            const char *name = l->names + (uintptr_t)l->span[i].path;
            char *whole = realpath(name, NULL);
            l->span[k].path = whole ? whole : name;
            l->gone[k] = whole != NULL;
            k++;
        }
        if (k) vt_departed_note(l->span, k);
        for (size_t i = 0; i < k; i++)
            if (l->gone[i]) free((void *)l->span[i].path);
    }
    free(l->gone);
    free(l->span);
    free(l->names);
    free(l);
}
