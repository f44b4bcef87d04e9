/* symbolize.c -- libdwfl symbolization of the running process. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/display.h"
#include "../common/dlagain.h"
#include "../common/fdkeep.h"
#include "../common/labels.h"
#include "../common/loadername.h"
#include "../common/procself.h"
#include "../common/warn.h"
#include "../tracker/departed.h"
#include "../tracker/pystack.h"
#include "dwflfiles.h"
#include "inlines.h"
#include "lazy_dw.h"
#include "symbolize.h"

/* The frame table: each distinct return address symbolized once, found
 * through an open-addressing index (code key -> frame + 1, 0 empty) that
 * doubles past half full. A stack's frames are never copied: they are its
 * return addresses (the snapshot's, shared with the tracker) looked up
 * here. An address in code the compiler inlined has several frames, one
 * for each function inlined there and one for the function that holds
 * them: they follow each other in the table, innermost first, each but
 * the last marked inlined, and the index finds the first. A frame is
 * keyed by its code key (tracker/departed.h): the return address, tagged
 * where the code it was walked through has left the process since, and
 * then read from that library's file (gone[], one libdwfl each). */
struct priv {
    struct vt_frame *frames;
    uintptr_t *keys;       /* each frame's code key */
    uint32_t nframes, cap;
    uint32_t *slot;
    size_t nslots;
    size_t ninlined;        /* frames marked inlined: 0, a stack's frames are its addresses' */
    Dwfl *dwfl;             /* opened at the first frame not in the table */
    Dwfl **gone;            /* per departure (VT_MAX_DEPARTED): its library alone, or NULL */
    uint8_t *gone_tried;
    struct vt_inlines *inlines; /* the units of dwfl's modules walked so far */
    int dwfl_tried;
    char *(*demangle)(const char *, char *, size_t *, int *);
    int demangle_loaded;    /* libstdc++ loaded for it, tried once */
};

static size_t slot_of(uint64_t a, size_t nslots) {
    a ^= a >> 29;
    a *= 0xbf58476d1ce4e5b9ULL;
    return (size_t)(a ^ (a >> 32)) & (nslots - 1);
}

static const struct vt_frame *frame_find(const struct priv *p, uintptr_t a) {
    if (!p->nslots) return NULL;
    for (size_t h = slot_of(a, p->nslots); p->slot[h]; h = (h + 1) & (p->nslots - 1))
        if (p->keys[p->slot[h] - 1] == a) return &p->frames[p->slot[h] - 1];
    return NULL;
}

/* The frame of code key `key` in a table filled earlier in the same
 * session. A library that left since (a dlclose on another thread) has
 * turned some of the session's keys from the address to a tagged one,
 * never the other way: such a frame is in the table under its address,
 * symbolized while its library was still loaded. */
static const struct vt_frame *frame_keyed(const struct priv *p, uintptr_t key) {
    const struct vt_frame *fr = frame_find(p, key);
    return fr || vt_code_address(key) == key ? fr : frame_find(p, vt_code_address(key));
}

/* Room in the table for k more frames and one more address. */
static int frames_grow(struct priv *p, uint32_t k) {
    if (p->nframes + k > p->cap) {
        uint32_t cap = p->cap ? p->cap : 256;
        while (p->nframes + k > cap) cap *= 2;
        struct vt_frame *v = realloc(p->frames, cap * sizeof *v);
        if (v) p->frames = v;
        uintptr_t *keys = v ? realloc(p->keys, cap * sizeof *keys) : NULL;
        if (!keys) return -1;
        p->keys = keys;
        p->cap = cap;
    }
    if ((p->nframes + k) * (size_t)2 > p->nslots) {
        size_t ns = p->nslots ? p->nslots : 512;
        while ((p->nframes + k) * (size_t)2 > ns) ns *= 2;
        uint32_t *slot = calloc(ns, sizeof *slot);
        if (!slot) return -1;
        for (uint32_t i = 0; i < p->nframes; i++) {
            if (i && p->frames[i - 1].inlined) continue; /* not the first of its address */
            size_t h = slot_of(p->keys[i], ns);
            while (slot[h]) h = (h + 1) & (ns - 1);
            slot[h] = i + 1;
        }
        free(p->slot);
        p->slot = slot;
        p->nslots = ns;
    }
    return 0;
}

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
    if (name && !p->demangle && !p->demangle_loaded && name[0] == '_' && name[1] == 'Z') {
        /* A C program whose C++ code is linked in statically (a vendor
         * library built with -static-libstdc++, a C++ program that the
         * linker's --as-needed left without libstdc++): the C++ runtime
         * loaded, to itself, at the first mangled name, as the CLI does.
         * Else the leak check's suppressions by C++ name matched or not
         * with the way the program was linked. The reference is kept. */
        p->demangle_loaded = 1;
        void *cxx = vt_dlopen_again("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL, NULL, 0);
        if (cxx) *(void **)&p->demangle = dlvsym(cxx, "__cxa_demangle", "CXXABI_1.3");
    }
    if (name && p->demangle && name[0] == '_' && name[1] == 'Z') {
        int status = 0;
        char *d = p->demangle(name, NULL, NULL, &status);
        if (d && status == 0) return d;
        free(d);
    }
    return dup_or_null(name);
}

/* The name DWARF gives a function (an inlined one's, through its
 * abstract origin): the linkage name, demangled, else the plain name. */
static char *dwarf_function(struct priv *p, Dwarf_Die *die) {
    Dwarf_Attribute a;
    const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
    if (!n) n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
    if (!n) n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
    return n ? demangled(p, n) : NULL;
}

/* The call site (DW_AT_call_file, DW_AT_call_line) of inlined call die
 * into frame f: where the function it inlines was inlined. */
static void call_site(Dwarf_Die *cu, Dwarf_Die *die, Dwarf_Files **files, size_t *nfiles, struct vt_frame *f) {
    Dwarf_Attribute a;
    Dwarf_Word file = 0, line = 0;
    if (!*files && dwarf_getsrcfiles(cu, files, nfiles) != 0) *files = NULL, *nfiles = 0;
    if (*files && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &a), &file) == 0 && file < *nfiles) {
        f->file = dup_or_null(dwarf_filesrc(*files, file, NULL, NULL));
        if (f->file && dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &a), &line) == 0) f->line = (long)line;
    }
}

/* A symbol table's name for a part of a function the compiler split off or
 * specialised ("work.cold", "work.isra.0", "work.constprop.0", LTO's
 * ".lto_priv.0"): DWARF names the function itself, as LeakSanitizer's
 * symbolizer does. */
static int is_clone_name(const char *raw) { return raw && raw[0] && strchr(raw + 1, '.') && !strchr(raw, '@'); }

/* The functions inlined at pc, innermost first, each one's frame before
 * the next: f[0] (already named by the symbol table, with the line
 * table's file:line) becomes the innermost inlined function, and each
 * frame after it holds the function the one before was inlined into, at
 * the line it was inlined (its call_file, call_line); the last is the
 * function that holds them all, at the line where the outermost was
 * inlined (where the nest is deeper than kept, the frames between are
 * left out). The last keeps the symbol table's name (`raw`, as the table
 * has it), but for a clone's. Returns how many frames f holds (1 when
 * nothing is inlined there, at most max). */
static uint32_t inlined_at(struct priv *p, Dwfl_Module *m, Dwarf_Addr pc, const char *raw, struct vt_frame *f,
                           uint32_t max) {
    struct vt_inline_chain c;
    if (vt_inlines_at(p->inlines, m, pc, &c, (int)max - 1) != 0) return 1;
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    uint32_t n = 1;
    char *outer = (char *)f[0].function;
    if (c.has_func && (!raw || is_clone_name(raw))) {
        char *own = dwarf_function(p, &c.func);
        if (own) {
            free(outer);
            outer = own;
        }
    }
    for (int i = 0; i < c.n; i++) {
        struct vt_frame *in = &f[n - 1], *by = &f[n];
        *by = (struct vt_frame){.address = in->address, .offset = in->offset, .module = dup_or_null(in->module)};
        call_site(&c.cu, i == c.n - 1 ? &c.outermost : &c.in[i], &files, &nfiles, by);
        in->function = dwarf_function(p, &c.in[i]);
        in->inlined = 1;
        n++;
    }
    f[n - 1].function = outer;
    return n;
}

