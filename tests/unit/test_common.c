/* test_common.c -- common/: the capped warning, the lost-records count and
 * its place in the dump, the call-site rule and label; report/analysis.c's
 * findings once per failure. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/callsite.h"
#include "../../common/options.h"
#include "../../common/format.h"
#include "../../common/labels.h"
#include "../../common/oomtext.h"
#include "../../common/warn.h"
#include "../../tracker/options.h"
#include "../../report/analysis.h"
#include "../../report/dump.h"
#include "check.h"

/* What fn wrote on stderr. */
static char *stderr_of(void (*fn)(void)) {
    fflush(stderr);
    FILE *t = tmpfile();
    int saved = dup(2);
    dup2(fileno(t), 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long n = ftell(t);
    char *buf = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    rewind(t);
    if (n > 0 && fread(buf, 1, (size_t)n, t) != (size_t)n) buf[0] = '\0';
    fclose(t);
    return buf;
}

static void twelve_warnings(void) {
    for (int i = 0; i < VT_WARN_MAX + 2; i++) vt_warn("number %d", i);
    vt_warn_summary();
    vt_warn_summary();
}

static void test_warnings_are_capped_then_counted(void) {
    vt_warn_reset_child();
    char *out = stderr_of(twelve_warnings);
    CHECK_STR(out, "vramtrace: warning: number 0\nvramtrace: warning: number 1\nvramtrace: warning: number 2\n"
                   "vramtrace: warning: number 3\nvramtrace: warning: number 4\nvramtrace: warning: number 5\n"
                   "vramtrace: warning: number 6\nvramtrace: warning: number 7\nvramtrace: warning: number 8\n"
                   "vramtrace: warning: number 9\nvramtrace: 2 more warnings not shown\n");
    free(out);
}

static void few_warnings(void) {
    vt_warn("one");
    vt_warn_summary();
    vt_warn("two");
}

static void test_a_summary_with_nothing_held_back_keeps_warning(void) {
    vt_warn_reset_child();
    char *out = stderr_of(few_warnings);
    CHECK_STR(out, "vramtrace: warning: one\nvramtrace: warning: two\n");
    free(out);
}

static void a_forecast_among_warnings(void) {
    vt_warn_as("forecast", "at +%d MiB a minute", 8);
    for (int i = 0; i < VT_WARN_MAX - 1; i++) vt_warn("number %d", i);
    vt_warn_as("forecast", "held back");
    vt_warn_summary();
}

/* The forecast's line is one of the capped lines, with its own word. */
static void test_a_forecast_is_a_capped_line_of_its_kind(void) {
    vt_warn_reset_child();
    char *out = stderr_of(a_forecast_among_warnings);
    CHECK_STR(out, "vramtrace: forecast: at +8 MiB a minute\nvramtrace: warning: number 0\n"
                   "vramtrace: warning: number 1\nvramtrace: warning: number 2\nvramtrace: warning: number 3\n"
                   "vramtrace: warning: number 4\nvramtrace: warning: number 5\nvramtrace: warning: number 6\n"
                   "vramtrace: warning: number 7\nvramtrace: warning: number 8\nvramtrace: 1 more warning not shown\n");
    free(out);
}

/* The one order of holder rows: bytes, then label, then id. */
static void test_rank_order(void) {
    CHECK(vt_rank_order(2, "b", 9, 1, "a", 0) < 0);
    CHECK(vt_rank_order(1, NULL, 0, 2, NULL, 0) > 0);
    CHECK(vt_rank_order(2, "a", 9, 2, "b", 0) < 0);
    CHECK(vt_rank_order(2, "b", 0, 2, "a", 9) > 0);
    CHECK(vt_rank_order(2, "a", 1, 2, "a", 2) < 0);
    CHECK_EQ(vt_rank_order(2, "a", 1, 2, "a", 1), 0);
}

static void lose_two(void) {
    vt_records_lost("a record");
    vt_records_lost("the holder table");
}

static void test_records_lost_are_counted_warned_and_dumped(void) {
    vt_warn_reset_child();
    char *out = stderr_of(lose_two);
    CHECK_STR(out, "vramtrace: warning: out of memory: a record dropped\n"
                   "vramtrace: warning: out of memory: the holder table dropped\n");
    free(out);
    CHECK_EQ(vt_records_lost_count(), 2);
    struct vt_snapshot s;
    memset(&s, 0, sizeof s);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct vt_dump_meta m = {.reason = "exit", .pid = 1, .host = "h"};
    struct vt_analysis *an = vt_analyse(&s, NULL, 0);
    CHECK_EQ(vt_dump_write(f, &s, NULL, an, &m), 0);
    vt_analysis_free(an);
    fclose(f);
    CHECK(strstr(buf, ",\"unknown_frees\":0,\"missed\":0,\"records_lost\":2,\"oom_survived\":0},") != NULL);
    free(buf);
    vt_warn_reset_child();
    CHECK_EQ(vt_records_lost_count(), 0);
}

static void test_call_site_rule_and_label(void) {
    struct vt_frame st[3] = {
        {.address = 0x10, .function = "cuMemAlloc_v2", .module = "/usr/lib/libcuda.so.1", .offset = 0x10},
        {.address = 0x20, .function = "make", .module = "/opt/app/bin/train", .offset = 0x1f},
        {.function = "step", .python = 1},
    };
    CHECK_EQ(vt_site_index(st, 2), 1);
    CHECK_EQ(vt_site_index(st, 3), 2);
    CHECK_EQ(vt_site_index(st, 1), 0);
    CHECK_EQ(vt_site_index(st, 0), (uint64_t)-1);
    /* The static runtime's frames inside the program (seen on an H100:
     * CUDA 13's libcudart_static.a names its inner functions so), then its
     * cudaMalloc there: the call site is the program's function. */
    struct vt_frame stat[4] = {
        {.address = 0x30, .function = "libcudart_static_5382377d5c772c9d197c0cda9fd9742ee6ad893c",
         .module = "/tmp/t_reset", .offset = 0x3e36e},
        {.address = 0x40, .function = "cudaMalloc", .module = "/tmp/t_reset", .offset = 0x4d653},
        {.address = 0x50, .function = "after_leak(unsigned long)", .module = "/tmp/t_reset", .file = "t_reset.c",
         .line = 64},
        {.address = 0x60, .function = "main", .module = "/tmp/t_reset", .file = "t_reset.c", .line = 200},
    };
    CHECK_EQ(vt_site_index(stat, 4), 2);
    char buf[64];
    CHECK_STR(vt_frame_where(&st[1], buf, sizeof buf), "make (train+0x1f)");
    CHECK_STR(vt_frame_where(&st[2], buf, sizeof buf), "step (Python)");
    struct vt_frame at = {.function = "f", .file = "a/\xc3\xa9.c", .line = 7};
    CHECK_STR(vt_frame_where(&at, buf, sizeof buf), "f a/\xc3\xa9.c:7");
    CHECK_STR(vt_frame_where(&at, buf, 6), "f a/");   /* the cut never splits the é */
    struct vt_frame bare = {.address = 0xabc};
    CHECK_STR(vt_frame_where(&bare, buf, sizeof buf), "?? 0xabc");
    CHECK_STR(vt_site_name(&st[1], buf, sizeof buf), "make (train+0x1f)");
    CHECK_STR(vt_site_name(NULL, buf, sizeof buf), "(no stack)");
}

/* The user's line: library frames, the user frame, the frame it went
 * through, and VRAMTRACE_APP / VRAMTRACE_LIBRARY. */
static void test_user_line_rule(void) {
    CHECK_EQ(vt_frame_is_library("/usr/lib/python3.11/threading.py", "run", NULL), 1);
    CHECK_EQ(vt_frame_is_library("/root/.pyenv/versions/3.13.0/lib/python3.13/json/__init__.py", "f", NULL), 1);
    CHECK_EQ(vt_frame_is_library("/v/lib/python3.11/site-packages/torch/nn/modules/linear.py", "forward", NULL), 1);
    CHECK_EQ(vt_frame_is_library("/usr/lib/python3/dist-packages/numpy/core.py", "f", NULL), 1);
    CHECK_EQ(vt_frame_is_library("<frozen importlib._bootstrap>", "_load", NULL), 1);
    CHECK_EQ(vt_frame_is_library("/src/pytorch/torch/autograd/graph.py", "_engine_run_backward", NULL), 1);
    CHECK_EQ(vt_frame_is_library("train.py", "train_step", NULL), 0);
    CHECK_EQ(vt_frame_is_library("/home/me/lib/pythonic/train.py", "f", NULL), 0);
    CHECK_EQ(vt_frame_is_library("<string>", "f", NULL), 0);
    CHECK_EQ(vt_frame_is_library(NULL, "c10::cuda::malloc", "/v/torch/lib/libc10_cuda.so"), 1);
    CHECK_EQ(vt_frame_is_library(NULL, "at::empty", "/v/torch/lib/libtorch_cuda.so"), 1);
    CHECK_EQ(vt_frame_is_library(NULL, "cublasCreate_v2", "/v/nvidia/lib/libcublas.so.13"), 1);
    CHECK_EQ(vt_frame_is_library(NULL, "x", "/v/nvidia/lib/libcudnn_ops.so.9"), 1);
    CHECK_EQ(vt_frame_is_library(NULL, "x", "/v/nvidia/lib/libnccl.so.2"), 1);
    CHECK_EQ(vt_frame_is_library(NULL, "cudaMalloc", "/opt/app/bin/train"), 1);   /* a static runtime */
    CHECK_EQ(vt_frame_is_library("/opt/app/main.c", "main", "/opt/app/bin/train"), 0);

    struct vt_frame py[] = {
        {.function = "cuMemAlloc_v2", .module = "/usr/lib/libcuda.so.1"},
        {.function = "c10::cuda::malloc", .module = "/v/torch/lib/libc10_cuda.so", .offset = 0x40},
        {.function = "_PyObject_Call", .module = "/usr/lib/libpython3.11.so.1.0"},
        {.function = "Linear.forward", .file = "/v/lib/python3.11/site-packages/torch/nn/modules/linear.py",
         .line = 125, .python = 1},
        {.function = "Module._call_impl", .file = "/v/lib/python3.11/site-packages/torch/nn/modules/module.py",
         .line = 1794, .python = 1},
        {.function = "train_step", .file = "train.py", .line = 47, .python = 1},
        {.function = "<module>", .file = "train.py", .line = 60, .python = 1},
    };
    char buf[256];
    int site = vt_site_index(py, 7);
    CHECK_EQ(site, 5);
    CHECK_EQ(vt_site_through(py, 7, site), 3);
    CHECK_STR(vt_site_label_of(&py[site], &py[3], buf, sizeof buf),
              "train_step train.py:47 -> Linear.forward torch/nn/modules/linear.py:125");
    CHECK_STR(vt_site_label_of(&py[site], NULL, buf, sizeof buf), "train_step train.py:47");
    CHECK_STR(vt_site_label_of(NULL, &py[3], buf, sizeof buf), "(no stack)");
    /* The script calls into PyTorch's C++ directly: the native library frame. */
    CHECK_EQ(vt_site_index(py + 5, 2), 0);
    struct vt_frame direct[] = {py[0], py[1], py[2], py[5], py[6]};
    CHECK_EQ(vt_site_index(direct, 5), 3);
    CHECK_EQ(vt_site_through(direct, 5, 3), 1);
    /* Through PyTorch's C++: the entry point the line called (the
     * outermost library frame inside it, the interpreter's frames aside),
     * not the allocator every call shares. */
    struct vt_frame entry = {.function = "torch::autograd::THPVariable_randn", .module = "/v/torch/lib/libtorch_python.so"};
    struct vt_frame chain[] = {py[0], py[1], {.function = "at::empty", .module = "/v/torch/lib/libtorch_cuda.so"},
                               entry, py[2], py[5], py[6]};
    CHECK_EQ(vt_site_index(chain, 7), 5);
    CHECK_EQ(vt_site_through(chain, 7, 5), 3);
    vt_callsite_configure("train.py", NULL);   /* the interpreter is library now, and still never named */
    CHECK_EQ(vt_site_through(chain, 7, 5), 3);
    vt_callsite_configure(NULL, NULL);
    /* Native frames alone (--python 0): the interpreter's frames are
     * never the call site; the library function it called is. */
    struct vt_frame bare[] = {chain[0], chain[1], chain[2], entry, py[2],
                              {.function = "Py_BytesMain", .module = "/usr/bin/python3.11"},
                              {.function = "__libc_start_main", .module = "/lib/x86_64-linux-gnu/libc.so.6"}};
    CHECK_EQ(vt_site_index(bare, 7), 3);
    CHECK_EQ(vt_site_through(bare, 7, 3), -1);
    /* Recorded inside vramtrace's own Python (the companion, at PyTorch's
     * own refusal): its frames are passed over for what the line called. */
    struct vt_frame own[] = {{.function = "_submit", .file = "/v/vramtrace_torch/__init__.py", .line = 61, .python = 1},
                             chain[0], chain[1], chain[2], entry, py[5], py[6]};
    CHECK_EQ(vt_site_index(own, 7), 5);
    CHECK_EQ(vt_site_through(own, 7, 5), 4);
    /* vramtrace's own files by name: a user's folder of the same name is the user's. */
    CHECK_EQ(vt_frame_is_library("/v/vramtrace_torch/__init__.py", "_submit", NULL), 1);
    CHECK_EQ(vt_frame_is_library("/opt/vt/python/pytest_vramtrace/plugin.py", "f", NULL), 1);
    CHECK_EQ(vt_frame_is_library("/home/me/proj/vramtrace_torch/mylib.py", "helper", NULL), 0);
    CHECK_EQ(vt_frame_is_library("/home/me/proj/pytest_vramtrace/conftest.py", "f", NULL), 0);
    /* No user frame: the innermost frame, as before, and nothing beside it. */
    CHECK_EQ(vt_site_index(py, 5), 3);
    CHECK_EQ(vt_site_through(py, 5, 3), -1);
    /* A C program: the same labels as before. */
    struct vt_frame c[] = {
        {.function = "cudaMalloc", .module = "/opt/app/libcudart.so.13"},
        {.function = "main", .file = "main.c", .line = 9, .module = "/opt/app/bin/train"},
    };
    CHECK_EQ(vt_site_index(c, 2), 1);
    CHECK_EQ(vt_site_through(c, 2, 1), -1);
    struct vt_frame cb[] = {
        {.function = "cuMemAlloc_v2", .module = "/usr/lib/libcuda.so.1"},
        {.function = "cublasCreate_v2", .module = "/v/libcublas.so.13", .offset = 0x99},
        {.function = "main", .file = "main.c", .line = 9, .module = "/opt/app/bin/train"},
    };
    CHECK_EQ(vt_site_index(cb, 3), 2);
    CHECK_EQ(vt_site_through(cb, 3, 2), 1);
    CHECK_STR(vt_site_label_of(&cb[2], &cb[1], buf, sizeof buf), "main main.c:9 -> cublasCreate_v2 (libcublas.so.13+0x99)");
    struct vt_frame cxx = {.function = "c10::(anonymous namespace)::Alloc::malloc(std::pair<int, int> const&, bool) const",
                           .module = "/v/libc10_cuda.so", .offset = 0x10};
    CHECK_STR(vt_site_label_of(&cb[2], &cxx, buf, sizeof buf),
              "main main.c:9 -> c10::(anonymous namespace)::Alloc::malloc (libc10_cuda.so+0x10)");
    /* An inlined function's DWARF name has no parameter list: kept whole,
     * not cut at a '(' inside its template arguments. */
    static const struct {
        const char *name, *label;
    } names[] = {
        {"grab_with<setup(int)::<lambda(int)> >", "grab_with<setup(int)::<lambda(int)> >"},
        {"grab_with<setup(int)::<lambda(int)> >(unsigned long, setup(int)::<lambda(int)>)",
         "grab_with<setup(int)::<lambda(int)> >"},
        {"operator()", "operator()"},
        {"Pool::operator()(int) const &&", "Pool::operator()"},
        {"std::function<void (int)>::operator()(int) const", "std::function<void (int)>::operator()"},
        {"f() noexcept", "f"},
        {"(anonymous)", "(anonymous)"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        struct vt_frame t = {.function = names[i].name, .module = "/v/libx.so", .offset = 0x10};
        char want[512];
        snprintf(want, sizeof want, "main main.c:9 -> %s (libx.so+0x10)", names[i].label);
        CHECK_STR(vt_site_label_of(&cb[2], &t, buf, sizeof buf), want);
    }

    /* VRAMTRACE_APP: only what it matches is the user's. */
    vt_callsite_configure("*/torch/nn/modules/module.py", NULL);
    CHECK_EQ(vt_site_index(py, 7), 4);
    CHECK_EQ(vt_site_through(py, 7, 4), 3);
    CHECK_EQ(vt_frame_is_library("train.py", "train_step", NULL), 1);
    vt_callsite_configure("/elsewhere:nothing.py", NULL);
    CHECK_EQ(vt_site_index(py, 7), 3);    /* no user frame: the innermost */
    CHECK_EQ(vt_site_through(py, 7, 3), -1);
    vt_callsite_configure("/home/me/proj/", NULL);   /* a folder */
    CHECK_EQ(vt_frame_is_library("/home/me/proj/src/a.py", "f", NULL), 0);
    CHECK_EQ(vt_frame_is_library("/home/me/project/a.py", "f", NULL), 1);
    vt_callsite_configure("train.py", NULL);         /* a file's name */
    CHECK_EQ(vt_site_index(py, 7), 5);
    /* VRAMTRACE_LIBRARY: more library frames. */
    vt_callsite_configure(NULL, "train.py:/opt/*");
    CHECK_EQ(vt_site_index(py, 7), 3);
    CHECK_EQ(vt_frame_is_library("/opt/app/main.c", "main", "/opt/app/bin/train"), 1);
    vt_callsite_configure(NULL, NULL);
    CHECK_EQ(vt_site_index(py, 7), 5);
}

/* A caching allocator's retry: two failures of the same request with a
 * free between them. */
static int has_retry(const struct vt_oom_findings *f) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->f[i].id, "allocator_retry") == 0) return 1;
    return 0;
}

