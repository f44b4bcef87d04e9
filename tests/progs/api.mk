# Test programs of the C API (tests/integration/test_pytest.py).
PROGS += $(T)/t_api

$(T)/t_api: tests/progs/t_api.c include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl
