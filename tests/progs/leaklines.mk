# A leak report of many entries (tests/integration/test_leaklines.py).
PROGS += $(T)/t_deepleak

$(T)/t_deepleak: tests/progs/t_deepleak.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -O1 -o $@ $< $(SIMLINK) -lcuda
