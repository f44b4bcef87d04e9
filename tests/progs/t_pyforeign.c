/* t_pyforeign.c -- the reader of another thread's Python frames
 * (tracker/pyborrow.c) on fake CPython 3.11 objects laid out as
 * tracker/pystack.c's table says: good chains read, hostile ones (pointers
 * into unmapped memory, a freed code object) give fewer or no frames and
 * never a fault; and the borrowing rule (exactly one thread waiting in a
 * torch/autograd/ file without the GIL). Built with ASan+UBSan. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../tracker/pystack.h"
#include "../unit/check.h"

/* 3.11 offsets (tracker/pystack.c's py311). */
enum { TS_NEXT = 8, TS_CFRAME = 56, CF_CURRENT = 8, FR_CODE = 32, FR_PREVIOUS = 48, FR_INSTR = 56,
       CO_FILENAME = 112, CO_QUALNAME = 128, CO_NAME = 120, CO_FIRSTLINE = 72, CO_LINETABLE = 136,
       CO_CODE = 184, OB_TYPE = 8, GIL = 360, INTERP_THREADS = 16 };

/* PyCode_Type as far as the library checks it: tp_name "code" (offset
 * 24) and a tp_dealloc (48), which it wraps to count code objects freed. */
static void code_dealloc(void *o) { (void)o; }
static _Alignas(16) char fake_code_type[64];
static void fake_code_type_make(void) {
    *(const char **)(fake_code_type + 24) = "code";
    *(void (**)(void *))(fake_code_type + 48) = code_dealloc;
}
static unsigned long version = 0x030b07f0;
static char runtime[1024];
static void *tstate_self;
static _Alignas(8) char interp[64];

static void *this_tstate(void) { return tstate_self; }
static int initialized(void) { return 1; }
static void *interp_main(void) { return interp; }

static void *lookup(const char *name) {
    if (!strcmp(name, "PyGILState_GetThisThreadState")) return (void *)this_tstate;
    if (!strcmp(name, "PyCode_Type")) return fake_code_type;
    if (!strcmp(name, "Py_IsInitialized")) return (void *)initialized;
    if (!strcmp(name, "Py_Version")) return &version;
    if (!strcmp(name, "_PyRuntime")) return runtime;
    if (!strcmp(name, "PyInterpreterState_Main")) return (void *)interp_main;
    return NULL;
}

#define PUT(T, base, off, v) (*(T *)((char *)(base) + (off)) = (v))

/* A compact ASCII str object (3.11: data after a 48-byte header). */
static void *make_str(char *mem, const char *s) {
    memset(mem, 0, 48);
    PUT(int64_t, mem, 16, (int64_t)strlen(s));
    PUT(uint32_t, mem, 32, (1u << 2) | (1u << 5) | (1u << 6));
    strcpy(mem + 48, s);
    return mem;
}

/* A code object whose 8 first code units are at line `line`. */
struct code { _Alignas(16) char obj[256], file[128], name[128], table[64]; };
static void *make_code(struct code *c, const char *file, const char *name, int line) {
    memset(c, 0, sizeof *c);
    PUT(void *, c->obj, OB_TYPE, fake_code_type);
    PUT(void *, c->obj, CO_FILENAME, make_str(c->file, file));
    PUT(void *, c->obj, CO_NAME, make_str(c->name, name));
    PUT(void *, c->obj, CO_QUALNAME, c->name);
    PUT(int, c->obj, CO_FIRSTLINE, line);
    PUT(int64_t, c->table, 16, 2);           /* a bytes object of 2 bytes: */
    c->table[32] = (char)(0x80 | (13 << 3) | 7);  /* 8 units, no column, */
    c->table[33] = 0;                        /* line delta 0 */
    PUT(void *, c->obj, CO_LINETABLE, c->table);
    return c->obj;
}

struct frame { _Alignas(16) char f[128]; };
static void *make_frame(struct frame *f, void *code, void *previous) {
    memset(f, 0, sizeof *f);
    PUT(void *, f->f, FR_CODE, code);
    PUT(void *, f->f, FR_PREVIOUS, previous);
    PUT(uintptr_t, f->f, FR_INSTR, (uintptr_t)code + CO_CODE + 4);
    return f->f;
}

struct tstate { _Alignas(16) char ts[128]; _Alignas(16) char cframe[32]; };
static void *make_tstate(struct tstate *t, void *frame, void *next) {
    memset(t, 0, sizeof *t);
    PUT(void *, t->cframe, CF_CURRENT, frame);
    PUT(void *, t->ts, TS_CFRAME, t->cframe);
    PUT(void *, t->ts, TS_NEXT, next);
    return t->ts;
}

static const char *name_of(uintptr_t v, int *line) {
    const char *fn, *file;
    if (vt_pyframe_resolve(v, &fn, &file, line) != 0) return "(unresolved)";
    static char buf[256];
    snprintf(buf, sizeof buf, "%s %s", fn, file);
    return buf;
}

