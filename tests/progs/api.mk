# Test programs of the C API (tests/integration/test_pytest.py).
PROGS += $(T)/t_api

$(T)/t_api: tests/progs/t_api.c include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl

# A mark's report of pinned host memory (test_pytest.py).
PROGS += $(T)/t_markhost
$(T)/t_markhost: tests/progs/t_markhost.c include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl

# Marks under threads, with TSan and plain (run by test_pytest.py's
# c_api_threads; the plain build checks the heap a mark takes too).
PROGS += $(T)/unit_marks_tsan $(T)/unit_marks
$(T)/unit_marks_tsan: tests/unit/test_marks.c tests/unit/check.h $(UNIT_SRC) $(HEADERS)
	@mkdir -p $(T)
	$(CC) $(BASE) -O1 -g -fsanitize=thread -o $@ tests/unit/test_marks.c $(UNIT_SRC) $(UNIT_LIBS)
$(T)/unit_marks: tests/unit/test_marks.c tests/unit/check.h $(UNIT_SRC) $(HEADERS)
	@mkdir -p $(T)
	$(CC) $(BASE) -O1 -g -o $@ tests/unit/test_marks.c $(UNIT_SRC) $(UNIT_LIBS)

# The GoogleTest listener example, where libgtest-dev is installed
# (tests/deps.sh installs it); test_pytest.py skips it elsewhere.
ifneq ($(wildcard /usr/include/gtest/gtest.h),)
PROGS += $(T)/t_gtest_vramtrace
$(T)/t_gtest_vramtrace: examples/gtest_vramtrace.cc include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CXX) -std=c++17 -O0 -g -Wall -Wextra -I$(CUDA_HOME)/include -Iinclude -o $@ $< -lgtest -lpthread \
	    $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl
PROGS += $(T)/t_gtest_pinned
$(T)/t_gtest_pinned: tests/progs/t_gtest_pinned.cc examples/gtest_vramtrace.cc include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CXX) -std=c++17 -O0 -g -Wall -Wextra -I$(CUDA_HOME)/include -Iinclude -DGTEST_VRAMTRACE_NO_MAIN -o $@ $< \
	    examples/gtest_vramtrace.cc -lgtest -lpthread $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl
endif

# libvramtrace.so loaded by the program itself: by dlopen after start, or
# linked into it (test_pytest.py).
PROGS += $(T)/t_lateload $(T)/t_linked
$(T)/t_lateload: tests/progs/t_lateload.c include/vramtrace.h $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -Iinclude -o $@ $< $(SIMLINK) -lcuda -ldl

$(T)/t_linked: tests/progs/t_lateload.c include/vramtrace.h $(SIM)/libcuda.so.1 $(B)/libvramtrace.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -Iinclude -o $@ $< -L$(B) -lvramtrace -Wl,-rpath,'$$ORIGIN/..' $(SIMLINK) -lcuda -ldl

# libvramtrace.so loaded by dlopen RTLD_GLOBAL before the CUDA libraries
# (test_pytest.py): the runtime is linked, and loads its driver at its
# first call.
PROGS += $(T)/t_lateglobal
$(T)/t_lateglobal: tests/progs/t_lateglobal.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl

# libvramtrace.so linked after the C library, the runtime after it
# (test_pytest.py).
PROGS += $(T)/t_linked_after_libc
$(T)/t_linked_after_libc: tests/progs/t_linked_after_libc.c include/vramtrace.h $(B)/libvramtrace.so $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -Iinclude -o $@ $< -Wl,--no-as-needed -lc -L$(B) -lvramtrace -Wl,-rpath,'$$ORIGIN/..' \
	    $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'

# -lvramtrace ahead of the runtime, linked --as-needed (test_pytest.py).
PROGS += $(T)/t_linked_as_needed
$(T)/t_linked_as_needed: tests/progs/t_linked_as_needed.c $(SIM)/libcudart_sim.so $(B)/libvramtrace.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< -Wl,--as-needed -L$(B) -lvramtrace -Wl,-rpath,'$$ORIGIN/..' -L$(SIM) -lcudart_sim