static void test_findings_are_worked_out_once_per_oom(void) {
    vt_analysis_reset_child();
    struct vt_oom ooms[2];
    memset(ooms, 0, sizeof ooms);
    for (int i = 0; i < 2; i++) {
        ooms[i].number = (uint64_t)i + 1;
        ooms[i].api = "cudaMalloc";
        ooms[i].requested = 1 << 20;
        ooms[i].time_ns = ooms[i].ticks = 1000 + 1000 * (uint64_t)i;
    }
    struct vt_event ev = {.time_ns = 1500, .address = 0x10, .bytes = 4096, .type = VT_EV_FREE,
                          .kind = VT_KIND_DEVICE};
    struct vt_snapshot s;
    memset(&s, 0, sizeof s);
    s.ooms = ooms;
    s.nooms = 2;
    s.events = &ev;
    s.nevents = 1;
    s.now_ns = 3000;
    struct vt_analysis *a = vt_analyse(&s, NULL, 0);
    CHECK_EQ(a->nfindings, 2);
    CHECK_EQ(has_retry(&a->findings[0]), 0);
    CHECK_EQ(has_retry(&a->findings[1]), 1);
    CHECK(a->latest == &a->findings[1]);
    vt_analysis_free(a);
    /* The free has left the history since: the findings stay those of
     * the failure, not worked out again. */
    s.nevents = 0;
    a = vt_analyse(&s, NULL, 0);
    CHECK_EQ(has_retry(&a->findings[1]), 1);
    vt_analysis_free(a);
    /* A later snapshot converts the same time stamp at the rate measured
     * over a longer run: its time in ns moves, its ticks do not. Still the
     * failure's findings (worked out again, with the times moved, they
     * disagreed with the post-mortem's in a rate's last digit). */
    ooms[1].time_ns = 2003;
    a = vt_analyse(&s, NULL, 0);
    CHECK_EQ(has_retry(&a->findings[1]), 1);
    vt_analysis_free(a);
    /* Another failure at that index (a forked child's first) is its own. */
    ooms[1].time_ns = ooms[1].ticks = 2500;
    a = vt_analyse(&s, NULL, 0);
    CHECK_EQ(has_retry(&a->findings[1]), 0);
    vt_analysis_free(a);
    vt_analysis_reset_child();
}