int main(void) {
    fake_code_type_make();
    vt_pystack_init(lookup, 1);
    CHECK_EQ(vt_pystack_version(), version);
    long page = sysconf(_SC_PAGESIZE);
    char *gone = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(gone, (size_t)page);   /* an address that is no longer mapped */

    static struct code wait, script, freed;
    static struct frame f_wait, f_script, f_bad;
    static struct tstate a, b, c, hostile;
    void *cw = make_code(&wait, "/x/torch/autograd/graph.py", "_engine_run_backward", 1072);
    void *cs = make_code(&script, "train.py", "train_step", 47);
    void *fs = make_frame(&f_script, cs, NULL);
    void *fw = make_frame(&f_wait, cw, fs);
    uintptr_t out[16];
    int line = 0;

    /* A good chain: both frames, innermost first, marked borrowed. */
    void *ta = make_tstate(&a, fw, NULL);
    CHECK_EQ(vt_pystack_foreign(ta, out, 16), 2);
    CHECK_STR(name_of(out[0], &line), "_engine_run_backward /x/torch/autograd/graph.py");
    CHECK_EQ(line, 1072);
    CHECK_STR(name_of(out[1], &line), "train_step train.py");
    CHECK_EQ(line, 47);
    CHECK(vt_pyframe_borrowed(out[0]) && vt_pyframe_borrowed(out[1]));
    CHECK_EQ(vt_pystack_foreign(ta, out, 1), 1);   /* max is kept */

    /* Hostile pointers: no frames or fewer, never a fault. */
    CHECK_EQ(vt_pystack_foreign(make_tstate(&hostile, gone, NULL), out, 16), 0);   /* frame unmapped */
    CHECK_EQ(vt_pystack_foreign(make_tstate(&hostile, gone + 7, NULL), out, 16), 0); /* and misaligned */
    PUT(void *, hostile.ts, TS_CFRAME, gone);                                      /* cframe unmapped */
    CHECK_EQ(vt_pystack_foreign(hostile.ts, out, 16), 0);
    CHECK_EQ(vt_pystack_foreign(gone, out, 16), 0);                                /* tstate unmapped */
    CHECK_EQ(vt_pystack_foreign(make_tstate(&hostile, make_frame(&f_bad, cw, gone), NULL), out, 16), 1);
    CHECK_EQ(vt_pystack_foreign(make_tstate(&hostile, make_frame(&f_bad, gone, fs), NULL), out, 16), 0);
    make_code(&freed, "freed.py", "gone", 5);
    PUT(void *, freed.obj, OB_TYPE, NULL);   /* a freed code object: not PyCode_Type */
    CHECK_EQ(vt_pystack_foreign(make_tstate(&hostile, make_frame(&f_bad, freed.obj, fs), NULL), out, 16), 0);
    make_code(&freed, "freed2.py", "gone2", 5);
    PUT(void *, freed.obj, CO_FILENAME, gone);   /* its filename unmapped: named "?" */
    PUT(void *, freed.obj, CO_LINETABLE, gone);  /* its line table unmapped: line 0 */
    CHECK_EQ(vt_pystack_foreign(make_tstate(&hostile, make_frame(&f_bad, freed.obj, NULL), NULL), out, 16), 1);
    CHECK_STR(name_of(out[0], &line), "gone2 ?");
    CHECK_EQ(line, 0);
    /* A cycle ends at the walk's bound. */
    static struct frame loop;
    void *fl = make_frame(&loop, cs, NULL);
    PUT(void *, loop.f, FR_PREVIOUS, fl);
    CHECK_EQ(vt_pystack_foreign(make_tstate(&hostile, fl, NULL), out, 16), 16);

    /* The rule: exactly one thread waiting in torch/autograd/ without the
     * GIL lends its frames. b runs the script elsewhere. */
    void *tb = make_tstate(&b, fs, NULL);
    PUT(void *, a.ts, TS_NEXT, tb);
    PUT(void *, interp, INTERP_THREADS, ta);
    uintptr_t native[3] = {0x1000, 0x2000, 0x3000}, merged[16];
    CHECK_EQ(vt_pystack_merge(native, 3, merged, 16), 5);
    CHECK(merged[0] == 0x1000 && merged[1] == 0x2000 && merged[2] == 0x3000);   /* native first */
    CHECK_STR(name_of(merged[3], &line), "_engine_run_backward /x/torch/autograd/graph.py");
    CHECK_STR(name_of(merged[4], &line), "train_step train.py");
    CHECK(vt_pyframe_borrowed(merged[3]));
    /* The lender holds the GIL (locked, last holder): nothing. */
    PUT(uintptr_t, runtime, GIL + 8, (uintptr_t)ta);
    PUT(int, runtime, GIL + 16, 1);
    CHECK_EQ(vt_pystack_merge(native, 3, merged, 16), 3);
    PUT(uintptr_t, runtime, GIL + 8, (uintptr_t)tb);   /* another holds it */
    CHECK_EQ(vt_pystack_merge(native, 3, merged, 16), 5);
    PUT(int, runtime, GIL + 16, 0);
    /* Two threads wait there: nothing. */
    void *tc = make_tstate(&c, fw, NULL);
    PUT(void *, b.ts, TS_NEXT, tc);
    CHECK_EQ(vt_pystack_merge(native, 3, merged, 16), 3);
    /* The list runs into unmapped memory after the lender: it still lends. */
    PUT(void *, b.ts, TS_NEXT, gone);
    CHECK_EQ(vt_pystack_merge(native, 3, merged, 16), 5);
    /* The calling thread itself is never its own lender. */
    tstate_self = ta;
    PUT(void *, a.cframe, CF_CURRENT, NULL);   /* ...and it has no frames now */
    CHECK_EQ(vt_pystack_merge(native, 3, merged, 16), 3);
    /* No thread waits there: nothing. */
    tstate_self = NULL;
    PUT(void *, interp, INTERP_THREADS, tb);
    CHECK_EQ(vt_pystack_merge(native, 3, merged, 16), 3);
    return check_report("pyforeign");
}