/* The frames at return address `address`, innermost first, into f (room
 * for max, at least 1); returns how many (more than one where code was
 * inlined there). */
static Dwfl *departed_dwfl(struct priv *p, uintptr_t key, const struct vt_departed *d);

/* Whether pc lies in one of module m's loaded segments. libdwfl reads the
 * process's maps and counts an anonymous mapping that follows a module's
 * last one as that module's (its .bss goes on so): code made at run time
 * there (a JIT's, a libffi trampoline's) was named after the module, at
 * an offset past the file's end. Where m's ELF cannot be read, yes. */
static int in_segments(Dwfl_Module *m, Dwarf_Addr pc) {
    GElf_Addr bias = 0;
    Elf *e = dwfl_module_getelf(m, &bias);
    size_t n = 0;
    if (!e || elf_getphdrnum(e, &n) != 0) return 1;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && pc - bias >= ph.p_vaddr &&
            pc - bias < ph.p_vaddr + ph.p_memsz)
            return 1;
    }
    return 0;
}

/* A frame named from what the loader keeps in memory, where libdwfl read
 * nothing (no descriptor was left to open a file: a program that used
 * them all, under a descriptor limit lowered after start): its module and
 * offset, which addr2line turns into a line, and its function where the
 * module exports one there. The main program's file from /proc/self/exe,
 * which a readlink reads without a descriptor. Returns 1, the frame. */
static uint32_t from_memory(struct priv *p, uintptr_t address, struct vt_frame *f) {
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1((void *)(address > 0 ? address - 1 : address), &info, (void **)&map, RTLD_DL_LINKMAP) ||
        !info.dli_fbase || !map)
        return 1;
    char exe[4096], dir[VT_PROC_SELF_MAX], link[VT_PROC_SELF_MAX + 8];
    const char *name = map->l_name;
    if (!name || !name[0]) {
        snprintf(link, sizeof link, "%s/exe", vt_proc_self(dir));
        ssize_t n = readlink(link, exe, sizeof exe - 1);
        if (n <= 0) return 1;
        exe[n] = '\0';
        name = exe;
    }
    f->module = strdup(name);
    f->offset = address - (uintptr_t)info.dli_fbase;
    if (info.dli_sname && info.dli_saddr) f->function = demangled(p, info.dli_sname);
    return 1;
}

