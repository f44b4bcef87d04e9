# A program built with -fsanitize=address (tests/integration/test_asan.py),
# where the compiler has ASan's runtime; the tests are skipped without it.
# libt_fakesan.so names itself libasan.so.99, a runtime that is nowhere:
# t_fakesan needs it, as a sanitizer build whose runtime is not found.
ASAN_RUNTIME := $(filter /%,$(shell $(CC) -print-file-name=libasan.so 2>/dev/null))
ifneq ($(wildcard $(ASAN_RUNTIME)),)
PROGS += $(T)/t_asan
endif

PROGS += $(T)/t_fakesan

$(T)/t_asan: tests/progs/t_asan.c $(SIM)/libcuda.so.1 $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fsanitize=address -o $@ $< $(SIMLINK) -lcuda $(SIM)/libcudart_sim.so -lpthread

$(T)/fakesan/libt_fakesan.so: tests/progs/t_fakesan_lib.c
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -Wl,-soname,libasan.so.99 -o $@ $<

$(T)/t_fakesan: tests/progs/t_fakesan.c $(T)/fakesan/libt_fakesan.so
	$(CC) $(TEST_CFLAGS) -o $@ $< -L$(T)/fakesan -lt_fakesan
