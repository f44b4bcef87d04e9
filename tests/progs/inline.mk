# Frames of inlined functions (tests/integration/test_inline.py): built
# with -O2, as a library's release build is.
PROGS += $(T)/t_inline

$(T)/t_inline: tests/progs/t_inline.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -O2 -o $@ $< $(SIMLINK) -lcuda

# The same built by clang, whose DWARF has no .debug_aranges unless asked:
# the compilation unit is found by its own ranges.
PROGS += $(T)/t_inline_clang

$(T)/t_inline_clang: tests/progs/t_inline.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	clang -std=gnu11 -fno-omit-frame-pointer -I$(CUDA_HOME)/include -O2 -g -o $@ $< $(SIMLINK) -lcuda

# clang's unit linked with a GCC one: .debug_aranges lists GCC's alone.
PROGS += $(T)/t_inline_mixed

$(T)/t_inline_mixed: tests/progs/t_inline.c tests/progs/t_inline_part.c $(SIM)/libcuda.so.1
	@mkdir -p $(T)
	clang -std=gnu11 -fno-omit-frame-pointer -I$(CUDA_HOME)/include -O2 -g -c -o $(T)/t_inline_clang.o tests/progs/t_inline.c
	$(CC) -O2 -g -c -o $(T)/t_inline_part.o tests/progs/t_inline_part.c
	$(CC) -o $@ $(T)/t_inline_clang.o $(T)/t_inline_part.o $(SIMLINK) -lcuda
