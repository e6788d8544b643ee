// The emulated GPU (emu.cpp) catches what it promises to catch: host code reading device memory,
// a kernel writing past its buffer, memory nobody wrote, kernels that rely on the order of
// threads, bad cuBLAS arguments, and a read of an asynchronous copy's target before anyone
// waited for the copy; and its barrier, warp shuffle and GEMM compute what a GPU
// computes. It is called here through the C entry points gradus loads with dlopen.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using Ptr = unsigned long long;

extern "C" {
int cuInit(unsigned);
int cuMemAlloc_v2(Ptr*, size_t);
int cuMemFree_v2(Ptr);
int cuMemcpyHtoD_v2(Ptr, const void*, size_t);
int cuMemcpyDtoH_v2(void*, Ptr, size_t);
int cuModuleLoadData(void**, const void*);
int cuModuleGetFunction(void**, void*, const char*);
int cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
int nvrtcCreateProgram(void**, const char*, const char*, int, const char* const*, const char* const*);
int nvrtcCompileProgram(void*, int, const char* const*);
int nvrtcGetProgramLogSize(void*, size_t*);
int nvrtcGetProgramLog(void*, char*);
int nvrtcGetPTXSize(void*, size_t*);
int nvrtcGetPTX(void*, char*);
int nvrtcDestroyProgram(void**);
int cuStreamCreate(void**, unsigned);
int cuStreamDestroy_v2(void*);
int cuStreamWaitEvent(void*, void*, unsigned);
int cuEventCreate(void**, unsigned);
int cuEventDestroy_v2(void*);
int cuEventRecord(void*, void*);
int cuEventSynchronize(void*);
int cuMemcpyHtoDAsync_v2(Ptr, const void*, size_t, void*);
int cuMemHostAlloc(void**, size_t, unsigned);
int cuMemFreeHost(void*);
int ncclGetUniqueId(void*);
int cublasCreate_v2(void**);
int cublasSgemm_v2(void*, int, int, int, int, int, const float*, const float*, int, const float*, int, const float*,
                   float*, int);
int cublasGemmEx(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int, const void*,
                 void*, int, int, int, int);
}

namespace {

constexpr int kInvalidValue = 1, kNvrtcCompilation = 6, kBlasInvalidValue = 7;

/// Compiles `source` with the emulated NVRTC: 0 and the image, or the error code and the log.
int compile(const std::string& source, std::string& out) {
  void* prog = nullptr;
  REQUIRE(nvrtcCreateProgram(&prog, source.c_str(), "test.cu", 0, nullptr, nullptr) == 0);
  const char* options[] = {"--gpu-architecture=compute_90"};
  const int rc = nvrtcCompileProgram(prog, 1, options);
  size_t size = 0;
  if (rc == 0) {
    nvrtcGetPTXSize(prog, &size);
    out.assign(size, '\0');
    nvrtcGetPTX(prog, out.data());
  } else {
    nvrtcGetProgramLogSize(prog, &size);
    out.assign(size, '\0');
    nvrtcGetProgramLog(prog, out.data());
  }
  nvrtcDestroyProgram(&prog);
  return rc;
}

/// The kernel `name` of `source`, compiled and loaded.
void* kernel(const std::string& source, const char* name) {
  std::string image;
  REQUIRE(compile(source, image) == 0);
  void* module = nullptr;
  REQUIRE(cuModuleLoadData(&module, image.c_str()) == 0);
  void* fn = nullptr;
  REQUIRE(cuModuleGetFunction(&fn, module, name) == 0);
  return fn;
}

template <class T>
std::vector<T> read(Ptr p, size_t n) {
  std::vector<T> v(n);
  REQUIRE(cuMemcpyDtoH_v2(v.data(), p, n * sizeof(T)) == 0);
  return v;
}

/// Runs `body` in a child process: whether it died of SIGSEGV, and what it wrote to stderr.
template <class F>
std::pair<bool, std::string> in_child(F body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the child's test framework reports the crash too: to /dev/null with its stdout
    dup2(fds[1], 2);
    close(fds[0]);
    if (FILE* null = std::freopen("/dev/null", "w", stdout); !null) _exit(3);
    body();
    _exit(0);
  }
  close(fds[1]);
  std::string err;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) err.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, err};
}

}  // namespace

