# vramtrace -- GPU out-of-memory post-mortems and GPU leak checks.
#
#   make          build/libvramtrace.so and build/vramtrace
#   make demo     an out-of-memory post-mortem (simulated GPU, or the real one)
#   make test     every test: unit (plain, ASan+UBSan, TSan) and integration
#   make deps     install missing Debian build packages (as root); with
#                 VRAMTRACE_TORCH=1 or CI set, also `make torch-env`
#   make torch-env  build/torch-venv: PyTorch for the tests on the simulated GPU
#   make install  PREFIX=/usr/local

CUDA_HOME ?= /usr/local/cuda
PREFIX    ?= /usr/local
CC        ?= cc
PYTHON    ?= python3
VERSION   := 0.1.0

B := build
WARN    := -Wall -Wextra -Wno-unused-parameter
CFLAGS  ?= -O2 -g
BASE    := -std=gnu11 $(WARN) -fno-omit-frame-pointer -I$(CUDA_HOME)/include \
           -DVT_VERSION='"$(VERSION)"'
# The CLI looks for the library in the install prefix last: the prefix is
# compiled in, and build/prefix.stamp (rewritten only when PREFIX changes)
# makes `make install PREFIX=...` rebuild the CLI for a new prefix.
LIBDIR_DEF := -DVT_LIBDIR='"$(PREFIX)/lib"'
# The library's calls to its own exports bind inside it (exports.c rewrites
# their symbols). libunwind and libdw are loaded at their first use
# (tracker/lazy_unwind.c, report/lazy_dw.c), not linked.
LIBS    := -ldl -lpthread -Wl,-Bsymbolic-functions

# common/ is what the library and the CLI both compile: the call-site rule,
# the byte and JSON formatting, the settings table, the capped warning,
# the suppressions file's reader.
COMMON_C := common/callsite.c common/format.c common/labels.c common/oomtext.c common/summary.c common/options.c common/warn.c common/live.c common/thread.c common/torchfmt.c common/fdkeep.c common/display.c common/pipetext.c common/suppfile.c common/procself.c common/rankvars.c common/loadername.c common/dlagain.c
LIB_C   := interpose/resolve.c interpose/hooklist.c interpose/dynsyms.c interpose/canload.c interpose/deepbind.c interpose/infront.c interpose/exports.c interpose/hook.c interpose/driver.c \
           interpose/runtime.c interpose/init.c interpose/selfkill.c interpose/mainexit.c interpose/ondemand.c interpose/onterm.c interpose/sigview.c interpose/nvml.c interpose/api.c \
           interpose/pools.c interpose/graphs.c interpose/vmm.c interpose/ipc.c interpose/unload.c \
           tracker/tracker.c tracker/slot.c tracker/tblock.c tracker/recslab.c tracker/slab.c tracker/lockprobe.c tracker/table.c tracker/cow.c tracker/log.c tracker/account.c tracker/intern.c tracker/lsanroot.c tracker/history.c tracker/handlerun.c tracker/steps.c tracker/mappings.c tracker/clock.c tracker/snapshot.c tracker/snapshot_sort.c tracker/live_spill.c tracker/live_read.c tracker/view.c tracker/released.c tracker/departed.c \
           tracker/stack.c tracker/walker.c tracker/rules.c tracker/cfi.c tracker/options.c tracker/pystack.c tracker/pystack_id.c tracker/pyline.c tracker/pyborrow.c tracker/mark.c \
           tracker/lazy_unwind.c $(COMMON_C) report/lazy_dw.c \
           report/symbolize.c report/dwflfiles.c report/debuglink.c report/inlines.c report/holders.c report/dump.c report/dump_tables.c report/dump_events.c report/postmortem.c report/place.c report/output.c report/outfile.c report/ownstream.c report/writing.c report/dump_keep.c report/report_keep.c report/errbuf.c \
           report/leaks.c report/match.c report/growth.c report/owntime.c report/findings.c report/traits.c report/analysis.c report/survived.c report/since.c report/live.c report/live_torch.c report/forecast.c \
           report/torch.c report/torch_dump.c report/torch_print.c report/torch_growth.c report/torch_kept.c
LIB_S   := interpose/dlsym_x86_64.S interpose/trampoline_x86_64.S
CLI_C   := cli/cli.c cli/options_md.c cli/cmd_run.c cli/run_pipe.c cli/run_sanitizer.c cli/cmd_report.c cli/report_out.c cli/cmd_diff.c cli/reporters.c cli/model.c cli/demangle.c \
           cli/fmt_text.c cli/fmt_json.c cli/fmt_folded.c cli/fmt_html.c cli/fmt_torch.c cli/torch_ooms.c cli/refset.c cli/sha256.c \
           cli/html/data.c cli/html/pack.c cli/html/torch.c cli/html/bydevice.c cli/html/assets.S cli/livefile.c cli/cmd_top.c cli/cmd_metrics.c cli/metrics_serve.c cli/fleet.c cli/runs.c cli/forecast_text.c \
           cli/model_torch.c cli/model_u64.c cli/model_v2.c cli/model_scan.c cli/model_file.c cli/model_label.c cli/model_tree.c cli/model_names.c cli/model_steps.c cli/model_mappings.c cli/model_events.c cli/torch_text.c cli/summary_view.c \
           $(COMMON_C)
