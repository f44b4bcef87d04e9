/* t_pywalk.c -- the calling thread's Python frames (tracker/pystack.c's
 * walk and merge) on fake CPython objects laid out as one version's table
 * says, the version the first argument names (10, 11, 12 or 13; 3.13's
 * offsets are read from a fake _PyRuntime's debug offsets, here chosen
 * apart from 3.12's). Checks the frames' names and lines, where each group
 * of frames goes among the native frames (3.10: one group a frame; 3.11:
 * frames marked as entries; 3.12 and 3.13: a C-stack shim ends a group), a
 * moved instruction read anew past the thread's memo, and a tagged 3.13
 * executable. Built with ASan+UBSan and -rdynamic (the eval loop's extent
 * is its symbol's). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tracker/pylayout.h"
#include "../../tracker/pystack.h"
#include "../unit/check.h"

#define PUT(T, base, off, v) (*(T *)((char *)(base) + (off)) = (v))
#define GET(T, base, off) (*(T *)((char *)(base) + (off)))

/* Where each version keeps what the walk reads. */
struct lay {
    int ts_frame, ts_cframe, cf_current;
    int fr_code, fr_previous, fr_instr, fr_lasti, fr_owner, fr_is_entry;
    int co_filename, co_name, co_qualname, co_firstlineno, co_linetable, co_code;
    int str_ascii;
};
static const struct lay lays[] = {
    [10] = {24, -1, -1, 32, 24, -1, 96, -1, -1, 104, 112, -1, 40, 120, -1, 48},
    [11] = {-1, 56, 8, 32, 48, 56, -1, 69, 68, 112, 120, 128, 72, 136, 184, 48},
    [12] = {-1, 56, 0, 0, 8, 56, -1, 70, -1, 112, 120, 128, 68, 136, 192, 40},
    /* 3.13 as the fake debug offsets below say. */
    [13] = {40, -1, -1, 16, 8, 24, -1, 44, -1, 96, 104, 112, 88, 120, 160, 40},
};
static struct lay Y;
static int minor;

/* PyCode_Type as far as the library checks it: tp_name "code" (offset
 * 24) and a tp_dealloc (48), which it wraps to count code objects freed. */
static void code_dealloc(void *o) { (void)o; }
static _Alignas(16) char fake_code_type[64];
static void fake_code_type_make(void) {
    *(const char **)(fake_code_type + 24) = "code";
    *(void (**)(void *))(fake_code_type + 48) = code_dealloc;
}
static unsigned long version;
static _Alignas(16) struct py313_debug_offsets runtime;
static void *tstate_self;

__attribute__((noinline, used)) void _PyEval_EvalFrameDefault(void) { __asm__ volatile("" ::: "memory"); }
static void *this_tstate(void) { return tstate_self; }
static int initialized(void) { return 1; }
/* 3.10's PyCode_Addr2Line, for the fake code: its first line plus the
 * code unit. */
static int addr2line(void *code, int off) { return GET(int, code, Y.co_firstlineno) + off / 2; }

static void *lookup(const char *name) {
    if (!strcmp(name, "PyGILState_GetThisThreadState")) return (void *)this_tstate;
    if (!strcmp(name, "PyCode_Type")) return fake_code_type;
    if (!strcmp(name, "Py_IsInitialized")) return (void *)initialized;
    if (!strcmp(name, "Py_Version")) return &version;
    if (!strcmp(name, "_PyRuntime")) return minor == 13 ? &runtime : NULL;
    if (!strcmp(name, "PyCode_Addr2Line")) return (void *)addr2line;
    if (!strcmp(name, "_PyEval_EvalFrameDefault")) return (void *)_PyEval_EvalFrameDefault;
    return NULL;
}