static uint32_t resolve(struct priv *p, uintptr_t key, struct vt_frame *f, uint32_t max) {
    uintptr_t address = vt_code_address(key);
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
        return 1;
    }
    /* Code that left where no record says which: its address alone. */
    if (vt_code_unknown(key)) return 1;
    /* Code that has left the process: its module and offset from what was
     * kept when it left, its symbols from its file (if it is still the
     * same file). */
    const struct vt_departed *d = vt_departed_of(key);
    if (d) {
        f->module = dup_or_null(d->span.path);
        f->offset = address - d->span.base;
    }
    Dwfl *dw = d ? departed_dwfl(p, key, d) : p->dwfl;
    if (!dw) return d ? 1 : from_memory(p, address, f);
    /* A return address points after the call: look up the call itself. */
    Dwarf_Addr pc = address > 0 ? address - 1 : address;
    Dwfl_Module *m = dwfl_addrmodule(dw, pc);
    if (!m || !in_segments(m, pc)) return 1;
    if (!d) {
        Dwarf_Addr base = 0;
        const char *mainfile = NULL;
        const char *modname = dwfl_module_info(m, NULL, &base, NULL, NULL, NULL, &mainfile, NULL);
        f->module = dup_or_null(mainfile ? mainfile : modname);
        f->offset = address - base;
    }
    const char *raw = dwfl_module_addrname(m, pc);
    f->function = demangled(p, raw);
    /* A module libdwfl mapped but could not read (no descriptor left to
     * open its file): its function from the loader's memory, where the
     * module exports one there, as from_memory names it. */
    Dl_info info;
    if (!raw && !d && dladdr((void *)(uintptr_t)pc, &info) && info.dli_sname && info.dli_saddr) {
        free((void *)f->function);
        f->function = demangled(p, info.dli_sname);
    }
    /* The line from the unit that holds pc (vt_inlines_unit: also where
     * .debug_aranges lists no unit, or not this one), none where no unit
     * does (_start: libdwfl gave a neighbouring unit's nearest line). */
    const char *file = NULL;
    int lineno = 0;
    Dwarf_Die cu;
    Dwarf_Addr bias = 0;
    Dwarf_Line *l = vt_inlines_unit(p->inlines, m, pc, &cu, &bias) == 0 ? dwarf_getsrc_die(&cu, pc - bias) : NULL;
    if (l && (file = dwarf_linesrc(l, NULL, NULL)) && dwarf_lineno(l, &lineno) != 0) file = NULL;
    if (file) {
        f->file = strdup(file);
        f->line = lineno;
    }
    return inlined_at(p, m, pc, raw, f, max);
}

static void open_dwfl(struct priv *p);

/* The first frame at code key a (vt_frames_at counts them), symbolized
 * and added to the table when new; NULL when memory ran out. Valid until
 * the next frame is added. */
static const struct vt_frame *frame_of(struct priv *p, uintptr_t a) {
    const struct vt_frame *known = frame_find(p, a);
    if (known) return known;
    if (!p->dwfl_tried) open_dwfl(p);
    struct vt_frame f[VT_MAX_INLINED];
    uint32_t n = resolve(p, a, f, VT_MAX_INLINED);
    if (frames_grow(p, n) != 0) {
        for (uint32_t i = 0; i < n; i++) {
            free((void *)f[i].function);
            free((void *)f[i].file);
            free((void *)f[i].module);
        }
        return NULL;
    }
    uint32_t first = p->nframes;
    memcpy(&p->frames[first], f, n * sizeof *f);
    for (uint32_t i = 0; i < n; i++) p->keys[p->nframes++] = a;
    p->ninlined += n - 1;
    size_t h = slot_of(a, p->nslots);
    while (p->slot[h]) h = (h + 1) & (p->nslots - 1);
    p->slot[h] = first + 1;
    return &p->frames[first];
}

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

/* dl_iterate_phdr's callback: the path of a loaded C++ runtime into
 * out (PATH_MAX bytes), and stop. The loader's name is copied first
 * (common/loadername.h says why). */
static int cxx_runtime(struct dl_phdr_info *info, size_t size, void *out) {
    (void)size;
    char *path = out;
    if (!info->dlpi_name || vt_loader_name_copy(info->dlpi_name, path, PATH_MAX) < 0) return 0;
    const char *base = strrchr(path, '/');
    static const char want[] = "libstdc++.so";
    return strncmp(base ? base + 1 : path, want, sizeof want - 1) == 0;
}

/* An empty frame table, with the process's demangler. */
static struct priv *priv_new(void) {
    struct priv *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    /* Not the public dlsym: vramtrace overrides it. */
    *(void **)&p->demangle = dlvsym(RTLD_DEFAULT, "__cxa_demangle", "CXXABI_1.3");
    /* A C++ runtime that only libraries loaded RTLD_LOCAL brought in (a
     * Python extension's libstdc++) is not in the global scope: asked by
     * the path it was loaded from, which the loader finds among the loaded
     * objects without opening a file. By its bare name the loader searched
     * the library path and opened the files it found (its cache, the
     * library) at the lowest numbers free, at every session of a program
     * that had none loaded. */
    char cxx_path[PATH_MAX];
    if (!p->demangle && dl_iterate_phdr(cxx_runtime, cxx_path)) {
        void *cxx = dlopen(cxx_path, RTLD_LAZY | RTLD_NOLOAD);
        /* The reference is kept: the pointer stays valid. */
        if (cxx) *(void **)&p->demangle = dlvsym(cxx, "__cxa_demangle", "CXXABI_1.3");
    }
    return p;
}

/* libdwfl on this process, once: what the first frame not yet in the
 * table needs. Its modules come from the process's maps (dwflfiles.h). */
static void open_dwfl(struct priv *p) {
    p->dwfl_tried = 1;
    p->inlines = vt_inlines_new();
    p->dwfl = dwfl_begin(&vt_dwfl_callbacks);
    int e = p->dwfl ? vt_dwfl_report_self(p->dwfl) : 0;
    /* The maps' descriptor closed under the read by the program (a
     * daemon's close_range(3, ~0U) while the live view's thread read them:
     * EBADF, or the program's own file read at that number after it
     * opened one there): read again, with a descriptor of its own, rather
     * than name every frame by module and offset. */
    for (int again = 0; p->dwfl && e != 0 && again < 3; again++) {
        vt_dwfl_end(p->dwfl);
        p->dwfl = dwfl_begin(&vt_dwfl_callbacks);
        e = p->dwfl ? vt_dwfl_report_self(p->dwfl) : 0;
    }
    if (p->dwfl && e == 0) {
        dwfl_report_end(p->dwfl, NULL, NULL);
        return;
    }
    /* Said once a process: every output after it names frames the same way. */
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        vt_warn("cannot read this process's symbols (%s): frames are named by module and offset, which "
                "`addr2line -f -e MODULE OFFSET` turns into a function and line",
                p->dwfl ? (e > 0 ? strerror(e) : "its memory map did not read")
                        : vt_dw_unloaded_why() ? vt_dw_unloaded_why() : "libdw made no session");
    if (p->dwfl) vt_dwfl_end(p->dwfl);
    p->dwfl = NULL;
}

/* Whether the file of a library without a build ID is still the one
 * that was mapped: the same file (device, inode, size, modification time)
 * as at the dlclose, and its first executable segment's fingerprint, read
 * from it, the one taken in memory then. */
static int same_code_in_file(const struct vt_code_span *s) {
    if (!s->text_len || !s->file) return 0;
    int fd = vt_fd_open(AT_FDCWD, s->path, O_RDONLY, 0);
    if (fd < 0) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_dev != s->dev || st.st_ino != s->ino || (uint64_t)st.st_size != s->size ||
        (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec != s->mtime_ns) {
        close(fd);
        return 0;
    }
    unsigned char buf[VT_PRINT_SAMPLES * VT_PRINT_BYTES];
    uint64_t h = vt_print_start(s->text_len), n = vt_print_len(s->text_len);
    int ok = 1;
    for (uint32_t k = 0; ok && k < vt_print_samples(s->text_len); k++) {
        ok = pread(fd, buf, n, (off_t)(s->text_off + vt_print_at(s->text_len, k))) == (ssize_t)n;
        if (ok) h = vt_print_add(h, buf, n);
    }
    close(fd);
    return ok && h == s->text_hash;
}

/* libdwfl on the file of a library that has left the process, at the
 * load bias it had, once per departure; NULL when the file is gone or is
 * no longer the one that was loaded (its build ID differs): its frames
 * then keep their module and offset. `key` is tagged with departure d. */
