// t_gtest_pinned.cc -- examples/gtest_vramtrace.cc's listener on a test
// that leaves pinned host memory behind: the test fails with the leak
// report, as the exit check reports it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

void gtest_vramtrace_install();

static void *pinned_buffer(size_t n) {
    void *p = nullptr;
    cudaMallocHost(&p, n);
    return p;
}

TEST(Pinned, FreesWhatItTakes) {
    void *p = pinned_buffer(1 << 20);
    ASSERT_NE(p, nullptr);
    cudaFreeHost(p);
}

TEST(Pinned, LeavesAStagingBufferBehind) {
    static void *staging = pinned_buffer(5000);  // a staging buffer the test forgets
    ASSERT_NE(staging, nullptr);
}

int main(int argc, char **argv) {
    testing::InitGoogleTest(&argc, argv);
    gtest_vramtrace_install();
    return RUN_ALL_TESTS();
}