# The CLI demangles C++ names with libstdc++'s __cxa_demangle, loaded when
# first needed (cli/demangle.c).
CLI_LIBS := -ljansson -ldl
# vramtrace top draws with ncurses.
CLI_TOP_LIBS := -lncurses
HEADERS := $(wildcard interpose/*.h interpose/*.def tracker/*.h report/*.h cli/*.h cli/html/*.h common/*.h common/*.def include/*.h)
# The HTML page's style and script, readable files in cli/html/, embedded by
# cli/html/assets.S from build/html/ (the script's parts in this order).
HTML_JS := cli/html/util.js cli/html/timeline.js cli/html/flame.js cli/html/tables.js cli/html/main.js \
           cli/html/selftest.js
HTML_ASSETS := $(B)/html/page.js $(B)/html/page.css

LIB_O   := $(LIB_C:%.c=$(B)/obj/%.o) $(LIB_S:%.S=$(B)/obj/%.o)

.PHONY: all deps demo test unit integration install clean sim progs sanitized
all: $(B)/libvramtrace.so $(B)/vramtrace

deps:
	@sh tests/deps.sh
ifneq ($(filter 1,$(VRAMTRACE_TORCH))$(CI),)
	@$(MAKE) --no-print-directory torch-env pytest-env
endif
# VRAMTRACE_TORCH is make's switch, not a library option: the programs the
# tests run under vramtrace must not see it (vramtrace warns of unknown
# VRAMTRACE_* variables).
unexport VRAMTRACE_TORCH

# ---------------------------------------------------------- PyTorch
# build/torch-venv: a virtual environment with the pinned PyTorch (a CUDA
# build; its runtime and cuBLAS are replaced by the stand-ins at run time,
# see tests/simgpu/run). The stamp names the version: a new pin rebuilds it,
# an existing one costs nothing. `make test` runs the PyTorch tests only
# when it exists.
TORCH_VERSION := 2.14.1
TORCH_VENV    := $(B)/torch-venv
TORCH_STAMP   := $(TORCH_VENV)/.vramtrace-torch-$(TORCH_VERSION)
.PHONY: torch-env
torch-env: $(TORCH_STAMP)
$(TORCH_STAMP):
	@echo "vramtrace: creating $(TORCH_VENV) with torch==$(TORCH_VERSION)"
	rm -rf $(TORCH_VENV)
	$(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/pip install -q --no-input --no-cache-dir torch==$(TORCH_VERSION)
	$(TORCH_VENV)/bin/python -c 'import torch; assert torch.__version__.split("+")[0] == "$(TORCH_VERSION)", torch.__version__'
	touch $@

# pytest and pytest-xdist, pinned, and pytest-vramtrace (python/, editable)
# in PYTEST_VENV (build/torch-venv unless given: another venv that can
# import torch does too), for tests/integration/test_pytest.py, which
# skips the plugin's tests without them. Added to the venv, never
# recreating it; the stamp names the versions.
PYTEST_VERSION := 8.4.2
XDIST_VERSION  := 3.8.0
PYTEST_VENV    ?= $(TORCH_VENV)
export PYTEST_VENV
PYTEST_STAMP   := $(PYTEST_VENV)/.vramtrace-pytest-$(PYTEST_VERSION)-xdist-$(XDIST_VERSION)
.PHONY: pytest-env
pytest-env: $(PYTEST_STAMP)
$(PYTEST_STAMP): $(if $(filter $(TORCH_VENV),$(PYTEST_VENV)),$(TORCH_STAMP)) python/pyproject.toml
	@test -x $(PYTEST_VENV)/bin/pip || { echo "pytest-env: no virtual environment $(PYTEST_VENV) (make torch-env creates $(TORCH_VENV))" >&2; exit 1; }
	$(PYTEST_VENV)/bin/pip install -q --no-input pytest==$(PYTEST_VERSION) pytest-xdist==$(XDIST_VERSION)
	$(PYTEST_VENV)/bin/pip install -q --no-input -e ./python
	touch $@

$(B)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(B)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) -fPIC -c $< -o $@

# How every build of the library links: never unloaded (its handlers and
# the wrapper pointers it hands out stay valid); DT_FINI is vt_fini, in
# .text.startup beside the destructor, not crti's _fini, which the linker
# puts after .text, a page fault of its own at every process's exit.
LIB_LINK := -shared -Wl,-soname,libvramtrace.so -Wl,-z,nodelete -Wl,-fini=vt_fini

$(B)/libvramtrace.so: $(LIB_O)
	$(CC) $(LIB_LINK) -Wl,--no-undefined -o $@ $(LIB_O) $(LIBS)

$(B)/vramtrace: $(CLI_C) $(HEADERS) $(HTML_ASSETS) $(B)/prefix.stamp
	@mkdir -p $(B)
	$(CC) $(BASE) $(LIBDIR_DEF) $(CFLAGS) -o $@ $(CLI_C) $(CLI_LIBS) $(CLI_TOP_LIBS)

$(B)/html/page.js: $(HTML_JS)
	@mkdir -p $(B)/html
	cat $(HTML_JS) > $@

$(B)/html/page.css: cli/html/page.css
	@mkdir -p $(B)/html
	cp $< $@

$(B)/prefix.stamp: FORCE
	@mkdir -p $(B)
	@printf '%s\n' '$(PREFIX)' | cmp -s - $@ || printf '%s\n' '$(PREFIX)' > $@

.PHONY: FORCE
FORCE:

# ------------------------------------------------------- simulated GPU
SIM := $(B)/sim
sim: $(SIM)/libcuda.so.1 $(SIM)/libcudart_sim.so $(SIM)/libcudart_sim_static.a $(SIM)/libnvidia-ml.so.1 $(SIM)/libcudart.so.13

$(SIM)/libcuda.so.1: tests/simgpu/simcuda.c
	@mkdir -p $(SIM)
	$(CC) $(BASE) -O1 -g -fPIC -fvisibility=hidden -shared -Wl,-soname,libcuda.so.1 \
	    -o $@ $< -lpthread
	ln -sf libcuda.so.1 $(SIM)/libcuda.so

$(SIM)/libnvidia-ml.so.1: tests/simgpu/simnvml.c
	@mkdir -p $(SIM)
	$(CC) $(BASE) -O1 -g -fPIC -fvisibility=hidden -shared -Wl,-soname,libnvidia-ml.so.1 -o $@ $<

$(SIM)/libcudart_sim.so: tests/simgpu/simcudart.c tests/simgpu/device_props.def tests/simgpu/rt_forward.def
	@mkdir -p $(SIM)
	$(CC) $(BASE) -O1 -g -fPIC -fvisibility=hidden -shared -Wl,-soname,libcudart_sim.so \
	    -o $@ $< -ldl -lpthread

$(SIM)/libcudart_sim_static.a: tests/simgpu/simcudart.c tests/simgpu/device_props.def tests/simgpu/rt_forward.def
	@mkdir -p $(SIM)/static
	$(CC) $(BASE) -O1 -g -fvisibility=hidden -c $< -o $(SIM)/static/simcudart.o
	ar rcs $@ $(SIM)/static/simcudart.o

# PyTorch on the simulated GPU: the stand-in runtime again, as
# libcudart.so.13 with the real one's symbol version, and stand-ins for
# cuBLAS and cuBLASLt. Their headers come with PyTorch's nvidia-cublas wheel
# (TORCH_VENV, or CUBLAS_INC). tests/simgpu/run --torch runs a command on them.
TORCH_VENV ?= $(B)/torch-venv
CUBLAS_INC ?= $(firstword $(wildcard $(TORCH_VENV)/lib/python3*/site-packages/nvidia/cu13/include))
.PHONY: sim-torch
sim-torch: sim $(SIM)/libcudart.so.13 $(SIM)/libcublas.so.13 $(SIM)/libcublasLt.so.13