TEST_CASE("emulated GPU: fresh device memory is NaN, and copies stay inside an allocation", "[gpu-emu]") {
  REQUIRE(cuInit(0) == 0);
  Ptr p = 0;
  REQUIRE(cuMemAlloc_v2(&p, 10 * sizeof(float)) == 0);
  CHECK(p % 256 == 0);
  for (float x : read<float>(p, 10)) CHECK(std::isnan(x));
  const std::vector<float> eleven(11, 1.f);
  CHECK(cuMemcpyHtoD_v2(p, eleven.data(), 11 * sizeof(float)) == kInvalidValue);
  CHECK(cuMemcpyHtoD_v2(p + 4, eleven.data(), 10 * sizeof(float)) == kInvalidValue);
  CHECK(cuMemcpyHtoD_v2(p, eleven.data(), 10 * sizeof(float)) == 0);
  CHECK(read<float>(p, 10) == std::vector<float>(10, 1.f));
  CHECK(cuMemFree_v2(p) == 0);
  CHECK(cuMemFree_v2(p) == kInvalidValue);
}

// Sizes on either side of the emulator's huge-page threshold (large allocations are made of
// transparent huge pages where the kernel has them): small, and 3 MB + 4 bytes.
TEST_CASE("emulated GPU: host code that reads device memory dies, naming the allocation", "[gpu-emu]") {
  REQUIRE(cuInit(0) == 0);
  const size_t bytes = GENERATE(size_t(64), size_t(3 << 20) + 4);
  const size_t at = GENERATE(0, 1);  // the first float, or the last
  Ptr p = 0;
  REQUIRE(cuMemAlloc_v2(&p, bytes) == 0);
  const auto [segv, err] = in_child([&] {
    volatile float x = reinterpret_cast<const float*>(p)[at * (bytes / sizeof(float) - 1)];
    (void)x;
  });
  CHECK(segv);
  CHECK_THAT(err, Catch::Contains("host code touched device memory") &&
                      Catch::Contains("allocation of " + std::to_string(bytes) + " bytes"));
  // copies and kernels still reach all of it
  std::vector<float> ones(bytes / sizeof(float), 1.f);
  CHECK(cuMemcpyHtoD_v2(p, ones.data(), bytes) == 0);
  CHECK(read<float>(p, ones.size()) == ones);
  cuMemFree_v2(p);
}

TEST_CASE("emulated GPU: a kernel that writes past its buffer dies, naming the kernel", "[gpu-emu]") {
  REQUIRE(cuInit(0) == 0);
  void* fn = kernel("extern \"C\" __global__ void overrun(float* d, long n) {\n"
                    "  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n + 4096; i += gridDim.x * (long)blockDim.x)\n"
                    "    d[i] = 1.f;\n"
                    "}\n",
                    "overrun");
  long n = GENERATE(100, (3 << 20) / 4 + 1);  // floats: a small allocation and a huge-page one
  Ptr p = 0;
  REQUIRE(cuMemAlloc_v2(&p, size_t(n) * sizeof(float)) == 0);
  void* params[] = {&p, &n};
  const auto [segv, err] = in_child([&] { cuLaunchKernel(fn, 2, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr); });
  CHECK(segv);
  CHECK_THAT(err, Catch::Contains("kernel overrun accessed") &&
                      Catch::Contains("allocation of " + std::to_string(n * 4) + " bytes"));
  cuMemFree_v2(p);
}

TEST_CASE("emulated GPU: threads run in reverse; __syncthreads and warp shuffles synchronise them", "[gpu-emu]") {
  REQUIRE(cuInit(0) == 0);
  void* fn = kernel(
      "extern \"C\" __global__ void blocks(int* last, int* mirrored, double* warp_sums) {\n"
      "  const unsigned t = threadIdx.x;\n"
      "  last[0] = blockIdx.x * blockDim.x + t;  // the thread that runs last wins\n"
      "  __shared__ int s[256];\n"
      "  s[t] = int(blockIdx.x * 1000 + t);\n"
      "  __syncthreads();\n"
      "  mirrored[blockIdx.x * blockDim.x + t] = s[blockDim.x - 1 - t];\n"
      "  double x = t;\n"
      "  for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);\n"
      "  if ((t & 31u) == 0) warp_sums[blockIdx.x * (blockDim.x / 32) + t / 32] = x;\n"
      "}\n",
      "blocks");
  constexpr unsigned kBlocks = 3, kThreads = 256;
  Ptr last = 0, mirrored = 0, sums = 0;
  REQUIRE(cuMemAlloc_v2(&last, sizeof(int)) == 0);
  REQUIRE(cuMemAlloc_v2(&mirrored, kBlocks * kThreads * sizeof(int)) == 0);
  REQUIRE(cuMemAlloc_v2(&sums, kBlocks * kThreads / 32 * sizeof(double)) == 0);
  void* params[] = {&last, &mirrored, &sums};
  REQUIRE(cuLaunchKernel(fn, kBlocks, 1, 1, kThreads, 1, 1, 0, nullptr, params, nullptr) == 0);
  CHECK(read<int>(last, 1)[0] == 0);  // block 0's thread 0 ran last
  const std::vector<int> m = read<int>(mirrored, kBlocks * kThreads);
  for (unsigned b = 0; b < kBlocks; ++b)
    for (unsigned t = 0; t < kThreads; ++t) CHECK(m[b * kThreads + t] == int(b * 1000 + kThreads - 1 - t));
  const std::vector<double> s = read<double>(sums, kBlocks * kThreads / 32);
  for (unsigned w = 0; w < s.size(); ++w) {
    const double first = double(w % (kThreads / 32) * 32);
    CHECK(s[w] == 32 * first + 31 * 32 / 2);  // lanes first .. first + 31
  }
  cuMemFree_v2(last);
  cuMemFree_v2(mirrored);
  cuMemFree_v2(sums);
}

