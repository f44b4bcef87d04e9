# Test programs of the output-files area (tests/integration/test_files.py).
PROGS += $(T)/t_static $(T)/t_fds $(T)/t_closedstd $(T)/t_fullerr $(T)/t_symfds $(T)/t_nofds $(T)/t_fdswap

$(T)/t_static: tests/progs/t_static.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -static -o $@ $<

# A file system without renameat2's flags (test_files.py).
PROGS += $(T)/libt_norename.so
$(T)/libt_norename.so: tests/progs/t_norename.c
	@mkdir -p $(T)
	$(CC) -O1 -g -fPIC -shared -o $@ $<
