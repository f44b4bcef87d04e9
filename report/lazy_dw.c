/* lazy_dw.c -- libdw (elfutils' libdwfl), loaded at its first use.
 *
 * The library is not linked against libdw: it and the four libraries it
 * brings (libelf, libz, libbz2, liblzma) cost every process LD_PRELOAD
 * reaches a load at start, and only writing a report needs them. These are
 * the libdwfl, libdw and libelf functions symbolize.c, dwflfiles.c, inlines.c and debuglink.c call, under their own names and hidden
 * (they stand in only for vramtrace's own calls, never for a program's
 * libdw): the first one called loads libdw.so.1 and finds the real ones.
 * Without libdw, dwfl_begin returns NULL (symbolize.c then names modules
 * and offsets from the loader's memory, lazy_dw.h says why), and the
 * others are never reached. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <pthread.h>
#include <stdio.h>

#include "../common/dlagain.h"
#include "lazy_dw.h"

#define VT_HIDDEN __attribute__((visibility("hidden")))

#define DW_FUNCS(_)                                                                               \
    _(Dwfl *, dwfl_begin, (const Dwfl_Callbacks *c), (c), NULL)                                      \
    _(int, dwfl_linux_proc_report, (Dwfl *d, pid_t pid), (d, pid), -1)                               \
    _(int, dwfl_linux_proc_maps_report, (Dwfl *d, FILE *f), (d, f), -1)                              \
    _(Dwfl_Module *, dwfl_report_module, (Dwfl *d, const char *n, Dwarf_Addr s, Dwarf_Addr e),        \
      (d, n, s, e), NULL)                                                                            \
    _(int, dwfl_report_end, (Dwfl *d, int (*rm)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *), \
      void *arg), (d, rm, arg), -1)                                                                  \
    _(Dwfl_Module *, dwfl_addrmodule, (Dwfl *d, Dwarf_Addr a), (d, a), NULL)                          \
    _(ptrdiff_t, dwfl_getmodules, (Dwfl *d, int (*cb)(Dwfl_Module *, void **, const char *, Dwarf_Addr, void *), \
      void *arg, ptrdiff_t off), (d, cb, arg, off), -1)                                             \
    _(const char *, dwfl_module_info, (Dwfl_Module *m, void ***u, Dwarf_Addr *s, Dwarf_Addr *e,        \
      Dwarf_Addr *dw, Dwarf_Addr *sy, const char **mf, const char **df), (m, u, s, e, dw, sy, mf, df), NULL) \
    _(const char *, dwfl_module_addrname, (Dwfl_Module *m, GElf_Addr a), (m, a), NULL)               \
    _(Dwfl_Line *, dwfl_module_getsrc, (Dwfl_Module *m, Dwarf_Addr a), (m, a), NULL)                  \
    _(const char *, dwfl_lineinfo, (Dwfl_Line *l, Dwarf_Addr *a, int *ln, int *col, Dwarf_Word *mt,  \
      Dwarf_Word *len), (l, a, ln, col, mt, len), NULL)                                              \
    _(int, dwfl_linux_proc_find_elf, (Dwfl_Module *m, void **u, const char *n, Dwarf_Addr b, char **f, \
      Elf **e), (m, u, n, b, f, e), -1)                                                              \
    _(int, dwfl_build_id_find_debuginfo, (Dwfl_Module *m, void **u, const char *n, Dwarf_Addr b,      \
      const char *f, const char *df, GElf_Word crc, char **dfn), (m, u, n, b, f, df, crc, dfn), -1)    \
    _(Dwarf_Die *, dwfl_module_addrdie, (Dwfl_Module *m, Dwarf_Addr a, Dwarf_Addr *bias), (m, a, bias), NULL) \
    _(int, dwarf_child, (Dwarf_Die *die, Dwarf_Die *r), (die, r), -1)                                \
    _(int, dwarf_siblingof, (Dwarf_Die *die, Dwarf_Die *r), (die, r), -1)                            \
    _(int, dwarf_haschildren, (Dwarf_Die *die), (die), -1)                                           \
    _(ptrdiff_t, dwarf_ranges, (Dwarf_Die *die, ptrdiff_t off, Dwarf_Addr *base, Dwarf_Addr *lo,       \
      Dwarf_Addr *hi), (die, off, base, lo, hi), -1)                                                 \
    _(Dwarf_Off, dwarf_dieoffset, (Dwarf_Die *die), (die), (Dwarf_Off)-1)                            \
    _(Dwarf *, dwfl_module_getdwarf, (Dwfl_Module *m, Dwarf_Addr *bias), (m, bias), NULL)             \
    _(int, dwarf_nextcu, (Dwarf *d, Dwarf_Off off, Dwarf_Off *next, size_t *hs, Dwarf_Off *ab, uint8_t *as, \
      uint8_t *os), (d, off, next, hs, ab, as, os), -1)                                              \
    _(Dwarf_Die *, dwarf_offdie, (Dwarf *d, Dwarf_Off off, Dwarf_Die *r), (d, off, r), NULL)          \
    _(Dwarf_Line *, dwarf_getsrc_die, (Dwarf_Die *cu, Dwarf_Addr a), (cu, a), NULL)                   \
    _(const char *, dwarf_linesrc, (Dwarf_Line *l, Dwarf_Word *mt, Dwarf_Word *len), (l, mt, len), NULL) \
    _(int, dwarf_lineno, (Dwarf_Line *l, int *n), (l, n), -1)                                        \
    _(int, dwarf_tag, (Dwarf_Die *die), (die), -1)                                                   \
    _(Dwarf_Attribute *, dwarf_attr, (Dwarf_Die *die, unsigned int at, Dwarf_Attribute *r), (die, at, r), NULL) \
    _(Dwarf_Attribute *, dwarf_attr_integrate, (Dwarf_Die *die, unsigned int at, Dwarf_Attribute *r),  \
      (die, at, r), NULL)                                                                            \
    _(const char *, dwarf_formstring, (Dwarf_Attribute *a), (a), NULL)                               \
    _(int, dwarf_formudata, (Dwarf_Attribute *a, Dwarf_Word *v), (a, v), -1)                         \
    _(int, dwarf_getsrcfiles, (Dwarf_Die *cu, Dwarf_Files **files, size_t *n), (cu, files, n), -1)     \
    _(const char *, dwarf_filesrc, (Dwarf_Files *f, size_t i, Dwarf_Word *mt, Dwarf_Word *len),        \
      (f, i, mt, len), NULL) \
    _(Dwfl_Module *, dwfl_report_elf, (Dwfl *d, const char *n, const char *fn, int fd, GElf_Addr b, bool add), \
      (d, n, fn, fd, b, add), NULL)                                                                  \
    _(int, dwfl_module_build_id, (Dwfl_Module *m, const unsigned char **bits, GElf_Addr *va),         \
      (m, bits, va), -1)                                                                             \
    _(Elf *, dwfl_module_getelf, (Dwfl_Module *m, GElf_Addr *bias), (m, bias), NULL)                  \
    _(int, elf_getphdrnum, (Elf *e, size_t *n), (e, n), -1)                                          \
    _(GElf_Phdr *, gelf_getphdr, (Elf *e, int i, GElf_Phdr *ph), (e, i, ph), NULL)                    \
    _(Elf *, elf_begin, (int fd, Elf_Cmd cmd, Elf *ref), (fd, cmd, ref), NULL)                        \
    _(int, elf_end, (Elf *e), (e), -1)                                                               \
    _(int, elf_cntl, (Elf *e, Elf_Cmd cmd), (e, cmd), -1)                                            \
    _(const char *, dwelf_elf_gnu_debuglink, (Elf *e, GElf_Word *crc), (e, crc), NULL)                \
    _(ssize_t, dwelf_elf_gnu_build_id, (Elf *e, const void **id), (e, id), -1)

static struct {
#define FIELD(ret, name, params, args, fail) ret (*name) params;
    DW_FUNCS(FIELD)
#undef FIELD
    void (*dwfl_end)(Dwfl *);
    void (*dwfl_report_begin)(Dwfl *);
} real;
/* Loaded once it loads: a load that failed (no descriptor left at an
 * out-of-memory failure in a program that used them all) is tried again
 * at the next use, by the next report. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;
static char unloaded_why[256];

static void load_now(void) {
    void *h = vt_dlopen_again("libdw.so.1", RTLD_LAZY | RTLD_LOCAL, unloaded_why, sizeof unloaded_why);
    if (!h) return;
/* Each at the version it first came in (all 0.122 but the build-id lookup, 0.130; two more below). */
#define FIND(ret, name, params, args, fail)                                  \
    if (!(*(void **)&real.name = dlvsym(h, #name, "ELFUTILS_0.122")))        \
        *(void **)&real.name = dlvsym(h, #name, "ELFUTILS_0.130");
    DW_FUNCS(FIND)
#undef FIND
    *(void **)&real.dwfl_end = dlvsym(h, "dwfl_end", "ELFUTILS_0.122");
    *(void **)&real.dwfl_report_begin = dlvsym(h, "dwfl_report_begin", "ELFUTILS_0.122");
    /* These two changed after they came in: the versions whose arguments
     * are the ones declared today. */
    *(void **)&real.dwfl_report_elf = dlvsym(h, "dwfl_report_elf", "ELFUTILS_0.156");
    *(void **)&real.dwfl_module_build_id = dlvsym(h, "dwfl_module_build_id", "ELFUTILS_0.138");
    /* A debug file's build ID (debuglink.c). */
    *(void **)&real.dwelf_elf_gnu_build_id = dlvsym(h, "dwelf_elf_gnu_build_id", "ELFUTILS_0.159");
    /* A module's own .gnu_debuglink, to tell its debug file's lookup from
     * its dwz file's (dwflfiles.c). */
    *(void **)&real.dwelf_elf_gnu_debuglink = dlvsym(h, "dwelf_elf_gnu_debuglink", "ELFUTILS_0.159");
    /* libelf's, found through libdw, which needs it. */
    *(void **)&real.elf_getphdrnum = dlvsym(h, "elf_getphdrnum", "ELFUTILS_1.6");
    *(void **)&real.gelf_getphdr = dlvsym(h, "gelf_getphdr", "ELFUTILS_1.0");
    *(void **)&real.elf_begin = dlvsym(h, "elf_begin", "ELFUTILS_1.0");
    *(void **)&real.elf_end = dlvsym(h, "elf_end", "ELFUTILS_1.0");
    *(void **)&real.elf_cntl = dlvsym(h, "elf_cntl", "ELFUTILS_1.0");
    __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
}

static void load(void) {
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&load_lock);
    if (!loaded) load_now();
    pthread_mutex_unlock(&load_lock);
}

VT_HIDDEN const char *vt_dw_unloaded_why(void) {
    pthread_mutex_lock(&load_lock);
    const char *why = loaded ? NULL : unloaded_why[0] ? unloaded_why : "libdw.so.1: not loaded";
    pthread_mutex_unlock(&load_lock);
    return why;
}

#define STAND_IN(ret, name, params, args, fail)                 \
    VT_HIDDEN ret name params {                                 \
        load();                         \
        if (!real.name) return fail;                            \
        return real.name args;                                  \
    }
DW_FUNCS(STAND_IN)
#undef STAND_IN

VT_HIDDEN void dwfl_end(Dwfl *d) {
    load();
    if (real.dwfl_end) real.dwfl_end(d);
}

VT_HIDDEN void dwfl_report_begin(Dwfl *d) {
    load();
    if (real.dwfl_report_begin) real.dwfl_report_begin(d);
}
