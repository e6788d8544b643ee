// The CUDA runtime pieces that work without a GPU: gd::cuda(i) and the driver check, and NVRTC
// compiling CUDA C++ to PTX for the architectures gradus targets (sm_80, sm_90). Where NVRTC is
// not installed the NVRTC cases say so and skip; where a GPU is present, cuda(0) must succeed.
#include <catch2/catch.hpp>
#include <gradus/gradus.hpp>
#include <cstdio>
#include <sstream>

namespace gd = gradus;
namespace cu = gradus::backend::cuda;

TEST_CASE("Device prints and compares", "[cuda][device]") {
  std::ostringstream os;
  os << gd::cpu << ' ' << gd::Device{gd::DeviceType::cuda, 1};
  CHECK(os.str() == "cpu cuda:1");
  CHECK(gd::cpu == gd::Device{});
  CHECK(gd::cpu.is_cpu());
  CHECK_FALSE((gd::Device{gd::DeviceType::cuda, 0} == gd::Device{gd::DeviceType::cuda, 1}));
}

TEST_CASE("cuda(i) checks the driver and the ordinal", "[cuda][device]") {
  if (!gd::cuda::is_available()) {
    INFO("no usable CUDA driver here: " << gd::cuda::unavailable_reason());
    CHECK(gd::cuda::device_count() == 0);
    CHECK_FALSE(gd::cuda::unavailable_reason().empty());
    try {
      gd::Device d = gd::cuda(0);
      FAIL("cuda(0) returned " << d << " without a driver");
    } catch (const gd::device_error& e) {
      const std::string what = e.what();
      CHECK(what.rfind("cuda(0): ", 0) == 0);
      CHECK(what.find(gd::cuda::unavailable_reason()) != std::string::npos);
      CHECK(what.find("check gd::cuda::is_available() first and fall back to gd::cpu") != std::string::npos);
    }
    return;
  }
  const gd::Device d = gd::cuda(0);
  CHECK(d == gd::Device{gd::DeviceType::cuda, 0});
  CHECK_FALSE(gd::cuda(0).name().empty());
  CHECK(gd::cuda(0).compute_capability() >= 50);
  CHECK_THROWS_AS(gd::cuda(gd::cuda::device_count()), gd::device_error);
  CHECK_THROWS_AS(gd::cuda(-1), gd::device_error);
}

TEST_CASE("NVRTC compiles CUDA C++ to PTX for sm_80 and sm_90", "[cuda][nvrtc]") {
  if (!cu::nvrtc_available()) {
    WARN("NVRTC not found, skipped: " << cu::Nvrtc::get().problem);
    return;
  }
  const std::string src = R"(
    extern "C" __global__ void axpy(float a, const float* __restrict__ x, float* __restrict__ y, long n) {
      const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
      if (i < n) y[i] = fmaf(a, x[i], y[i]);
    })";
  for (const char* arch : {"compute_80", "compute_90"}) {
    INFO(arch);
    const std::string ptx = cu::compile_ptx(src, "axpy.cu", arch);
    CHECK(ptx.find(".entry axpy") != std::string::npos);
    CHECK(ptx.find(std::string(".target sm_") + (arch + 8)) != std::string::npos);
    CHECK(ptx.find("fma.rn.f32") != std::string::npos);  // the multiply-add survived as one instruction
  }
}

TEST_CASE("NVRTC errors carry the compiler's log", "[cuda][nvrtc]") {
  if (!cu::nvrtc_available()) {
    WARN("NVRTC not found, skipped: " << cu::Nvrtc::get().problem);
    return;
  }
  try {
    cu::compile_ptx("__global__ void k() { not_declared(); }", "broken.cu", "compute_80");
    FAIL("a kernel calling an undeclared function compiled");
  } catch (const gd::device_error& e) {
    const std::string what = e.what();
    CHECK(what.find("broken.cu") != std::string::npos);
    CHECK(what.find("compute_80") != std::string::npos);
    CHECK(what.find("not_declared") != std::string::npos);  // NVRTC's own diagnostic
  }
  CHECK_THROWS_AS(cu::compile_ptx("__global__ void k() {}", "arch.cu", "compute_1"), gd::device_error);
}

TEST_CASE("cuBLAS is opened at run time, or its absence is a clear reason", "[cuda][blas]") {
  const cu::Cublas& c = cu::Cublas::get();
  if (std::FILE* f = std::fopen("/usr/local/cuda/lib64/libcublas.so", "rb")) {
    std::fclose(f);
    CHECK(c.problem.empty());  // the toolkit's cuBLAS loads without a GPU: only its handle needs one
    CHECK(c.library.find("libcublas.so") != std::string::npos);
  } else {
    CHECK(c.problem.find("cuBLAS not found") != std::string::npos);
  }
}
