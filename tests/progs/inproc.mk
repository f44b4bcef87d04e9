# Test programs of the in-process reports (tests/integration/test_inproc.py).
PROGS += $(T)/t_inproc

$(T)/t_inproc: tests/progs/t_inproc.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'