static Dwfl *departed_dwfl(struct priv *p, uintptr_t key, const struct vt_departed *d) {
    size_t i = vt_departed_index(key);
    if (i >= VT_MAX_DEPARTED) return NULL;
    if (!p->gone) {
        p->gone = calloc(VT_MAX_DEPARTED, sizeof *p->gone);
        p->gone_tried = calloc(VT_MAX_DEPARTED, 1);
        if (!p->gone || !p->gone_tried) {
            free(p->gone);
            free(p->gone_tried);
            p->gone = NULL;
            p->gone_tried = NULL;
            return NULL;
        }
    }
    if (p->gone_tried[i]) return p->gone[i];
    p->gone_tried[i] = 1;
    if (!p->inlines) p->inlines = vt_inlines_new();
    Dwfl *dw = dwfl_begin(&vt_dwfl_callbacks);
    if (!dw) return NULL;
    dwfl_report_begin(dw);
    /* At its load bias: libdwfl adds the first segment's address (a
     * library linked to start elsewhere than 0 was read that far off). */
    Dwfl_Module *m = vt_dwfl_report_file(dw, d->span.path, d->span.base);
    dwfl_report_end(dw, NULL, NULL);
    const unsigned char *bits = NULL;
    GElf_Addr vaddr;
    int len = m ? dwfl_module_build_id(m, &bits, &vaddr) : -1;
    int same = m && (d->span.build_id_len ? len == d->span.build_id_len && memcmp(bits, d->span.build_id, (size_t)len) == 0
                                          : len <= 0 && same_code_in_file(&d->span));
    if (!same) {
        vt_dwfl_end(dw);
        return NULL;
    }
    return p->gone[i] = dw;
}

/* What libdwfl read (decompressed debug sections among it, tens of MB
 * with a C library's separate debug file) given back: every frame asked
 * for is in the table. */
static void close_dwfl(struct priv *p) {
    vt_inlines_free(p->inlines);
    p->inlines = NULL;
    if (p->dwfl) vt_dwfl_end(p->dwfl);
    p->dwfl = NULL;
    p->dwfl_tried = 0;
    if (p->gone)
        for (size_t i = 0; i < VT_MAX_DEPARTED; i++)
            if (p->gone[i]) vt_dwfl_end(p->gone[i]);
    free(p->gone);
    free(p->gone_tried);
    p->gone = NULL;
    p->gone_tried = NULL;
}

static void priv_free(struct priv *p) {
    if (!p) return;
    for (uint32_t i = 0; i < p->nframes; i++) {
        free((void *)p->frames[i].function);
        free((void *)p->frames[i].file);
        free((void *)p->frames[i].module);
    }
    free(p->frames);
    free(p->keys);
    free(p->slot);
    close_dwfl(p);
    free(p);
}

struct vt_symbols_ahead {
    struct priv *p;
};

struct vt_symbols_ahead *vt_symbolize_ahead(uint64_t within_ns) {
    size_t n = 0;
    const struct vt_stack **stacks = vt_tracker_stacks(&n, within_ns);
    struct vt_symbols_ahead *a = stacks ? calloc(1, sizeof *a) : NULL;
    if (a) a->p = priv_new();
    if (a && a->p) {
        for (size_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < stacks[i]->depth && j < VT_MAX_FRAMES; j++)
                if (!frame_of(a->p, vt_code_key(stacks[i], j))) break;
        close_dwfl(a->p);
    }
    free(stacks);
    /* libdwfl's memory, freed, stays resident in malloc's free lists
     * (about 12 MiB) while the snapshot then makes its tables: given back
     * here, so that the two are never resident at once. */
    malloc_trim(0);
    return a;
}

void vt_symbols_ahead_free(struct vt_symbols_ahead *a) {
    if (!a) return;
    priv_free(a->p);
    free(a);
}

/* The symbols of s's stacks from frame table p (sym's from then on);
 * with `used` (a bit a stack), of those stacks alone, the others unnamed
 * (site -1). NULL when memory ran out (p is then sym's no more). */
