// gtest_vramtrace.cc -- a GoogleTest event listener that fails every test
// which leaves GPU memory allocated, with vramtrace's leak report of that
// test's own allocations, and prints each test's GPU peak.
//
// Build it into a test binary (no link against vramtrace: the listener
// finds it with dlsym, and does nothing without it):
//
//   c++ -I/usr/local/include -DGTEST_VRAMTRACE_NO_MAIN my_tests.cc gtest_vramtrace.cc -lgtest -lcudart -ldl
//   LD_PRELOAD=/usr/local/lib/libvramtrace.so ./my_tests      # or: vramtrace run -- ./my_tests
//
// The failure is reported as the test's own (as googletest's sample10 leak
// checker does), so `--gtest_output=xml` and CI see it. The demonstration
// tests below allocate with the CUDA runtime; define
// GTEST_VRAMTRACE_NO_MAIN to use the listener with tests and a main of
// your own (call gtest_vramtrace_install() after InitGoogleTest).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <vramtrace.h>

namespace {

class VramtraceListener : public testing::EmptyTestEventListener {
  public:
    VramtraceListener() { vramtrace_load(&vt_); }

  private:
    void OnTestStart(const testing::TestInfo &) override { mark_ = vt_.mark(); }

    void OnTestEnd(const testing::TestInfo &info) override {
        struct vramtrace_usage u;
        if (mark_ <= 0 || vt_.usage(mark_, -1, &u) != VRAMTRACE_OK) return;
        std::printf("[ vramtrace] %s.%s: peak %llu byte(s) of GPU memory\n", info.test_suite_name(), info.name(),
                    (unsigned long long)u.peak_bytes);
        // The leak report, also of memory a context's reset released
        // without a free (then nothing is live, and the report says it).
        std::vector<char> report(1 << 16);
        long n = vt_.leaks(mark_, report.data(), report.size());
        if (n >= (long)report.size()) {
            report.resize(n + 1);
            n = vt_.leaks(mark_, report.data(), report.size());
        }
        // What the test left is what the report's SUMMARY line counts:
        // device and pinned host memory still allocated, as the exit
        // check counts it (the usage above is device memory's), that no
        // suppression matches. No SUMMARY: nothing left, or all of it
        // suppressed.
        unsigned long long bytes = 0, count = 0;
        const char *sum = n > 0 ? std::strstr(report.data(), "\nSUMMARY: vramtrace: ") : nullptr;
        if (sum && std::sscanf(sum, "\nSUMMARY: vramtrace: %llu byte(s) leaked in %llu", &bytes, &count) == 2) {
            if (u.live_bytes > 0 || std::strstr(report.data(), "\n    released by a context's reset") == nullptr)
                ADD_FAILURE() << "the test left " << bytes << " byte(s) of GPU memory allocated in " << count
                              << " allocation(s):\n"
                              << report.data();
            else
                ADD_FAILURE() << "a context's reset released the test's GPU memory without a free:\n"
                              << report.data();
        }
        vt_.mark_end(mark_);
        mark_ = 0;
    }

    struct vramtrace_api vt_;
    int mark_ = 0;
};

}  // namespace

// Add the listener to googletest's (after testing::InitGoogleTest).
void gtest_vramtrace_install() {
    testing::UnitTest::GetInstance()->listeners().Append(new VramtraceListener);
}

#ifndef GTEST_VRAMTRACE_NO_MAIN
#include <cuda_runtime_api.h>

static void *gpu_buffer(size_t n) {
    void *p = nullptr;
    cudaMalloc(&p, n);
    return p;
}

TEST(Demo, FreesWhatItTakes) {
    void *p = gpu_buffer(1 << 20);
    ASSERT_NE(p, nullptr);
    cudaFree(p);
}

TEST(Demo, LeavesABufferBehind) {
    static void *cache = gpu_buffer(4096);  // a "cache" the test forgets
    ASSERT_NE(cache, nullptr);
}

int main(int argc, char **argv) {
    testing::InitGoogleTest(&argc, argv);
    gtest_vramtrace_install();
    return RUN_ALL_TESTS();
}
#endif
