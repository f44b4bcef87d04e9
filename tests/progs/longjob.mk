# Long jobs: more failures than the records kept, more events than the
# ring keeps (tests/integration/test_longjob.py).
PROGS += $(T)/t_oomloop

$(T)/t_oomloop: tests/progs/t_oomloop.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'
PROGS += $(T)/t_leakstep

$(T)/t_leakstep: tests/progs/t_leakstep.c include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl
