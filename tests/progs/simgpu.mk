# The simulated GPU's own promises (tests/integration/test_simgpu.py).
PROGS += $(T)/t_simgpu

$(T)/t_simgpu: tests/progs/t_simgpu.c $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim'

# Ever-growing requests against the simulator's address space.
PROGS += $(T)/t_simgrow

$(T)/t_simgrow: tests/progs/t_simgrow.c tests/progs/primary_ctx.h $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIMLINK) -lcuda

# Sizes no device holds, and a pool destroyed with an allocation out.
PROGS += $(T)/t_simlimits

$(T)/t_simlimits: tests/progs/t_simlimits.c $(SIM)/libcudart_sim.so $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so $(SIMLINK) -lcuda