static struct vt_symbols *symbolize(const struct vt_snapshot *s, struct priv *p, const uint64_t *used) {
    struct vt_symbols *sym = calloc(1, sizeof *sym);
    if (!sym) return NULL;
    sym->priv = p;
    size_t n = s->nstacks;
    sym->nstacks = n;
    sym->stack = s->stacks;
    sym->site1 = calloc(n ? n : 1, sizeof *sym->site1);
    sym->through1 = calloc(n ? n : 1, sizeof *sym->through1);
    sym->traits = calloc(n ? n : 1, 1);   /* NULL: asked again each time */
    struct vt_frame *buf = malloc(VT_SHOWN_FRAMES * sizeof *buf);
    if (!sym->site1 || !sym->through1 || !buf) {
        free(buf);
        sym->priv = NULL; /* the caller's still */
        vt_symbols_free(sym);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (used && !used[i / 64]) { /* none of the 64: unnamed (0), their pages untouched */
            i |= 63;
            continue;
        }
        if (used && !(used[i / 64] >> (i % 64) & 1)) continue;
        const struct vt_stack *st = s->stacks[i];
        uint32_t depth = st->depth < VT_MAX_FRAMES ? st->depth : VT_MAX_FRAMES, got = 0;
        size_t shown = 0;
        for (; got < depth; got++) {
            const struct vt_frame *fr = frame_of(p, vt_code_key(st, got));
            if (!fr) break;
            for (size_t k = 0, at = vt_frames_at(fr); k < at && shown < VT_SHOWN_FRAMES; k++) buf[shown++] = fr[k];
        }
        if (got < depth) continue;  /* out of memory: the stack goes unnamed */
        int site = vt_site_index(buf, shown);
        sym->site1[i] = site + 1;
        sym->through1[i] = vt_site_through(buf, shown, site) + 1;
    }
    free(buf);
    /* Every frame is symbolized: libdwfl's memory is given back before the
     * report is written. */
    close_dwfl(p);
    /* With `used`, the groups are made when asked for (vt_site_groups):
     * every stack's label was 4 ms of a mark's report's 11 in a process of
     * 100,000 stacks. */
    if (!used) sym->group = site_groups(sym, n, &sym->ngroups, &sym->group_lowest);
    return sym;
}

struct vt_symbols *vt_symbolize_with(const struct vt_snapshot *s, struct vt_symbols_ahead *ahead) {
    struct priv *p = ahead && ahead->p ? ahead->p : priv_new();
    if (ahead) {
        ahead->p = NULL;
        vt_symbols_ahead_free(ahead);
    }
    struct vt_symbols *sym = p ? symbolize(s, p, NULL) : NULL;
    if (!sym) priv_free(p);
    return sym;
}

struct vt_symbols *vt_symbolize(const struct vt_snapshot *s) { return vt_symbolize_with(s, NULL); }

/* The kept frame table (vt_symbolize_kept): the process's one, begun at
 * departure count kept_notes, its lock held from vt_symbolize_kept to the
 * vt_symbols_free of the symbols it returned (their `kept`). */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct priv *kept;
static uint32_t kept_notes;

/* Stack st of s marked in used. */
static void mark_used(uint64_t *used, const struct vt_snapshot *s, uint32_t st) {
    if (st < s->nstacks) used[st / 64] |= 1ull << (st % 64);
}

static void mark_holders(uint64_t *used, const struct vt_snapshot *s, const struct vt_holder *h, size_t n) {
    for (size_t i = 0; h && i < n; i++) mark_used(used, s, h[i].stack);
}

struct vt_symbols *vt_symbolize_kept(const struct vt_snapshot *s) {
    uint64_t *used = calloc(s->nstacks / 64 + 1, sizeof *used);
    if (!used) return vt_symbolize(s);
    struct vt_live_reader *rd = s->nlive ? vt_live_read(s, 0) : NULL;
    if (s->nlive && !rd) { /* the live list unread: every stack */
        free(used);
        return vt_symbolize(s);
    }
    for (const struct vt_live *a; rd && (a = vt_live_next(rd));) mark_used(used, s, a->stack);
    vt_live_read_end(rd);
    mark_holders(used, s, s->holders, s->nholders);
    mark_holders(used, s, s->all_holders, s->nall_holders);
    mark_holders(used, s, s->peak_holders, s->npeak_holders);
    mark_holders(used, s, s->released, s->nreleased);
    mark_holders(used, s, s->released_host, s->nreleased_host);
    pthread_mutex_lock(&kept_lock);
    /* Code has left since the table was begun: an address in it may be
     * another library's now. */
    uint32_t notes = __atomic_load_n(&vt_departed_notes, __ATOMIC_ACQUIRE);
    if (kept && notes != kept_notes) {
        priv_free(kept);
        kept = NULL;
    }
    if (!kept) {
        kept = priv_new();
        kept_notes = notes;
    }
    struct vt_symbols *sym = kept ? symbolize(s, kept, used) : NULL;
    free(used);
    if (!sym) {
        pthread_mutex_unlock(&kept_lock);
        return NULL;
    }
    sym->kept = 1;
    return sym;
}

