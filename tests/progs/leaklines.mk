# A leak report of many entries (tests/integration/test_leaklines.py).
PROGS += $(T)/t_deepleak

$(T)/t_deepleak: tests/progs/t_deepleak.c tests/progs/primary_ctx.h $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -O1 -o $@ $< $(SIMLINK) -lcuda

# Memory of each kind left at exit: the leak entries name it.
PROGS += $(T)/t_leakkinds

$(T)/t_leakkinds: tests/progs/t_leakkinds.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'
