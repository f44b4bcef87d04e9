// t_cpp.cc -- C++ call sites: the report must show demangled names.
#include <cuda_runtime_api.h>
#include <cstdio>
#include <vector>

namespace model {
template <typename T>
struct Buffer {
    void *p = nullptr;
    explicit Buffer(size_t n) { cudaMalloc(&p, n * sizeof(T)); }
};

std::vector<Buffer<float>> *make_layers(int n) {
    auto *v = new std::vector<Buffer<float>>();
    for (int i = 0; i < n; i++) v->emplace_back(1024);
    return v;
}
}  // namespace model

int main() {
    auto *layers = model::make_layers(3);
    std::printf("layers %zu\n", layers->size());
    return 0;
}