void vt_symbolize_reset_child(void) {
    /* Held by a thread of the parent's: its table may be half made. */
    if (pthread_mutex_trylock(&kept_lock) == 0) {
        pthread_mutex_unlock(&kept_lock);
        return;
    }
    kept = NULL;
    pthread_mutex_init(&kept_lock, NULL);
}

const struct vt_frame *vt_symbols_frame(const struct vt_symbols *sym, uintptr_t key) {
    return sym ? frame_keyed(sym->priv, key) : NULL;
}

size_t vt_stack_frames(const struct vt_symbols *sym, uint32_t stack, struct vt_frame *out) {
    if (!sym || stack >= sym->nstacks) return 0;
    const struct vt_stack *st = sym->stack[stack];
    uint32_t depth = st->depth < VT_MAX_FRAMES ? st->depth : VT_MAX_FRAMES;
    size_t shown = 0;
    for (uint32_t j = 0; j < depth; j++) {
        const struct vt_frame *fr = frame_keyed(sym->priv, vt_code_key(st, j));
        if (!fr) return 0;
        for (size_t k = 0, at = vt_frames_at(fr); k < at && shown < VT_SHOWN_FRAMES; k++) out[shown++] = fr[k];
    }
    return shown;
}

/* The symbols of frame k of stack `stack` (counting each inlined function
 * as its own frame, as vt_stack_frames does), or NULL (k < 0: none). */
static const struct vt_frame *frame_at(const struct vt_symbols *sym, uint32_t stack, int k) {
    if (!sym || stack >= sym->nstacks || k < 0 || k >= VT_SHOWN_FRAMES) return NULL;
    const struct priv *p = sym->priv;
    const struct vt_stack *st = sym->stack[stack];
    uint32_t depth = st->depth < VT_MAX_FRAMES ? st->depth : VT_MAX_FRAMES;
    if (!p->ninlined) return (uint32_t)k < depth ? frame_keyed(p, vt_code_key(st, (uint32_t)k)) : NULL;
    for (uint32_t j = 0; j < depth; j++) {
        const struct vt_frame *fr = frame_keyed(p, vt_code_key(st, j));
        if (!fr) return NULL;
        size_t at = vt_frames_at(fr);
        if ((size_t)k < at) return &fr[k];
        k -= (int)at;
    }
    return NULL;
}

const struct vt_frame *vt_call_site(const struct vt_symbols *sym, uint32_t stack) {
    return frame_at(sym, stack, vt_sym_site(sym, stack)); /* -1: none */
}

const char *vt_site_label(const struct vt_symbols *sym, uint32_t stack, char *buf, size_t size) {
    const struct vt_frame *site = vt_call_site(sym, stack);
    return vt_site_label_of(site, site ? frame_at(sym, stack, vt_sym_through(sym, stack)) : NULL, buf, size);
}

const char *vt_site_shown(const struct vt_symbols *sym, uint32_t stack, char *buf, size_t size) {
    char raw[2048];
    return vt_display(vt_site_label(sym, stack, raw, sizeof raw), buf, size);
}

void vt_symbols_free(struct vt_symbols *sym) {
    if (!sym) return;
    free(sym->group);
    free(sym->group_lowest);
    free(sym->site1);
    free(sym->through1);
    free(sym->traits);
    if (sym->kept) pthread_mutex_unlock(&kept_lock);
    else priv_free(sym->priv);
    free(sym);
}
