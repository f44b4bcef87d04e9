# A program built with -fsanitize=address (tests/integration/test_asan.py),
# where the compiler has ASan's runtime; the tests are skipped without it.
ASAN_RUNTIME := $(filter /%,$(shell $(CC) -print-file-name=libasan.so 2>/dev/null))
ifneq ($(wildcard $(ASAN_RUNTIME)),)
PROGS += $(T)/t_asan
endif

$(T)/t_asan: tests/progs/t_asan.c $(SIM)/libcuda.so.1 $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fsanitize=address -o $@ $< $(SIMLINK) -lcuda $(SIM)/libcudart_sim.so -lpthread