/* Sizes are exact or refused: nan, inf, hex, exponents, signs and
 * overflow are not sizes (nan once reached an undefined cast). */
static void test_sizes_are_exact_or_refused(void) {
    static const struct { const char *s; int ok; uint64_t v; } cases[] = {
        {"0", 1, 0}, {"4096", 1, 4096}, {"512M", 1, 512ull << 20}, {"24G", 1, 24ull << 30},
        {"24GiB", 1, 24ull << 30}, {"1.5G", 1, 3ull << 29}, {"2t", 1, 2ull << 40}, {"100b", 1, 100},
        {"18446744073709551615", 1, UINT64_MAX}, {"16777215T", 1, 16777215ull << 40},
        {"9007199254740993", 1, 9007199254740993ull}, /* 2^53 + 1: a double would round it */
        {"18446744073709551616", 0, 0}, {"16777216T", 0, 0}, {"nan", 0, 0}, {"NaN", 0, 0},
        {"inf", 0, 0}, {"-1", 0, 0}, {"+5", 0, 0}, {"0x10", 0, 0}, {"1e3", 0, 0}, {"1.5", 0, 0},
        {"1.", 0, 0}, {".5G", 0, 0}, {"5GG", 0, 0}, {"", 0, 0}, {"G", 0, 0},
        /* The unit in any case, a space or tab before it (a mark's "2 GiB"
         * was refused by VRAMTRACE_LIMIT, 2GIB too: a run with no budget). */
        {"2GIB", 1, 2ull << 30}, {"192KIB", 1, 192ull << 10}, {"2 GiB", 1, 2ull << 30}, {"5 G", 1, 5ull << 30},
        {"1.5\tmB", 1, 3ull << 19}, {"7 b", 1, 7}, {"5 ", 0, 0}, {"5 G ", 0, 0}, {" 5G", 0, 0}, {"5 i", 0, 0},
        {"5Gi B", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t v = 12345;
        int ok = vt_parse_size(cases[i].s, &v) == 0;
        CHECK_EQ(ok, cases[i].ok);
        if (ok != cases[i].ok) fprintf(stderr, "  size '%s'\n", cases[i].s);
        if (ok && cases[i].ok) CHECK_EQ(v, cases[i].v);
    }
}

/* The lines both sides print: a finding, a growing site, a process. */
static void upper(FILE *f, const char *s) {
    for (; *s; s++) fputc(*s >= 'a' && *s <= 'z' ? *s - 32 : *s, f);
}

static void test_shared_lines(void) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    vt_put_finding(f, "vramtrace: ", 2, "a leak", "free it", NULL);
    vt_put_finding(f, "", 3, "a leak", "free it", upper);
    vt_put_growth(f, "vramtrace: ", "step", 1024, 3 << 20, "over 2 allocations");
    vt_put_growth(f, "", "step", 10, 10, "r");
    fclose(f);
    CHECK_STR(buf, "vramtrace:   2. a leak\nvramtrace:      next: free it\n"
                   "  3. A LEAK\n     next: FREE IT\n"
                   "vramtrace:   step: 1.00 KiB -> 3.00 MiB, over 2 allocations\n"
                   "  step: 10 B -> 10 B, r\n");
    free(buf);
    char p[128];
    CHECK_STR(vt_fmt_proc(1, 42, "python", 1, 2048, p, sizeof p), " pid 42 (python) 2.00 KiB");
    CHECK_STR(vt_fmt_proc(0, 43, "", 0, 0, p, sizeof p), ", pid 43 ?");
    CHECK_STR(vt_fmt_proc(0, 44, NULL, 1, 5, p, sizeof p), ", pid 44 5 B");
}

