# A PyTorch CUDAPluggableAllocator (tests/integration/test_torch_untouched_until_cuda.py).
PROGS += $(T)/libt_torchalloc.so

$(T)/libt_torchalloc.so: tests/progs/t_torchalloc.c
	@mkdir -p $(T)
	$(CC) $(TEST_CFLAGS) -fPIC -shared -o $@ $<
