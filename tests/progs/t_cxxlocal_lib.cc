// t_cxxlocal_lib.cc -- the C++ library t_cxxlocal loads RTLD_LOCAL: one
// allocation from a function whose symbol is a mangled C++ name, kept.
#include <cuda_runtime_api.h>
#include <string>

namespace vtcheck {
__attribute__((noinline)) int keep_in_local_library(std::size_t bytes) {
    void *p = nullptr;
    std::string why = "kept";  // the library uses its C++ runtime
    return cudaMalloc(&p, bytes) == cudaSuccess && why.size() == 4 ? 0 : 1;
}
}  // namespace vtcheck

extern "C" int cxxlocal_run(void) { return vtcheck::keep_in_local_library(1 << 20); }