/* Where a failed request was for: host memory by its label, never by its
 * device (-1); device memory by its ordinal. */
static void test_a_failure_is_where_its_memory_is(void) {
    char w[96];
    CHECK_STR(vt_oom_where("host", -1, w, sizeof w), " (pinned host memory)");
    CHECK_STR(vt_oom_where("host_registered", -1, w, sizeof w), " (host memory pinned by cuMemHostRegister)");
    CHECK_STR(vt_oom_where("device", 1, w, sizeof w), " on device 1");
    CHECK_STR(vt_oom_where(NULL, 0, w, sizeof w), " on device 0");
}

/* A share printed never reads "100%" for less than all of it, nor "0%"
 * for more than none. */
static void test_percent_never_rounds_to_all_or_none(void) {
    char t[16];
#define PCT0(a, b) vt_fmt_pct((a), (b), 0, t, sizeof t)
#define PCT1(a, b) vt_fmt_pct((a), (b), 1, t, sizeof t)
    CHECK_STR(PCT0(995, 1000), "99%");
    CHECK_STR(PCT0(999999, 1000000), "99%");
    CHECK_STR(PCT0(1000, 1000), "100%");
    CHECK_STR(PCT0(2000, 1000), "200%");
    CHECK_STR(PCT0(994, 1000), "99%");
    CHECK_STR(PCT0(985, 1000), "98%");   /* 98.5 rounds to even */
    CHECK_STR(PCT0(1, 1000), "<1%");
    CHECK_STR(PCT0(5, 1000), "<1%");
    CHECK_STR(PCT0(10, 1000), "1%");
    CHECK_STR(PCT0(0, 1000), "0%");
    CHECK_STR(PCT0(5, 0), "0%");
    CHECK_STR(PCT0(500, 1000), "50%");
    CHECK_STR(PCT1(9996, 10000), "99.9%");
    CHECK_STR(PCT1(10000, 10000), "100.0%");
    CHECK_STR(PCT1(4, 10000), "<0.1%");
    CHECK_STR(PCT1(0, 10000), "0.0%");
    CHECK_STR(PCT1(1234, 10000), "12.3%");
#undef PCT0
#undef PCT1
}