$(SIM)/libcudart.so.13: tests/simgpu/simcudart.c tests/simgpu/device_props.def tests/simgpu/rt_forward.def tests/simgpu/libcudart.map
	@mkdir -p $(SIM)
	$(CC) $(BASE) -O1 -g -fPIC -fvisibility=hidden -shared -Wl,-soname,libcudart.so.13 \
	    -Wl,--version-script=tests/simgpu/libcudart.map -o $@ $< -ldl -lpthread

$(SIM)/libcublas.so.13: tests/simgpu/simcublas.c tests/simgpu/simcublas_stubs.c tests/simgpu/cublas_stubs.def tests/simgpu/libcublas.map
	@test -n "$(CUBLAS_INC)" || { echo "sim-torch: cublas_api.h not found: make torch-env, or set CUBLAS_INC" >&2; exit 1; }
	@mkdir -p $(SIM)
	$(CC) $(BASE) -idirafter $(CUBLAS_INC) -O1 -g -fPIC -fvisibility=hidden -shared -Wl,-soname,libcublas.so.13 \
	    -Wl,--version-script=tests/simgpu/libcublas.map -o $@ tests/simgpu/simcublas.c tests/simgpu/simcublas_stubs.c

$(SIM)/libcublasLt.so.13: tests/simgpu/simcublaslt.c tests/simgpu/libcublasLt.map
	@test -n "$(CUBLAS_INC)" || { echo "sim-torch: cublasLt.h not found: make torch-env, or set CUBLAS_INC" >&2; exit 1; }
	@mkdir -p $(SIM)
	$(CC) $(BASE) -idirafter $(CUBLAS_INC) -O1 -g -fPIC -fvisibility=hidden -shared -Wl,-soname,libcublasLt.so.13 \
	    -Wl,--version-script=tests/simgpu/libcublasLt.map -o $@ $<

# --------------------------------------------------------------- demo
# With a GPU and driver present the demo links the real runtime.
HAVE_GPU := $(shell test -e /dev/nvidiactl && ls /dev/nvidia[0-9]* >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_GPU),1)
DEMO_LINK := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart
DEMO_ENV  :=
DEMO_DEPS :=
else
DEMO_LINK := $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'
DEMO_ENV  := LD_LIBRARY_PATH=$(CURDIR)/$(SIM) SIMGPU_CAPACITY=8G SIMGPU_CONTEXT=300M
DEMO_DEPS := sim
endif

$(B)/examples/train_oom: examples/train_oom.c $(DEMO_DEPS)
	@mkdir -p $(B)/examples
	$(CC) $(BASE) -O0 -g -o $@ $< $(DEMO_LINK)

# With build/torch-venv the demo is a PyTorch script (examples/train_oom.py),
# else the C program.
ifneq ($(wildcard $(TORCH_STAMP)),)
DEMO_TORCH_ON := $(if $(HAVE_GPU),PATH=$(CURDIR)/$(TORCH_VENV)/bin:$$PATH,SIMGPU_CAPACITY=8G SIMGPU_CONTEXT=300M $(CURDIR)/tests/simgpu/run --torch --)
demo: deps all $(DEMO_DEPS)
	@mkdir -p $(B)/examples
	@echo "== running examples/train_oom.py (PyTorch $(TORCH_VERSION)) under vramtrace$(if $(HAVE_GPU), on the real GPU, on the simulated GPU (8 GiB)) =="
	@cd $(B)/examples && rm -f demo.*.json && { $(DEMO_TORCH_ON) ../vramtrace run --out demo.%p.json -- python3 $(CURDIR)/examples/train_oom.py; \
	    echo "== train_oom.py exited with status $$? (as it does without vramtrace); dump: $$(ls $(CURDIR)/$(B)/examples/demo.*.json) =="; }
