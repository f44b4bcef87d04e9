# Frames of inlined functions (tests/integration/test_inline.py): built
# with -O2, as a library's release build is.
PROGS += $(T)/t_inline

$(T)/t_inline: tests/progs/t_inline.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -O2 -o $@ $< $(SIMLINK) -lcuda