/* Equal labels, one group; groups numbered in the order first seen. */
static void test_label_groups(void) {
    struct vt_labels *l = vt_labels_new();
    int added = -1;
    CHECK_EQ(vt_label_group(l, "train step.py:3", &added), 0);
    CHECK_EQ(added, 1);
    CHECK_EQ(vt_label_group(l, "(no stack)", &added), 1);
    CHECK_EQ(vt_label_group(l, "train step.py:3", &added), 0);
    CHECK_EQ(added, 0);
    CHECK_EQ(vt_label_group(l, "train step.py:30", NULL), 2);
    for (int i = 0; i < 200; i++) {
        char b[16];
        snprintf(b, sizeof b, "s%d", i);
        vt_label_group(l, b, NULL);
    }
    CHECK_EQ(vt_labels_count(l), 203);
    CHECK_STR(vt_label_of(l, 1), "(no stack)");
    CHECK_STR(vt_label_of(l, 202), "s199");
    CHECK(vt_label_of(l, 203) == NULL);
    vt_labels_free(l);
}

/* The options' warnings, held until the first GPU use, are capped warnings
 * too: printed while the cap allows, counted after. */
static void bad_options_after(int earlier) {
    for (int i = 0; i < earlier; i++) vt_warn("earlier %d", i);
    setenv("VRAMTRACE_DEPTH", "banana", 1);
    setenv("VRAMTRACE_TOP", "0", 1);
    vt_options_load(NULL);
    unsetenv("VRAMTRACE_DEPTH");
    unsetenv("VRAMTRACE_TOP");
    vt_options_flush_warnings();
    vt_options_flush_warnings(); /* once */
    vt_warn_summary();
}
static void bad_options(void) { bad_options_after(0); }
static void bad_options_late(void) { bad_options_after(VT_WARN_MAX - 1); }