else
demo: deps all $(B)/examples/train_oom
	@echo "== running examples/train_oom under vramtrace$(if $(HAVE_GPU), on the real GPU, on the simulated GPU (8 GiB)) =="
	@cd $(B)/examples && rm -f demo.*.json && { $(DEMO_ENV) ../vramtrace run --out demo.%p.json -- ./train_oom; \
	    echo "== train_oom exited with status $$? (as it does without vramtrace); dump: $$(ls $(CURDIR)/$(B)/examples/demo.*.json) =="; }
endif

# --------------------------------------------------------------- tests
T := $(B)/tests
TEST_CFLAGS := $(BASE) -O0 -g
SIMLINK := -L$(SIM) -Wl,-rpath,'$$ORIGIN/../sim'

PROGS := $(T)/t_driver $(T)/t_budget $(T)/t_dlsym $(T)/t_dlnext $(T)/t_runtime $(T)/t_runtime_static \
         $(T)/t_entry $(T)/t_arrays $(T)/t_arrays_static $(T)/t_exec $(T)/t_spawn $(T)/t_dlclose $(T)/t_triage $(T)/t_leaks $(T)/t_pexit $(T)/t_poolkeep $(T)/t_reset $(T)/t_pinreset $(T)/t_ctxdestroy $(T)/t_phases $(T)/t_oom $(T)/t_fork $(T)/t_threads $(T)/t_real_cudart \
         $(T)/t_real_cudart_static $(T)/t_cpp $(T)/t_stripped $(T)/t_rtld_local $(T)/libt_local.so $(T)/libt_dep.so \
         $(T)/libt_nativethread.so $(T)/t_replug $(T)/libt_plug1.so $(T)/libt_plug2.so $(T)/t_vmm $(T)/t_limitargs $(T)/t_survived $(T)/t_dumptwice $(T)/t_many \
         $(T)/t_cancel $(T)/t_threadreuse $(T)/t_exitrace $(T)/t_pages $(T)/t_ranks $(T)/t_pastsite $(T)/t_pitchsettle $(T)/t_limitinvalid
