# Test programs of the output-files area (tests/integration/test_files.py).
PROGS += $(T)/t_static $(T)/t_fds

$(T)/t_static: tests/progs/t_static.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -static -o $@ $<