static void test_option_warnings_are_capped(void) {
    vt_warn_reset_child();
    char *out = stderr_of(bad_options);
    CHECK_STR(out, "vramtrace: warning: VRAMTRACE_DEPTH=banana is not a whole number from 1 to 256; keeping the "
                   "default\nvramtrace: warning: VRAMTRACE_TOP=0 is not a whole number from 1 to 1000; keeping "
                   "the default\n");
    free(out);
    vt_warn_reset_child();
    out = stderr_of(bad_options_late);
    const char *last = strstr(out, "earlier 8\n");
    CHECK(last != NULL);
    if (last)
        CHECK_STR(last, "earlier 8\nvramtrace: warning: VRAMTRACE_DEPTH=banana is not a whole number from 1 to "
                        "256; keeping the default\nvramtrace: 1 more warning not shown\n");
    free(out);
    vt_warn_reset_child();
}

int main(void) {
    test_warnings_are_capped_then_counted();
    test_a_summary_with_nothing_held_back_keeps_warning();
    test_a_forecast_is_a_capped_line_of_its_kind();
    test_rank_order();
    test_records_lost_are_counted_warned_and_dumped();
    test_call_site_rule_and_label();
    test_user_line_rule();
    test_findings_are_worked_out_once_per_oom();
    test_sizes_are_exact_or_refused();
    test_shared_lines();
    test_a_failure_is_where_its_memory_is();
    test_percent_never_rounds_to_all_or_none();
    test_label_groups();
    test_option_warnings_are_capped();
    return check_report("unit_common");
}