# Each area's further test programs: tests/progs/AREA.mk adds to PROGS.
include $(wildcard tests/progs/*.mk)
progs: sim $(PROGS)

# A test program is tests/progs/NAME.c linked one of four ways: with the
# simulated runtime (SIMRT_PROGS), the simulated driver (DRIVER_PROGS),
# libdl alone (DL_PROGS), or the static simulated runtime (NAME_static,
# from NAME.c). Extra libraries: LDLIBS_NAME.
SIMRT := $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'
SIMRT_PROGS := t_runtime t_entry t_fork t_threads t_oom t_phases t_leaks t_pexit t_poolkeep t_reset t_pinreset t_ctxdestroy t_triage t_exec t_spawn t_arrays t_fds t_symfds \
               t_limitargs t_survived t_dumptwice t_many t_cancel t_exitrace t_ranks t_pastsite t_pitchsettle t_limitinvalid t_closedstd t_fullerr \
               t_nofds t_fdswap t_threadreuse
DRIVER_PROGS := t_driver t_replug t_budget t_vmm t_pages t_twosites
DL_PROGS := t_dlsym t_dlclose t_rtld_local
STATIC_PROGS := t_runtime_static t_arrays_static
LDLIBS_t_threads := -lpthread
LDLIBS_t_threadreuse := -lpthread
LDLIBS_t_reset := -ldl -lpthread
LDLIBS_t_replug := -ldl
LDLIBS_t_budget := -lpthread
LDLIBS_t_cancel := -lpthread
LDLIBS_t_exitrace := -lpthread
LDLIBS_t_closedstd := -lpthread
LDLIBS_t_nofds := -rdynamic
LDLIBS_t_limitargs := $(SIMLINK) -lcuda
LDLIBS_t_pitchsettle := $(SIMLINK) -lcuda
LDLIBS_t_limitinvalid := $(SIMLINK) -lcuda
LDLIBS_t_vmm := -ldl -lpthread

$(SIMRT_PROGS:%=$(T)/%): $(T)/%: tests/progs/%.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIMRT) $(LDLIBS_$*)

$(T)/t_twosites: tests/progs/primary_ctx.h
$(DRIVER_PROGS:%=$(T)/%): $(T)/%: tests/progs/%.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIMLINK) -lcuda $(LDLIBS_$*)

$(DL_PROGS:%=$(T)/%): $(T)/%: tests/progs/%.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< -ldl

$(STATIC_PROGS:%=$(T)/%): $(T)/%_static: tests/progs/%.c $(SIM)/libcudart_sim_static.a
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim_static.a -ldl -lpthread

$(T)/t_rtld_local: $(T)/libt_local.so

# dlsym(RTLD_NEXT) from the executable and from a library it links.
$(T)/libt_nextlib.so: tests/progs/t_nextlib.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $< -ldl

$(T)/t_dlnext: tests/progs/t_dlnext.c $(T)/libt_nextlib.so
	$(CC) $(TEST_CFLAGS) -o $@ $< -L$(T) -lt_nextlib -Wl,-rpath,'$$ORIGIN' -ldl

# Two plugins whose code differs only in its frame size: their allocating
# call returns to the same offset with other unwind rules (t_replug loads
# one, then the other in its place).
$(T)/libt_plug%.so: tests/progs/t_plug%.S $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) -fPIC -shared -o $@ $< $(SIMLINK) -lcuda

$(T)/t_real_cudart: tests/progs/t_real_cudart.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart

$(T)/t_real_cudart_static: tests/progs/t_real_cudart.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(CUDA_HOME)/lib64/libcudart_static.a -ldl -lpthread -lrt

$(T)/libt_dep.so: tests/progs/t_dep.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $<

$(T)/libt_local.so: tests/progs/t_local.c $(T)/libt_dep.so
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $< -L$(T) -lt_dep -Wl,-rpath,'$$ORIGIN' -ldl


# Unit tests of tracker/ and report/, linked straight to their sources, in
# three builds: plain, ASan+UBSan, and TSan for the threaded one.
UNIT_SRC := tracker/tracker.c tracker/slot.c tracker/tblock.c tracker/recslab.c tracker/slab.c tracker/table.c tracker/cow.c tracker/log.c tracker/account.c tracker/intern.c tracker/lsanroot.c tracker/history.c tracker/handlerun.c tracker/steps.c tracker/mappings.c tracker/clock.c tracker/snapshot.c tracker/snapshot_sort.c tracker/live_spill.c tracker/live_read.c \
            tracker/options.c tracker/pystack.c tracker/pyline.c tracker/pyborrow.c tracker/mark.c tracker/view.c tracker/released.c tracker/departed.c $(COMMON_C) report/holders.c report/since.c report/forecast.c \
            report/dump.c report/dump_tables.c report/dump_events.c report/postmortem.c report/place.c report/symbolize.c report/lazy_dw.c report/dwflfiles.c report/debuglink.c report/inlines.c report/leaks.c report/match.c report/growth.c report/owntime.c report/findings.c report/traits.c report/analysis.c report/survived.c \
            report/torch.c report/torch_dump.c report/torch_print.c report/torch_growth.c report/torch_kept.c report/live_torch.c
UNIT_LIBS := -ldw -lelf -ldl -lpthread

# Each unit test is a tests/unit/test_*.c with the sources above, built
# once plain (unit, unit_nomem: it defines the allocator itself), with
# ASan+UBSan (unit_asan: test_tracker.c again; unit_common: warnings and the
# call-site rule, with the dump that carries their count) or with TSan
# (unit_threads_tsan); the hot path's structures (test_hotpath.c) and the
# snapshot with its spilled live list (test_snapshot.c) all three ways;
# a live table copied on write (test_cow.c) plain and with ASan+UBSan;
# the live view's tracker side and the forecast (unit_live).
SAN_UNIT_ASAN := -fsanitize=address,undefined -fno-sanitize-recover=all
UNIT_HOTPATH := $(T)/unit_hotpath $(T)/unit_hotpath_asan $(T)/unit_hotpath_tsan
UNIT_BINS := $(T)/unit $(T)/unit_asan $(T)/unit_common $(T)/unit_nomem $(T)/unit_threads_tsan $(UNIT_HOTPATH) \
             $(T)/unit_live $(T)/unit_xfree $(T)/unit_xfree_tsan $(T)/unit_pages $(T)/unit_intern $(T)/unit_intern_tsan \
             $(T)/unit_snapshot $(T)/unit_snapshot_asan $(T)/unit_snapshot_tsan $(T)/unit_cow $(T)/unit_cow_asan
$(T)/unit_cow $(T)/unit_cow_asan: tests/unit/test_cow.c
$(T)/unit_cow_asan: UNIT_SAN := $(SAN_UNIT_ASAN)
$(T)/unit_snapshot $(T)/unit_snapshot_asan $(T)/unit_snapshot_tsan: tests/unit/test_snapshot.c
$(T)/unit_snapshot_asan: UNIT_SAN := $(SAN_UNIT_ASAN)
$(T)/unit_snapshot_tsan: UNIT_SAN := -fsanitize=thread
$(T)/unit_pages: tests/unit/test_pages.c tracker/rules.c tracker/cfi.c
$(T)/unit_pages: UNIT_EXTRA := tracker/rules.c tracker/cfi.c
$(T)/unit_live: tests/unit/test_live.c
$(T)/unit_xfree $(T)/unit_xfree_tsan: tests/unit/test_xfree.c
$(T)/unit_xfree_tsan: UNIT_SAN := -fsanitize=thread
$(T)/unit_intern $(T)/unit_intern_tsan: tests/unit/test_intern.c
$(T)/unit_intern: UNIT_SAN := -DVT_INTERN_COLLIDE
$(T)/unit_intern_tsan: UNIT_SAN := -fsanitize=thread
$(UNIT_HOTPATH): tests/unit/test_hotpath.c
$(T)/unit_hotpath_asan: UNIT_SAN := $(SAN_UNIT_ASAN)
$(T)/unit_hotpath_tsan: UNIT_SAN := -fsanitize=thread
$(T)/unit $(T)/unit_asan: tests/unit/test_tracker.c
$(T)/unit_common: tests/unit/test_common.c
$(T)/unit_nomem: tests/unit/test_nomem.c
$(T)/unit_threads_tsan: tests/unit/test_threads.c
$(T)/unit_asan $(T)/unit_common $(T)/unit_live: UNIT_SAN := $(SAN_UNIT_ASAN)
$(T)/unit_threads_tsan: UNIT_SAN := -fsanitize=thread
$(UNIT_BINS): tests/unit/check.h $(UNIT_SRC) $(HEADERS)
	@mkdir -p $(T)
	$(CC) $(BASE) -O1 -g $(UNIT_SAN) -o $@ $(filter tests/unit/test_%.c,$^) $(UNIT_SRC) $(UNIT_EXTRA) $(UNIT_LIBS)

# The stack walker against libunwind: tracker/stack.c as a shared library
# (its frames are the ones a capture drops), in two variants each in its
# own folder with its plugins beside it: stack (plain, -O2) and stack_asan
# (ASan+UBSan, -O1).
VTSTACK_C := tracker/stack.c tracker/walker.c tracker/tblock.c tracker/rules.c tracker/cfi.c
STACK_FLAGS_stack := -O2 -g
STACK_FLAGS_stack_asan := -O1 -g $(SAN_UNIT_ASAN)
STACK_FLAGS = $(STACK_FLAGS_$(notdir $(@D)))
STACK_VARIANTS := stack stack_asan
$(STACK_VARIANTS:%=$(T)/%/libvtstack.so): $(T)/%/libvtstack.so: $(VTSTACK_C) tracker/stack.h tracker/walker.h tracker/rules.h tracker/cfi.h
	@mkdir -p $(@D)
	$(CC) $(BASE) $(STACK_FLAGS) -fPIC -shared -o $@ $(VTSTACK_C) -lunwind -lpthread

$(T)/stack/libstack_plugin.so: tests/unit/stack_plugin.c
	@mkdir -p $(@D)
	$(CC) $(BASE) -O2 -g -fPIC -shared -o $@ $<

$(T)/stack/libcbplug1.so $(T)/stack/libcbplug2.so: $(T)/stack/libcbplug%.so: tests/unit/cbplug%.S
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $<

# The plugins are the same files in both variants (no sanitizer).
STACK_PLUGINS := libstack_plugin.so libcbplug1.so libcbplug2.so
$(STACK_PLUGINS:%=$(T)/stack_asan/%): $(T)/stack_asan/%: $(T)/stack/%
	@mkdir -p $(@D)
	cp $< $@

$(STACK_VARIANTS:%=$(T)/%/test_stack): $(T)/%/test_stack: tests/unit/test_stack.c tests/unit/rbp_clobber.S tests/unit/check.h $(T)/%/libvtstack.so \
                   $(T)/%/libstack_plugin.so $(T)/%/libcbplug1.so $(T)/%/libcbplug2.so
	$(CC) $(BASE) $(STACK_FLAGS) -o $@ $< tests/unit/rbp_clobber.S -L$(@D) -lvtstack -Wl,-rpath,'$$ORIGIN' -ldl -lpthread

# The CLI's packed event history, alone, with ASan+UBSan.
$(T)/unit_events_asan: tests/unit/test_events.c tests/unit/check.h cli/model_events.c cli/model_events.h cli/varint.h common/records.h
	@mkdir -p $(T)
	$(CC) $(BASE) -O1 -g $(SAN_UNIT_ASAN) -o $@ tests/unit/test_events.c cli/model_events.c

# The dump reader's JSON scanner, alone: -O2 (its SSE2 loop as shipped) and
# ASan+UBSan (each input in a buffer of its own size).
$(T)/unit_scan $(T)/unit_scan_asan: tests/unit/test_scan.c tests/unit/check.h cli/model_scan.c cli/model_scan.h
	@mkdir -p $(T)
	$(CC) $(BASE) $(if $(findstring asan,$@),-O1 -g $(SAN_UNIT_ASAN),-O2 -g) -o $@ tests/unit/test_scan.c cli/model_scan.c

# The suppressions' template match, alone, against a backtracking reference.
$(T)/unit_match $(T)/unit_match_asan: tests/unit/test_match.c tests/unit/check.h report/match.c report/match.h
	@mkdir -p $(T)
	$(CC) $(BASE) $(if $(findstring asan,$@),-O1 -g $(SAN_UNIT_ASAN),-O2 -g) -o $@ tests/unit/test_match.c report/match.c

# A lazy library's load asked again, alone, under a dlopen of the test's
# own (no sanitizer: ASan intercepts dlopen itself).
$(T)/unit_dlagain: tests/unit/test_dlagain.c tests/unit/check.h common/dlagain.c common/dlagain.h common/fdkeep.h
	@mkdir -p $(T)
	$(CC) $(BASE) -O2 -g -o $@ tests/unit/test_dlagain.c common/dlagain.c

# A thread's large blocks from mappings of vramtrace's own, alone, and
# under TSan (threads taking at once).
$(T)/unit_tblock $(T)/unit_tblock_tsan: $(T)/unit_tblock%: tests/unit/test_tblock.c tests/unit/check.h tracker/tblock.c tracker/tblock.h
	@mkdir -p $(T)
	$(CC) $(BASE) $(if $(findstring tsan,$@),-O1 -g -fsanitize=thread,-O2 -g) -o $@ tests/unit/test_tblock.c tracker/tblock.c -lpthread

unit: $(UNIT_BINS) $(T)/stack/test_stack $(T)/stack_asan/test_stack $(T)/unit_events_asan $(T)/unit_scan $(T)/unit_scan_asan \
      $(T)/unit_match $(T)/unit_match_asan $(T)/unit_dlagain $(T)/unit_tblock $(T)/unit_tblock_tsan
	$(T)/unit
	$(T)/unit_live
	$(T)/unit_intern
	setarch $$(uname -m) -R $(T)/unit_intern_tsan
	$(T)/unit_hotpath
	$(T)/unit_hotpath_asan
	setarch $$(uname -m) -R $(T)/unit_hotpath_tsan
	$(T)/unit_common
	$(T)/unit_nomem
	$(T)/unit_asan
	setarch $$(uname -m) -R $(T)/unit_threads_tsan
	$(T)/unit_xfree
	setarch $$(uname -m) -R $(T)/unit_xfree_tsan
	$(T)/unit_pages
	$(T)/unit_snapshot
	$(T)/unit_snapshot_asan
	setarch $$(uname -m) -R $(T)/unit_snapshot_tsan
	$(T)/unit_cow
	$(T)/unit_cow_asan
	$(T)/unit_events_asan
	$(T)/unit_scan
	$(T)/unit_scan_asan
	$(T)/unit_match
	$(T)/unit_match_asan
	$(T)/unit_dlagain
	$(T)/unit_tblock
	setarch $$(uname -m) -R $(T)/unit_tblock_tsan
	$(T)/stack/test_stack
	$(T)/stack_asan/test_stack

integration: all progs sanitized $(B)/fuzz/fuzz_dump
	$(PYTHON) tests/run_tests.py

test: deps all progs unit fuzz-replay integration
	@test -x $(TORCH_VENV)/bin/python3 || echo "vramtrace: the PyTorch tests were SKIPPED: no $(TORCH_VENV) (make torch-env creates it)"

# Quoted: a prefix may hold spaces (`vramtrace run` copes, see cmd_run.c).
install: all
	install -d "$(DESTDIR)$(PREFIX)/lib" "$(DESTDIR)$(PREFIX)/bin" "$(DESTDIR)$(PREFIX)/include"
	install -m 0755 $(B)/libvramtrace.so "$(DESTDIR)$(PREFIX)/lib/libvramtrace.so"
	install -m 0755 $(B)/vramtrace "$(DESTDIR)$(PREFIX)/bin/vramtrace"
	install -d "$(DESTDIR)$(PREFIX)/share/vramtrace/python/vramtrace_torch/_boot"
	install -m 0644 python/vramtrace_torch/__init__.py python/vramtrace_torch/collect.py python/vramtrace_torch/grown.py \
	    "$(DESTDIR)$(PREFIX)/share/vramtrace/python/vramtrace_torch/"
	install -m 0644 python/vramtrace_torch/_boot/sitecustomize.py \
	    "$(DESTDIR)$(PREFIX)/share/vramtrace/python/vramtrace_torch/_boot/"
	install -m 0644 include/vramtrace.h "$(DESTDIR)$(PREFIX)/include/vramtrace.h"
	@echo "vramtrace: the pytest plugin (pytest --vramtrace): pip install $(CURDIR)/python"

clean:
	rm -rf $(B)

$(T)/t_cpp: tests/progs/t_cpp.cc $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CXX) -O0 -g -fno-inline -I$(CUDA_HOME)/include -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'

# t_driver without symbols or debug information: frames fall back to
# module and offset.
$(T)/t_stripped: $(T)/t_driver
	strip -s -o $@ $<

$(T)/libt_nativethread.so: tests/progs/t_nativethread.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $< $(SIMLINK) -lcuda -lpthread

# ---------------------------------------------------------- benchmarks
BENCH := $(B)/bench
.PHONY: bench
$(BENCH)/libcuda.so.1: bench/fastcuda.c
	@mkdir -p $(BENCH)
	$(CC) $(BASE) -O2 -fPIC -fvisibility=hidden -shared -Wl,-soname,libcuda.so.1 -o $@ $<
	ln -sf libcuda.so.1 $(BENCH)/libcuda.so

$(BENCH)/bench_alloc: bench/bench_alloc.c bench/bench_util.h $(BENCH)/libcuda.so.1
	$(CC) $(BASE) -O2 -g -fno-optimize-sibling-calls -o $@ $< -L$(BENCH) -Wl,-rpath,'$$ORIGIN' -lcuda -lpthread

$(BENCH)/libcudart.so.12: bench/fastcudart.c $(BENCH)/libcuda.so.1
	$(CC) $(BASE) -O2 -fPIC -fvisibility=hidden -shared -Wl,-soname,libcudart.so.12 -o $@ $< -ldl -lpthread
	ln -sf libcudart.so.12 $(BENCH)/libcudart.so

$(BENCH)/bench_shapes: bench/bench_shapes.c bench/bench_util.h bench/stacks.h include/vramtrace.h $(BENCH)/libcuda.so.1 $(BENCH)/libcudart.so.12
	$(CC) $(BASE) -O2 -g -fno-optimize-sibling-calls -o $@ $< -L$(BENCH) -Wl,-rpath,'$$ORIGIN' -lcuda -lcudart -lpthread

$(BENCH)/bench_dump: bench/bench_dump.c bench/stacks.h include/vramtrace.h $(BENCH)/libcuda.so.1
	$(CC) $(BASE) -O2 -g -fno-optimize-sibling-calls -o $@ $< -L$(BENCH) -Wl,-rpath,'$$ORIGIN' -lcuda -ldl

# Many VMM handles, on the simulated GPU (run through tests/simgpu/run).
$(BENCH)/bench_vmm: bench/bench_vmm.c $(SIM)/libcuda.so.1
	@mkdir -p $(BENCH)
	$(CC) $(BASE) -O2 -g -o $@ $< -L$(SIM) -lcuda

# The stack table's growth, linked straight to the tracker's sources, at the
# library's optimisation.
$(BENCH)/bench_intern: bench/bench_intern.c bench/bench_util.h $(UNIT_SRC) $(HEADERS)
	@mkdir -p $(BENCH)
	$(CC) $(BASE) -O2 -g -o $@ bench/bench_intern.c $(UNIT_SRC) $(UNIT_LIBS)

bench: deps all $(BENCH)/bench_alloc $(BENCH)/bench_shapes $(BENCH)/bench_dump $(BENCH)/bench_intern $(BENCH)/bench_vmm $(B)/probe/libvramtrace.so sim
	$(PYTHON) bench/bench.py
	$(PYTHON) bench/bench_dump.py
	$(BENCH)/bench_intern 4000000
	$(PYTHON) bench/bench_torch_export.py
	$(PYTHON) bench/bench_torch.py
	$(PYTHON) bench/bench_html.py
	$(PYTHON) bench/bench_companion.py

# ---------------------------------------------------------- fuzzing
# The dump reader and every report writer under libFuzzer (clang), with
# ASan and UBSan. `make fuzz` runs a campaign of FUZZ_SECONDS from the seeds
# (the golden dumps); `make test` replays the seeds and every input that
# once crashed (tests/fuzz/regressions).
FUZZ_SECONDS ?= 120
FUZZ_SRC := tests/fuzz/fuzz_dump.c cli/model.c cli/demangle.c cli/reporters.c cli/fleet.c cli/runs.c cli/forecast_text.c $(COMMON_C) \
            cli/fmt_text.c cli/fmt_json.c cli/fmt_folded.c cli/fmt_html.c cli/fmt_torch.c cli/torch_ooms.c cli/refset.c \
            cli/sha256.c cli/html/data.c cli/html/pack.c cli/html/torch.c cli/html/bydevice.c cli/html/assets.S cli/model_torch.c cli/model_u64.c cli/model_v2.c cli/model_scan.c cli/model_file.c cli/model_label.c cli/model_tree.c cli/model_names.c cli/model_steps.c cli/model_mappings.c cli/model_events.c cli/torch_text.c cli/summary_view.c
.PHONY: fuzz fuzz-replay
$(B)/fuzz/fuzz_dump: $(FUZZ_SRC) $(HEADERS) $(HTML_ASSETS)
	@mkdir -p $(B)/fuzz
	clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -I$(CUDA_HOME)/include -o $@ $(FUZZ_SRC) $(CLI_LIBS)

fuzz-replay: $(B)/fuzz/fuzz_dump
	$(B)/fuzz/fuzz_dump -runs=0 tests/fuzz/seeds tests/fuzz/regressions

fuzz: deps $(B)/fuzz/fuzz_dump
	@mkdir -p $(B)/fuzz/corpus
	$(B)/fuzz/fuzz_dump -max_total_time=$(FUZZ_SECONDS) -max_len=131072 -print_final_stats=1 \
	    -artifact_prefix=$(B)/fuzz/ $(B)/fuzz/corpus tests/fuzz/seeds

# ------------------------------------------------- sanitized library
# The preload library itself built with ASan+UBSan and with TSan, for the
# integration tests to run programs under (the sanitizer's runtime is
# preloaded first; see tests/run_tests.py).
SAN_ASAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
SAN_TSAN := -fsanitize=thread -DVT_TSAN_BUILD
$(B)/asan/libvramtrace.so: $(LIB_C) $(LIB_S) $(HEADERS)
	@mkdir -p $(B)/asan
	$(CC) $(BASE) -O1 -g -fPIC -fvisibility=hidden $(SAN_ASAN) $(LIB_LINK) \
	    -o $@ $(LIB_C) $(LIB_S) $(LIBS)

$(B)/tsan/libvramtrace.so: $(LIB_C) $(LIB_S) $(HEADERS)
	@mkdir -p $(B)/tsan
	$(CC) $(BASE) -O1 -g -fPIC -fvisibility=hidden $(SAN_TSAN) $(LIB_LINK) \
	    -o $@ $(LIB_C) $(LIB_S) $(LIBS)

sanitized: $(B)/asan/libvramtrace.so $(B)/tsan/libvramtrace.so

# The library with the lock-hold probe (tracker/lockprobe.h), which
# bench.py's dumpwait rows run under: each take and give of a lock reads
# the thread's CPU clock, so it measures how long locks are held, not speed.
$(B)/probe/libvramtrace.so: $(LIB_C) $(LIB_S) $(HEADERS)
	@mkdir -p $(B)/probe
	$(CC) $(BASE) $(CFLAGS) -fPIC -fvisibility=hidden -DVT_LOCK_PROBE $(LIB_LINK) \
	    -o $@ $(LIB_C) $(LIB_S) $(LIBS)

# --------------------------------------------------------- GPU bundle
# vramtrace with the shared libraries it needs beside it (glibc's aside),
# found through an $$ORIGIN rpath: for a machine with a GPU and no package
# registry. Carry build/gpu-bundle and run tests/gpu/run.sh there.
GB := $(B)/gpu-bundle
.PHONY: gpu-bundle
gpu-bundle: $(LIB_O) $(CLI_C) $(HEADERS) $(HTML_ASSETS)
	@mkdir -p $(GB)/lib $(GB)/bin
	$(CC) $(LIB_LINK) -Wl,--disable-new-dtags,-rpath,'$$ORIGIN' \
	    -o $(GB)/lib/libvramtrace.so $(LIB_O) $(LIBS)
	$(CC) $(BASE) $(LIBDIR_DEF) $(CFLAGS) -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/../lib' -o $(GB)/bin/vramtrace $(CLI_C) $(CLI_LIBS) $(CLI_TOP_LIBS)
	# libdw and libunwind are opened when first needed (report/lazy_dw.c,
	# tracker/lazy_unwind.c), so ldd does not list them: named here, with
	# what they need; dlopen finds them through the library's $$ORIGIN.
	# Made again, ldd finds the bundle's own copies: those are left.
	lazy=$$(ldconfig -p | awk '/^\t(libdw\.so\.1|libunwind\.so\.8) .*x86-64/{print $$NF}'); \
	for f in $$lazy $$(ldd $(GB)/lib/libvramtrace.so $(GB)/bin/vramtrace $$lazy | awk '/=> \//{print $$3}' | sort -u); do \
	    case $$(basename $$f) in libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;; \
	    *) [ $$f -ef $(GB)/lib/$$(basename $$f) ] || cp -L $$f $(GB)/lib/ ;; esac; done
	@du -sh $(GB)
