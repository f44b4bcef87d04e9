# Step boundaries through the C API (tests/integration/test_steps.py).
PROGS += $(T)/t_steps

$(T)/t_steps: tests/progs/t_steps.c include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl

# Steps that go on while a SIGTERM's exit outputs are written (test_steps.py).
PROGS += $(T)/t_termstep

$(T)/t_termstep: tests/progs/t_termstep.c include/vramtrace.h $(SIM)/libcudart_sim.so
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(SIM)/libcudart_sim.so -Wl,-rpath,'$$ORIGIN/../sim' -ldl -lpthread
