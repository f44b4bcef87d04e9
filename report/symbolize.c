/* symbolize.c -- libdwfl symbolization of the running process. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uthash.h>

#include "../common/labels.h"
#include "../tracker/pystack.h"
#include "symbolize.h"

struct frame_entry {
    uintptr_t address;
    struct vt_frame f;
    UT_hash_handle hh;
};

struct priv {
    struct frame_entry *cache;
    Dwfl *dwfl;
    char *(*demangle)(const char *, char *, size_t *, int *);
};

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* A C++ name demangled with the process's own __cxa_demangle, if it has
 * one; otherwise a copy of the name as it is. */
static char *demangled(struct priv *p, const char *raw) {
    /* Drop a symbol version ("__libc_start_main@@GLIBC_2.34"). */
    char name_buf[1024];
    const char *name = raw;
    const char *at = raw ? strchr(raw, '@') : NULL;
    if (at && at != raw && (size_t)(at - raw) < sizeof name_buf) {
        memcpy(name_buf, raw, (size_t)(at - raw));
        name_buf[at - raw] = '\0';
        name = name_buf;
    }
    if (name && p->demangle && name[0] == '_' && name[1] == 'Z') {
        int status = 0;
        char *d = p->demangle(name, NULL, NULL, &status);
        if (d && status == 0) return d;
        free(d);
    }
    return dup_or_null(name);
}

static void resolve(struct priv *p, uintptr_t address, struct vt_frame *f) {
    memset(f, 0, sizeof *f);
    f->address = address;
    if (vt_pyframe_is(address)) {
        const char *fn, *file;
        int line;
        f->python = 1;
        f->borrowed = vt_pyframe_borrowed(address);
        f->address = 0;
        if (vt_pyframe_resolve(address, &fn, &file, &line) == 0) {
            f->function = strdup(fn);
            f->file = strdup(file);
            f->line = line;
        }
        return;
    }
    if (!p->dwfl) return;
    /* A return address points after the call: look up the call itself. */
    Dwarf_Addr pc = address > 0 ? address - 1 : address;
    Dwfl_Module *m = dwfl_addrmodule(p->dwfl, pc);
    if (!m) return;
    Dwarf_Addr base = 0;
    const char *mainfile = NULL;
    const char *modname = dwfl_module_info(m, NULL, &base, NULL, NULL, NULL,
                                           &mainfile, NULL);
    f->module = dup_or_null(mainfile ? mainfile : modname);
    f->offset = address - base;
    f->function = demangled(p, dwfl_module_addrname(m, pc));
    Dwfl_Line *line = dwfl_module_getsrc(m, pc);
    if (line) {
        int lineno = 0;
        const char *file = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
        if (file) {
            f->file = strdup(file);
            f->line = lineno;
        }
    }
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    /* Local separate debug files by build ID only: never debuginfod, whose
     * client starts libcurl and OpenSSL (their atexit handlers race a
     * program's exit, and a lookup may go to the network) inside the
     * program, at an OOM or in the live publisher. */
    .find_debuginfo = dwfl_build_id_find_debuginfo,
};

/* The stacks grouped by their call-site label (common/labels.h: the rule
 * the CLI groups dumps' holders by). */
static uint32_t *site_groups(const struct vt_symbols *sym, size_t nstacks, size_t *ngroups, uint32_t **lowest) {
    struct vt_labels *groups = sym ? vt_labels_new() : NULL;
    uint32_t *out = malloc((nstacks ? nstacks : 1) * sizeof *out);
    uint32_t *low = malloc((nstacks ? nstacks : 1) * sizeof *low);
    size_t k = 0;
    if (sym && !groups) { free(out); out = NULL; }
    for (size_t i = 0; out && low && i < nstacks; i++) {
        if (!sym) { low[k] = (uint32_t)i; out[i] = (uint32_t)k++; continue; }
        char label[512];
        int added;
        uint32_t g = vt_label_group(groups, vt_site_label(sym, (uint32_t)i, label, sizeof label), &added);
        if (g == UINT32_MAX) { free(out); out = NULL; break; }
        if (added) low[k++] = (uint32_t)i;
        out[i] = g;
    }
    vt_labels_free(groups);
    if (!out || !low) { free(out); free(low); return NULL; }
    *ngroups = k;
    if (lowest) *lowest = low;
    else free(low);
    return out;
}

uint32_t *vt_site_groups(const struct vt_symbols *sym, size_t nstacks, size_t *ngroups, uint32_t **lowest) {
    if (!sym || !sym->group || nstacks != sym->nstacks) return site_groups(sym, nstacks, ngroups, lowest);
    size_t ng = sym->ngroups;
    uint32_t *out = malloc((nstacks ? nstacks : 1) * sizeof *out);
    uint32_t *low = lowest ? malloc((ng ? ng : 1) * sizeof *low) : NULL;
    if (!out || (lowest && !low)) { free(out); free(low); return NULL; }
    memcpy(out, sym->group, nstacks * sizeof *out);
    if (lowest) {
        memcpy(low, sym->group_lowest, ng * sizeof *low);
        *lowest = low;
    }
    *ngroups = ng;
    return out;
}

struct vt_symbols *vt_symbolize(const struct vt_snapshot *s) {
    struct vt_symbols *sym = calloc(1, sizeof *sym);
    struct priv *p = calloc(1, sizeof *p);
    if (!sym || !p) { free(sym); free(p); return NULL; }
    sym->priv = p;
    /* Not the public dlsym: vramtrace overrides it. */
    *(void **)&p->demangle = dlvsym(RTLD_DEFAULT, "__cxa_demangle", "CXXABI_1.3");
    /* A C++ runtime that only libraries loaded RTLD_LOCAL brought in (a
     * Python extension's libstdc++) is not in the global scope: ask it by
     * name, without loading one that is not there. */
    if (!p->demangle) {
        void *cxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
        /* The reference is kept: the pointer stays valid. */
        if (cxx) *(void **)&p->demangle = dlvsym(cxx, "__cxa_demangle", "CXXABI_1.3");
    }
    p->dwfl = dwfl_begin(&callbacks);
    if (p->dwfl) {
        if (dwfl_linux_proc_report(p->dwfl, getpid()) != 0) {
            dwfl_end(p->dwfl);
            p->dwfl = NULL;
        } else {
            dwfl_report_end(p->dwfl, NULL, NULL);
        }
    }
    size_t n = s->nstacks;
    sym->nstacks = n;
    sym->stacks = calloc(n ? n : 1, sizeof *sym->stacks);
    sym->depth = calloc(n ? n : 1, sizeof *sym->depth);
    sym->site = calloc(n ? n : 1, sizeof *sym->site);
    sym->through = calloc(n ? n : 1, sizeof *sym->through);
    if (!sym->stacks || !sym->depth || !sym->site || !sym->through) {
        vt_symbols_free(sym);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const struct vt_stack *st = s->stacks[i];
        struct vt_frame *frames = calloc(st->depth ? st->depth : 1, sizeof *frames);
        if (!frames) continue;
        sym->stacks[i] = frames;
        sym->depth[i] = st->depth;
        sym->site[i] = sym->through[i] = -1;
        for (uint32_t j = 0; j < st->depth; j++) {
            uintptr_t a = st->frames[j];
            struct frame_entry *e;
            HASH_FIND(hh, p->cache, &a, sizeof a, e);
            if (!e) {
                e = calloc(1, sizeof *e);
                if (!e) continue;
                e->address = a;
                resolve(p, a, &e->f);
                HASH_ADD(hh, p->cache, address, sizeof e->address, e);
            }
            frames[j] = e->f;
        }
        sym->site[i] = vt_site_index(frames, st->depth);
        sym->through[i] = vt_site_through(frames, st->depth, sym->site[i]);
    }
    sym->group = site_groups(sym, n, &sym->ngroups, &sym->group_lowest);
    return sym;
}

const struct vt_frame *vt_call_site(const struct vt_symbols *sym, uint32_t stack) {
    if (!sym || stack >= sym->nstacks || sym->site[stack] < 0 || !sym->stacks[stack])
        return NULL;
    return &sym->stacks[stack][sym->site[stack]];
}

const char *vt_site_label(const struct vt_symbols *sym, uint32_t stack, char *buf, size_t size) {
    const struct vt_frame *site = vt_call_site(sym, stack);
    int t = site ? sym->through[stack] : -1;
    return vt_site_label_of(site, t >= 0 ? &sym->stacks[stack][t] : NULL, buf, size);
}

void vt_symbols_free(struct vt_symbols *sym) {
    if (!sym) return;
    free(sym->group);
    free(sym->group_lowest);
    struct priv *p = sym->priv;
    for (size_t i = 0; i < sym->nstacks; i++) free((void *)sym->stacks[i]);
    free(sym->stacks);
    free(sym->depth);
    free(sym->site);
    free(sym->through);
    if (p) {
        struct frame_entry *e, *tmp;
        HASH_ITER(hh, p->cache, e, tmp) {
            HASH_DEL(p->cache, e);
            free((void *)e->f.function);
            free((void *)e->f.file);
            free((void *)e->f.module);
            free(e);
        }
        if (p->dwfl) dwfl_end(p->dwfl);
        free(p);
    }
    free(sym);
}