TEST_CASE("emulated NVRTC: a compile error comes back as NVRTC's error with the compiler's log", "[gpu-emu]") {
  std::string log;
  CHECK(compile("extern \"C\" __global__ void broken(float* d) { d[0] = undeclared_name; }\n", log) ==
        kNvrtcCompilation);
  CHECK_THAT(log, Catch::Contains("undeclared_name"));
}

TEST_CASE("emulated cuBLAS: a column-major product, beta = 0 ignores C, and bad arguments are refused", "[gpu-emu]") {
  REQUIRE(cuInit(0) == 0);
  void* h = nullptr;
  REQUIRE(cublasCreate_v2(&h) == 0);
  // A = [[1, 2, 3], [4, 5, 6]] (2 x 3), B = [[1, 0], [0, 1], [1, 1]] (3 x 2), column-major
  const float a[] = {1, 4, 2, 5, 3, 6}, b[] = {1, 0, 1, 0, 1, 1};
  Ptr A = 0, B = 0, C = 0;
  REQUIRE(cuMemAlloc_v2(&A, sizeof a) == 0);
  REQUIRE(cuMemAlloc_v2(&B, sizeof b) == 0);
  REQUIRE(cuMemAlloc_v2(&C, 4 * sizeof(float)) == 0);  // NaN-filled
  cuMemcpyHtoD_v2(A, a, sizeof a);
  cuMemcpyHtoD_v2(B, b, sizeof b);
  const float one = 1, zero = 0;
  const auto* pa = reinterpret_cast<const float*>(A);
  const auto* pb = reinterpret_cast<const float*>(B);
  auto* pc = reinterpret_cast<float*>(C);
  REQUIRE(cublasSgemm_v2(h, 0, 0, 2, 2, 3, &one, pa, 2, pb, 3, &zero, pc, 2) == 0);
  CHECK(read<float>(C, 4) == std::vector<float>{4, 10, 5, 11});  // A B = [[4, 5], [10, 11]]
  // Aᵀ (3 x 2) times a 2 x 2 C again, now accumulating: C = Aᵀ... is 3 x 2, so use op(A) = Aᵀ with B' = C
  CHECK(cublasSgemm_v2(h, 0, 0, 2, 2, 3, &one, pa, 1, pb, 3, &zero, pc, 2) == kBlasInvalidValue);  // lda < m
  CHECK(cublasSgemm_v2(h, 1, 0, 3, 2, 2, &one, pa, 1, pb, 2, &zero, pc, 3) == kBlasInvalidValue);  // lda < k
  CHECK(cublasSgemm_v2(h, 0, 0, 2, 2, 3, &one, pa, 2, pb, 3, &zero, pc, 3) == kBlasInvalidValue);  // C too small
  const float host[6] = {};
  CHECK(cublasSgemm_v2(h, 0, 0, 2, 2, 3, &one, host, 2, pb, 3, &zero, pc, 2) == kBlasInvalidValue);  // not device
  cuMemFree_v2(A);
  cuMemFree_v2(B);
  cuMemFree_v2(C);
}

TEST_CASE("emulated cublasGemmEx: the fast bf16 and fp16 compute types round the inputs, not the sum", "[gpu-emu]") {
  REQUIRE(cuInit(0) == 0);
  void* h = nullptr;
  REQUIRE(cublasCreate_v2(&h) == 0);
  // 1 + 2^-9 is a half (11 significant bits) but not a bfloat16 (8 bits: the nearest is 1);
  // 1 + 2^-12 is neither; 2^-20 is a bfloat16 and a (subnormal) half. The row
  // [1 + 2^-9, 1 + 2^-12, 3] times the column [1, 1, 2^-20], each sum exact in float:
  const float a[] = {1.0f + 0x1p-9f, 1.0f + 0x1p-12f, 3.0f}, b[] = {1.0f, 1.0f, 0x1p-20f};
  Ptr A = 0, B = 0, C = 0;
  REQUIRE(cuMemAlloc_v2(&A, sizeof a) == 0);
  REQUIRE(cuMemAlloc_v2(&B, sizeof b) == 0);
  REQUIRE(cuMemAlloc_v2(&C, sizeof(float)) == 0);
  cuMemcpyHtoD_v2(A, a, sizeof a);
  cuMemcpyHtoD_v2(B, b, sizeof b);
  const float one = 1, zero = 0;
  auto product = [&](int compute) {
    REQUIRE(cublasGemmEx(h, 0, 0, 1, 1, 3, &one, reinterpret_cast<const void*>(A), 0, 1,
                         reinterpret_cast<const void*>(B), 0, 3, &zero, reinterpret_cast<void*>(C), 0, 1, compute, -1) == 0);
    return read<float>(C, 1)[0];
  };
  CHECK(product(68) == 2.0f + 0x1p-9f + 0x1p-12f + 3.0f * 0x1p-20f);  // CUBLAS_COMPUTE_32F: exact here
  CHECK(product(75) == 2.0f + 3.0f * 0x1p-20f);                       // _FAST_16BF: 1 + 2^-9 and 1 + 2^-12 -> 1
  CHECK(product(74) == 2.0f + 0x1p-9f + 3.0f * 0x1p-20f);             // _FAST_16F: 1 + 2^-12 -> 1, 2^-20 stays
  const float big[] = {70000.0f, 0.0f, 0.0f};  // beyond half's largest value, 65504
  cuMemcpyHtoD_v2(A, big, sizeof big);
  CHECK(std::isinf(product(74)));
  CHECK(product(75) == 70144.0f);  // bfloat16 keeps float's range: the nearest is 70144
  const int bad = cublasGemmEx(h, 0, 0, 1, 1, 3, &one, reinterpret_cast<const void*>(A), 14, 1,
                               reinterpret_cast<const void*>(B), 0, 3, &zero, reinterpret_cast<void*>(C), 0, 1, 68, -1);
  CHECK(bad == 15);  // a bf16 operand type: CUBLAS_STATUS_NOT_SUPPORTED
  cuMemFree_v2(A);
  cuMemFree_v2(B);
  cuMemFree_v2(C);
}

TEST_CASE("emulator: an asynchronous copy lands only once something waits for it", "[emu]") {
  REQUIRE(cuInit(0) == 0);
  void* stream = nullptr;
  REQUIRE(cuStreamCreate(&stream, 0) == kInvalidValue);  // only non-blocking streams are modelled
  REQUIRE(cuStreamCreate(&stream, 1) == 0);
  void* event = nullptr;
  REQUIRE(cuEventCreate(&event, 2) == 0);
  Ptr d = 0;
  REQUIRE(cuMemAlloc_v2(&d, 4 * sizeof(float)) == 0);
  float* pinned = nullptr;
  REQUIRE(cuMemHostAlloc(reinterpret_cast<void**>(&pinned), 4 * sizeof(float), 0) == 0);
  for (int i = 0; i < 4; ++i) pinned[i] = float(i + 1);
  REQUIRE(cuMemcpyHtoDAsync_v2(d, pinned, 4 * sizeof(float), stream) == 0);
  REQUIRE(cuEventRecord(event, stream) == 0);
  float back[4] = {};
  // nobody waited: the default stream sees memory nobody wrote (NaN), as on a GPU still copying
  REQUIRE(cuMemcpyDtoH_v2(back, d, sizeof back) == 0);
  CHECK(std::isnan(back[0]));
  // the host rewrites its buffer before the copy ran: the copy carries the new values
  pinned[0] = 10.f;
  REQUIRE(cuStreamWaitEvent(nullptr, event, 0) == 0);
  REQUIRE(cuMemcpyDtoH_v2(back, d, sizeof back) == 0);
  CHECK(back[0] == 10.f);
  CHECK(back[3] == 4.f);
  // a copy waited for with cuEventSynchronize lands too
  pinned[1] = 20.f;
  REQUIRE(cuMemcpyHtoDAsync_v2(d, pinned, 4 * sizeof(float), stream) == 0);
  REQUIRE(cuEventRecord(event, stream) == 0);
  REQUIRE(cuEventSynchronize(event) == 0);
  REQUIRE(cuMemcpyDtoH_v2(back, d, sizeof back) == 0);
  CHECK(back[1] == 20.f);
  CHECK(cuMemcpyHtoDAsync_v2(d + 4096, pinned, 4, stream) == kInvalidValue);  // outside device memory
  REQUIRE(cuMemFreeHost(pinned) == 0);
  REQUIRE(cuEventDestroy_v2(event) == 0);
  REQUIRE(cuStreamDestroy_v2(stream) == 0);
  REQUIRE(cuMemFree_v2(d) == 0);
}

TEST_CASE("emulator: NCCL group ids name a shared-memory segment", "[emu]") {
  char id[128] = {};
  REQUIRE(ncclGetUniqueId(id) == 0);
  CHECK(std::string(id).rfind("/gradus-emu-nccl-", 0) == 0);
}