/* A compact ASCII str object. */
static void *make_str(char *mem, const char *s) {
    memset(mem, 0, 64);
    PUT(int64_t, mem, 16, (int64_t)strlen(s));
    PUT(uint32_t, mem, 32, (1u << 2) | (1u << 5) | (1u << 6));
    strcpy(mem + Y.str_ascii, s);
    return mem;
}

/* A code object at line `line` for code units 0 to 7 and line + 1 for 8
 * to 15 (3.11+'s location table: two entries of 8 units, no column). */
struct code { _Alignas(16) char obj[512], file[128], name[128], table[64]; };
static void *make_code(struct code *c, const char *file, const char *name, int line) {
    memset(c, 0, sizeof *c);
    PUT(void *, c->obj, 8, fake_code_type);
    PUT(void *, c->obj, Y.co_filename, make_str(c->file, file));
    PUT(void *, c->obj, Y.co_name, make_str(c->name, name));
    if (Y.co_qualname >= 0) PUT(void *, c->obj, Y.co_qualname, c->name);
    PUT(int, c->obj, Y.co_firstlineno, line);
    PUT(int64_t, c->table, 16, 4);
    c->table[32] = (char)(0x80 | (13 << 3) | 7);
    c->table[33] = 0;   /* line delta 0 */
    c->table[34] = (char)(0x80 | (13 << 3) | 7);
    c->table[35] = 2;   /* line delta +1 */
    PUT(void *, c->obj, Y.co_linetable, c->table);
    return c->obj;
}

/* A frame running `code` at code unit `unit`. */
struct frame { _Alignas(16) char f[128]; };
static void set_unit(void *f, void *code, int unit) {
    if (minor == 10) PUT(int, f, Y.fr_lasti, unit);
    else PUT(uintptr_t, f, Y.fr_instr, (uintptr_t)code + (uintptr_t)Y.co_code + 2u * (unsigned)unit);
}
static void *make_frame(struct frame *fr, void *code, int unit, void *previous) {
    memset(fr, 0, sizeof *fr);
    PUT(uintptr_t, fr->f, Y.fr_code, minor == 13 ? (uintptr_t)code | 1 : (uintptr_t)code); /* 3.13 tags it */
    PUT(void *, fr->f, Y.fr_previous, previous);
    set_unit(fr->f, code, unit);
    return fr->f;
}
/* 3.12 and 3.13's frame that C pushes where it enters the eval loop. */
static void *make_shim(struct frame *fr, void *previous) {
    memset(fr, 0, sizeof *fr);
    PUT(void *, fr->f, Y.fr_previous, previous);
    PUT(char, fr->f, Y.fr_owner, 3);
    return fr->f;
}

static const char *name_of(uintptr_t v, int *line) {
    const char *fn, *file;
    if (!vt_pyframe_is(v) || vt_pyframe_resolve(v, &fn, &file, line) != 0) return "(native)";
    static char buf[256];
    snprintf(buf, sizeof buf, "%s %s", fn, file);
    return buf;
}

/* 3.13's debug offsets, as the fake _PyRuntime gives them. */
static void fill_313(void) {
    memcpy(runtime.cookie, "xdebugpy", 8);
    runtime.version = 0x030d00f0;
    runtime.thread_state.size = 256;
    runtime.thread_state.current_frame = (uint64_t)Y.ts_frame;
    runtime.thread_state.next = 8;
    runtime.interpreter_frame.size = 96;
    runtime.interpreter_frame.previous = (uint64_t)Y.fr_previous;
    runtime.interpreter_frame.executable = (uint64_t)Y.fr_code;
    runtime.interpreter_frame.instr_ptr = (uint64_t)Y.fr_instr;
    runtime.interpreter_frame.owner = (uint64_t)Y.fr_owner;
    runtime.code_object.size = 400;
    runtime.code_object.filename = (uint64_t)Y.co_filename;
    runtime.code_object.name = (uint64_t)Y.co_name;
    runtime.code_object.qualname = (uint64_t)Y.co_qualname;
    runtime.code_object.linetable = (uint64_t)Y.co_linetable;
    runtime.code_object.firstlineno = (uint64_t)Y.co_firstlineno;
    runtime.code_object.co_code_adaptive = (uint64_t)Y.co_code;
    runtime.pyobject.ob_type = 8;
    runtime.bytes_object.ob_size = 16;
    runtime.bytes_object.ob_sval = 32;
    runtime.unicode_object.state = 32;
    runtime.unicode_object.length = 16;
    runtime.unicode_object.asciiobject_size = (uint64_t)Y.str_ascii;
}

int main(int argc, char **argv) {
    minor = argc > 1 ? atoi(argv[1]) : 0;
    if (minor < 10 || minor > 13) return 2;
    Y = lays[minor];
    version = 0x03000000ul | ((unsigned long)minor << 16) | 0xf0;
    if (minor == 13) fill_313();
    fake_code_type_make();
    vt_pystack_init(lookup, 1);
    CHECK_EQ(vt_pystack_version(), version);

    /* Innermost first: a (line 10) and b (20) run by one eval-loop call,
     * c (30) by the next; 3.12+ mark the boundary with a shim, 3.11 marks b
     * as the first frame of its call; 3.10 runs each frame in its own. */
    static struct code ca, cb, cc;
    static struct frame fa, fb, fshim, fc;
    void *ka = make_code(&ca, "a.py", "fa", 10), *kb = make_code(&cb, "b.py", "fb", 20);
    void *kc = make_code(&cc, "c.py", "fc", 30);
    void *c = make_frame(&fc, kc, 3, NULL);
    void *below_b = minor >= 12 ? make_shim(&fshim, c) : c;
    void *b = make_frame(&fb, kb, 3, below_b);
    void *a = make_frame(&fa, ka, 3, b);
    if (minor == 11) PUT(char, b, Y.fr_is_entry, 1);
    static _Alignas(16) char ts[256], cframe[64];
    if (Y.ts_cframe >= 0) {
        PUT(void *, cframe, Y.cf_current, a);
        PUT(void *, ts, Y.ts_cframe, cframe);
    } else {
        PUT(void *, ts, Y.ts_frame, a);
    }
    tstate_self = ts;

    uintptr_t eval = (uintptr_t)_PyEval_EvalFrameDefault + 1;
    uintptr_t native[5] = {0x1000, eval, 0x2000, eval, 0x3000}, out[16];
    static uintptr_t deep_out[256];
    int line = 0;
    const char *want10[] = {"(native)", "fa a.py", "(native)", "fb b.py", "(native)", "fc c.py"};
    const char *want[] = {"(native)", "fa a.py", "fb b.py", "(native)", "fc c.py", "(native)"};
    const char **w = minor == 10 ? want10 : want;
    int lines10[] = {0, 10 + 3, 0, 20 + 3, 0, 30 + 3}, lines[] = {0, 10, 20, 0, 30, 0};
    const int *wl = minor == 10 ? lines10 : lines;
    for (int round = 0; round < 2; round++) {   /* the second from the thread's memo */
        CHECK_EQ(vt_pystack_merge(native, 5, out, 16), 6);
        for (int i = 0; i < 6; i++) {
            CHECK_STR(name_of(out[i], &line), w[i]);
            if (vt_pyframe_is(out[i])) CHECK_EQ(line, wl[i]);
        }
        CHECK(out[0] == 0x1000 && out[minor == 10 ? 2 : 3] == 0x2000);
    }
    /* a moves on (code unit 9: line 11 from the table; 3.10: 10 + 9): the
     * memo must not answer for it. */
    set_unit(a, ka, 9);
    CHECK_EQ(vt_pystack_merge(native, 5, out, 16), 6);
    CHECK_STR(name_of(out[1], &line), "fa a.py");
    CHECK_EQ(line, minor == 10 ? 19 : 11);
    /* a back and forth between its two lines (an allocation from each in
     * turn): both in the memo's set for a's place, each answered right. */
    for (int i = 0; i < 6; i++) {
        set_unit(a, ka, i & 1 ? 9 : 3);
        CHECK_EQ(vt_pystack_merge(native, 5, out, 16), 6);
        CHECK_STR(name_of(out[1], &line), "fa a.py");
        CHECK_EQ(line, i & 1 ? (minor == 10 ? 19 : 11) : (minor == 10 ? 13 : 10));
    }
    /* Room for fewer frames than there are: the innermost ones, in order,
     * a frame for those left out, and the outermost Python frames (a
     * quarter of the room) with the native frames outside them. */
    CHECK_EQ(vt_pystack_merge(native, 5, out, 3), 3);
    CHECK_STR(name_of(out[1], &line), "fa a.py");
    CHECK_STR(name_of(out[2], &line), "(4 frames left out) <vramtrace>");
    CHECK_EQ(line, 0);
    CHECK_EQ(vt_pystack_merge(native, 5, out, 4), 4);
    if (minor == 10) {   /* fa, a native frame, fb, a native frame, fc */
        CHECK_STR(name_of(out[1], &line), "fa a.py");
        CHECK_STR(name_of(out[2], &line), "(3 frames left out) <vramtrace>");
        CHECK_STR(name_of(out[3], &line), "fc c.py");
    } else {             /* fa, fb, a native frame, fc, a native frame */
        CHECK_STR(name_of(out[1], &line), "(3 frames left out) <vramtrace>");
        CHECK_STR(name_of(out[2], &line), "fc c.py");
        CHECK(out[3] == 0x3000);
    }

    /* The trail of a read (every frame met, the shim too) and what
     * vt_pystack_same makes of it: the same until any frame's code,
     * instruction, entry mark or place in the chain changes. */
    static struct vt_pyframes pf;
    static struct vt_pytrail trail;
    CHECK_EQ(vt_pystack_read(&pf, &trail), 3);
    CHECK_EQ(trail.n, minor >= 12 ? 4 : 3);
    CHECK(vt_pystack_same(&trail));
    set_unit(c, kc, 9);                        /* the outermost frame moves on */
    CHECK(!vt_pystack_same(&trail));
    set_unit(c, kc, 3);
    CHECK(vt_pystack_same(&trail));
    uintptr_t code_b = GET(uintptr_t, b, Y.fr_code);
    PUT(uintptr_t, b, Y.fr_code, GET(uintptr_t, c, Y.fr_code));   /* other code, same frame */
    CHECK(!vt_pystack_same(&trail));
    PUT(uintptr_t, b, Y.fr_code, code_b);
    CHECK(vt_pystack_same(&trail));
    if (minor >= 11) {
        /* 3.11: b entered from C or not; 3.12+: a's owner. */
        void *m = minor == 11 ? b : a;
        int off = minor == 11 ? Y.fr_is_entry : Y.fr_owner;
        char was = GET(char, m, off);
        PUT(char, m, off, (char)(was ^ 1));
        CHECK(!vt_pystack_same(&trail));
        PUT(char, m, off, was);
        CHECK(vt_pystack_same(&trail));
    }
    void *top = Y.ts_cframe >= 0 ? (void *)cframe : (void *)ts;
    int top_off = Y.ts_cframe >= 0 ? Y.cf_current : Y.ts_frame;
    PUT(void *, top, top_off, b);              /* a returned */
    CHECK(!vt_pystack_same(&trail));
    static struct frame fd;
    PUT(void *, top, top_off, make_frame(&fd, ka, 3, a));   /* a called another */
    CHECK(!vt_pystack_same(&trail));
    PUT(void *, fc.f, Y.fr_previous, &fd);     /* the chain goes on past its old end */
    PUT(void *, top, top_off, a);
    CHECK(!vt_pystack_same(&trail));
    PUT(void *, fc.f, Y.fr_previous, NULL);
    CHECK(vt_pystack_same(&trail));
    trail.n = -1;                              /* a read that kept nothing */
    CHECK(!vt_pystack_same(&trail));

    /* The patch (vt_pystack_patch): a read kept with its trail, spliced
     * with the places of its frames; frames that move to other lines are
     * patched in place, each time into what a fresh merge gives, and the
     * trail follows them; another code at a frame's place too; another
     * depth, chain end or entry mark is refused (-1). */
    static uintptr_t merged[16], fresh[16];
    CHECK_EQ(vt_pystack_read(&pf, &trail), 3);
    CHECK_EQ(vt_pystack_splice_placed(native, 5, &pf, merged, 16, &trail), 6);
    CHECK(trail.placed);
    CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), 0);
    for (int i = 0; i < 4; i++) {
        set_unit(a, ka, i & 1 ? 9 : 3);                 /* the innermost moves */
        if (i >= 2) set_unit(c, kc, i & 1 ? 3 : 9);     /* and the outermost */
        CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), i >= 2 ? 2 : 1);
        CHECK_EQ(vt_pystack_merge(native, 5, fresh, 16), 6);
        CHECK(memcmp(merged, fresh, 6 * sizeof merged[0]) == 0);
        CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), 0);
    }
    PUT(uintptr_t, b, Y.fr_code, GET(uintptr_t, c, Y.fr_code));   /* other code at b's place */
    CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), 1);
    CHECK_EQ(vt_pystack_merge(native, 5, fresh, 16), 6);
    CHECK(memcmp(merged, fresh, 6 * sizeof merged[0]) == 0);
    CHECK_STR(name_of(merged[minor == 10 ? 3 : 2], &line), "fc c.py");
    PUT(uintptr_t, b, Y.fr_code, code_b);
    CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), 1);
    CHECK_STR(name_of(merged[minor == 10 ? 3 : 2], &line), "fb b.py");
    uintptr_t code_c = GET(uintptr_t, c, Y.fr_code);
    PUT(uintptr_t, c, Y.fr_code, GET(uintptr_t, a, Y.fr_code));   /* other code outermost: read again */
    CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), -1);
    PUT(uintptr_t, c, Y.fr_code, code_c);
    CHECK_EQ(vt_pystack_read(&pf, &trail), 3);
    CHECK_EQ(vt_pystack_splice_placed(native, 5, &pf, merged, 16, &trail), 6);
    CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), 0);
    if (minor >= 11) {
        void *m = minor == 11 ? b : a;
        int off = minor == 11 ? Y.fr_is_entry : Y.fr_owner;
        char was = GET(char, m, off);
        PUT(char, m, off, (char)(was ^ 1));
        CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), -1);
        PUT(char, m, off, was);
    }
    PUT(void *, top, top_off, b);                      /* a returned */
    CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), -1);
    PUT(void *, top, top_off, a);
    PUT(void *, fc.f, Y.fr_previous, &fd);             /* the chain goes on past its old end */
    CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), -1);
    PUT(void *, fc.f, Y.fr_previous, NULL);
    CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), 0);
    trail.placed = 0;                                  /* spliced without places (cut, borrowed) */
    CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), -1);
    /* Without the merged stack (other native frames): the frames read
     * patched, and spliced again with their places. */
    set_unit(a, ka, 3);
    CHECK_EQ(vt_pystack_patch(&trail, &pf, NULL), 1);
    CHECK_EQ(vt_pystack_splice_placed(native, 5, &pf, merged, 16, &trail), 6);
    CHECK(trail.placed);
    CHECK_EQ(vt_pystack_merge(native, 5, fresh, 16), 6);
    CHECK(memcmp(merged, fresh, 6 * sizeof merged[0]) == 0);
    CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), 0);
    set_unit(a, ka, 9);
    CHECK_EQ(vt_pystack_patch(&trail, &pf, merged), 1);   /* both, the frames read too */
    CHECK_EQ(vt_pystack_patch(&trail, &pf, NULL), 0);
    CHECK_EQ(vt_pystack_splice_placed(native, 5, &pf, fresh, 16, &trail), 6);
    CHECK(memcmp(merged, fresh, 6 * sizeof merged[0]) == 0);

    /* 300 frames, deeper than a read keeps: fa, 297 of fd, fb, fc (3.11:
     * fb entered from C; 3.12+: a shim before fc). The read keeps 223
     * innermost, a frame for the 45 left out and the 32 outermost; the
     * cut frames and the outer ones join the last group kept. */
    enum { DEEP = 300 };
    static struct code cd;
    static struct frame deep[DEEP], dshim;
    void *kd = make_code(&cd, "d.py", "fd", 40);
    void *df = make_frame(&deep[DEEP - 1], kc, 3, NULL);
    if (minor >= 12) df = make_shim(&dshim, df);
    df = make_frame(&deep[DEEP - 2], kb, 3, df);
    if (minor == 11) PUT(char, df, Y.fr_is_entry, 1);
    for (int i = DEEP - 3; i > 0; i--) df = make_frame(&deep[i], kd, 3, df);
    df = make_frame(&deep[0], ka, 3, df);
    PUT(void *, top, top_off, df);
    CHECK_EQ(vt_pystack_read(&pf, &trail), 256);
    CHECK_EQ(trail.n, -1);
    CHECK_STR(name_of(pf.frames[0], &line), "fa a.py");
    CHECK_STR(name_of(pf.frames[222], &line), "fd d.py");
    CHECK_STR(name_of(pf.frames[223], &line), "(45 frames left out) <vramtrace>");
    CHECK_STR(name_of(pf.frames[224], &line), "fd d.py");
    CHECK_STR(name_of(pf.frames[254], &line), "fb b.py");
    CHECK_STR(name_of(pf.frames[255], &line), "fc c.py");
    CHECK_EQ(pf.ngroups, minor == 10 ? 223 : 1);
    CHECK_EQ(pf.ends[pf.ngroups - 1], 255);
    /* Spliced, 259 frames (3.10) or 260 for 256: the read's cut frame
     * stands for the innermost Python frames beside it too, so that its
     * outer frames and the native ones outside them stay. */
    CHECK_EQ(vt_pystack_merge(native, 5, deep_out, 256), 256);
    int at = minor == 10 ? 223 : 220;
    CHECK_STR(name_of(deep_out[at], &line), minor == 10 ? "(48 frames left out) <vramtrace>"
                                                         : "(49 frames left out) <vramtrace>");
    CHECK_STR(name_of(deep_out[at - 1], &line), "fd d.py");
    CHECK_STR(name_of(deep_out[at + 1], &line), "fd d.py");
    int last = minor == 10 ? 255 : 252;
    CHECK_STR(name_of(deep_out[last - 1], &line), "fb b.py");
    CHECK_STR(name_of(deep_out[last], &line), "fc c.py");
    if (minor != 10) CHECK(deep_out[253] == 0x2000 && deep_out[255] == 0x3000);
    /* A torn chain that loops ends at VT_PY_WALK_MAX frames met, from the
     * innermost: all but the 223 innermost and the last 32 left out. */
    PUT(void *, deep[200].f, Y.fr_previous, deep[100].f);
    CHECK_EQ(vt_pystack_read(&pf, NULL), 256);
    CHECK_EQ(vt_pyframe_cut_count(pf.frames[223]), (unsigned)VT_PY_WALK_MAX - 256 + 1);
    CHECK_STR(name_of(pf.frames[255], &line), "fd d.py");
    PUT(void *, top, top_off, a);
    char what[32];
    snprintf(what, sizeof what, "pywalk 3.%d", minor);
    return check_report(what);
}
