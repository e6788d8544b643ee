// A backend that lives outside the library, registered at run time the way any third backend
// would be (docs/architecture.md, "Adding a backend"): a device type of its own, memory behind
// core/'s DeviceHooks (host memory here, so the test can read it), and a subset of the kernels
// of backend/kernels.hpp written as plain loops below — fill, add_into, GEMM, softmax, max/min
// along an axis, argmax/argmin and one-hot. Nothing in the library names it.
//
// Every sample of the op registry then runs on it: a sample whose ops all have kernels there
// must give the CPU's forward values and gradients (and the ops with kernels must have run the
// test backend's, not the CPU's); a sample that needs a kernel the backend lacks must fail with a gd::device_error that
// names the device, never with another error or a wrong result.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "gradus/backend/cuda/memory.hpp"
#include "op_registry.hpp"

namespace {

namespace gd = gradus;
namespace be = gradus::backend;
using be::AxisView;

/// Calls of each kernel of the test backend, by kernel name.
std::map<std::string, int>& calls() {
  static std::map<std::string, int> c;
  return c;
}

/// The test device's memory: host memory, through the caching allocator a device backend uses.
struct HostBlocks {
  void* allocate(size_t bytes) { return std::malloc(bytes); }
  void free(void* p) { std::free(p); }
};
gd::backend::cuda::BlockCache<HostBlocks>* g_blocks = nullptr;

/// Calls f(base, line) for each line of the [outer, n, inner] view `v`: `base` is the offset of
/// the line's first element (its j-th is at base + j * v.inner), `line` its index in the output.
template <class F>
void for_each_line(const AxisView& v, F&& f) {
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) f(o * v.n * v.inner + i, o * v.inner + i);
}

template <class T>
void register_kernels(gd::DeviceType t) {
  be::register_kernel<be::kernel::Fill, T>(t, [](T* d, int64_t n, T v, gd::Device) {
    ++calls()["fill"];
    std::fill_n(d, n, v);
  });
  be::register_kernel<be::kernel::AddInto, T>(t, [](T* d, const T* s, int64_t n, gd::Device) {
    ++calls()["add_into"];
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  });
  be::register_kernel<be::kernel::Gemm, T>(
      t, [](const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add, gd::Device) {
        ++calls()["gemm"];
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            T s = 0;
            for (int64_t p = 0; p < k; ++p) s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
            c[i * n + j] = add ? c[i * n + j] + s : s;
          }
      });
  be::register_kernel<be::kernel::Softmax, T>(t, [](const AxisView& v, const T* x, T* y, bool log, gd::Device) {
    ++calls()["softmax"];
    for_each_line(v, [&](int64_t base, int64_t) {
      T m = x[base];
      for (int64_t j = 1; j < v.n; ++j) m = std::max(m, x[base + j * v.inner]);
      T s = 0;
      for (int64_t j = 0; j < v.n; ++j) s += std::exp(x[base + j * v.inner] - m);
      for (int64_t j = 0; j < v.n; ++j) {
        const T z = x[base + j * v.inner] - m;
        y[base + j * v.inner] = log ? z - std::log(s) : std::exp(z) / s;
      }
    });
  });
  be::register_kernel<be::kernel::SoftmaxBackward, T>(
      t, [](const AxisView& v, const T* y, const T* g, T* dx, bool log, gd::Device) {
        ++calls()["softmax_backward"];
        for_each_line(v, [&](int64_t base, int64_t) {
          T s = 0;
          for (int64_t j = 0; j < v.n; ++j) s += log ? g[base + j * v.inner] : g[base + j * v.inner] * y[base + j * v.inner];
          for (int64_t j = 0; j < v.n; ++j) {
            const int64_t k = base + j * v.inner;
            dx[k] = log ? g[k] - std::exp(y[k]) * s : y[k] * (g[k] - s);
          }
        });
      });
  be::register_kernel<be::kernel::ReduceExtremum, T>(t, [](const AxisView& v, const T* x, T* y, bool mx, gd::Device) {
    ++calls()["reduce_extremum"];
    for_each_line(v, [&](int64_t base, int64_t r) {
      T e = x[base];
      for (int64_t j = 1; j < v.n; ++j) e = mx ? std::max(e, x[base + j * v.inner]) : std::min(e, x[base + j * v.inner]);
      y[r] = e;
    });
  });
  be::register_kernel<be::kernel::ReduceExtremumBackward, T>(
      t, [](const AxisView& v, const T* x, const T* y, const T* g, T* dx, gd::Device) {
        ++calls()["reduce_extremum_backward"];
        for_each_line(v, [&](int64_t base, int64_t r) {
          int ties = 0;
          for (int64_t j = 0; j < v.n; ++j) ties += x[base + j * v.inner] == y[r];
          for (int64_t j = 0; j < v.n; ++j) dx[base + j * v.inner] = x[base + j * v.inner] == y[r] ? g[r] / T(ties) : T(0);
        });
      });
  be::register_kernel<be::kernel::ReduceArg, T>(t, [](const AxisView& v, const T* x, int64_t* out, bool mx, gd::Device) {
    ++calls()["reduce_arg"];
    for_each_line(v, [&](int64_t base, int64_t r) {
      int64_t best = 0;
      for (int64_t j = 1; j < v.n; ++j) {
        const T a = x[base + j * v.inner], b = x[base + best * v.inner];
        if (mx ? a > b : a < b) best = j;
      }
      out[r] = best;
    });
  });
  be::register_kernel<be::kernel::OneHot, T>(
      t, [](const int64_t* labels, int64_t count, int64_t depth, T on, T off, T* out, gd::Device) {
        ++calls()["one_hot"];
        for (int64_t i = 0; i < count * depth; ++i) out[i] = labels[i / depth] == i % depth ? on : off;
      });
}

/// The test device, registered on first use: memory hooks and the kernels above.
gd::Device test_device() {
  static const gd::DeviceType type = [] {
    const gd::DeviceType t = gd::register_device_type("testdev");
    g_blocks = new gd::backend::cuda::BlockCache<HostBlocks>(HostBlocks{}, gd::Device{t, 0});
    gd::DeviceHooks& h = gd::device_hooks(t);
    h.allocate = [](gd::Device, size_t bytes) { return g_blocks->allocate(bytes); };
    h.copy = [](void* dst, gd::Device, const void* src, gd::Device, size_t bytes) { std::memcpy(dst, src, bytes); };
    register_kernels<float>(t);
    register_kernels<double>(t);
    return t;
  }();
  return gd::Device{type, 0};
}

bool close(const gd::Tensor<double>& got, const gd::Tensor<double>& want, double tol) {
  if (got.shape() != want.shape()) return false;
  for (int64_t i = 0; i < got.size(); ++i) {
    const double a = got.data()[i], b = want.data()[i];
    if (std::isnan(a) != std::isnan(b)) return false;
    if (!std::isnan(b) && std::abs(a - b) > tol * std::max(1.0, std::abs(b))) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("backend: a backend registered outside the library has its own device type and name",
          "[backend][registry]") {
  const gd::Device dev = test_device();
  std::ostringstream os;
  os << dev;
  CHECK(os.str() == "testdev:0");
  CHECK(gd::register_device_type("testdev") == dev.type);  // registering again finds it
  CHECK(be::implements<be::kernel::Gemm, float>(dev));
  CHECK_FALSE(be::implements<be::kernel::Conv2d, float>(dev));
  CHECK(be::implements<be::kernel::Conv2d, float>(gd::cpu));

  // a tensor round-trips through its memory, and a kernel it lacks names the op and the device
  const gd::Tensor<float> x = gd::Tensor<float>::full({2, 3}, 1.5f).to(dev);
  CHECK(x.device() == dev);
  CHECK(x.to(gd::cpu).data()[5] == 1.5f);
  const gd::Tensor<float> w = gd::Tensor<float>::full({1, 1, 3, 2}, 1.f).to(dev);
  CHECK_THROWS_AS(gd::conv2d(x.reshape({1, 2, 1, 3}), w), gd::device_error);
  CHECK_THROWS_WITH(gd::conv2d(x.reshape({1, 2, 1, 3}), w),
                    Catch::Contains("conv2d") && Catch::Contains("testdev backend has no float kernel") &&
                        Catch::Contains("testdev:0"));
  CHECK_THROWS_WITH(gd::eval(gd::exp(x)), Catch::Contains("elementwise") && Catch::Contains("testdev:0"));
}

TEST_CASE("backend: the registry's samples run on a backend registered outside the library", "[backend][registry]") {
  const gd::Device dev = test_device();
  std::set<std::string> ran_ops, refused_ops;
  std::map<std::string, std::set<std::string>> kernels_run;  // by op: the test backend's kernels it ran
  int ran = 0, refused = 0;
  for (const gd::ops::OpInfo& op : op_registry::registry()) {
    for (const gd::ops::OpSample& s : op.samples) {
      INFO(op.name << " [" << s.label << "]");
      std::vector<gd::Var<double>> xs, host;
      for (const gd::Tensor<double>& x : s.inputs) {
        xs.emplace_back(x.to(dev));
        host.emplace_back(x.clone());
      }
      calls().clear();
      try {
        const gd::Var<double> y = s.call(xs);
        const gd::Tensor<double> got = y.value().to(gd::cpu);
        const gd::Var<double> want = s.call(host);
        CHECK(close(got, want.value(), std::max(s.forward_tolerance, 1e-12)));
        if (y.requires_grad()) {  // the gradients, from a seed of ones on each device
          const gd::Tensor<double> ones = gd::Tensor<double>::full(y.shape(), 1.0);
          const gd::Tensor<double> seed = ones.to(dev);
          const std::vector<gd::Tensor<double>> g = gd::gradients(y, xs, &seed);
          const std::vector<gd::Tensor<double>> gw = gd::gradients(want, host, &ones);
          for (size_t i = 0; i < g.size(); ++i) CHECK(close(g[i].to(gd::cpu), gw[i], 1e-10));
        }
        ++ran;
        ran_ops.insert(op.name);
        for (const auto& [kernel, n] : calls()) kernels_run[op.name].insert(kernel);
      } catch (const gd::device_error& e) {
        CHECK_THAT(e.what(), Catch::Contains("testdev"));
        ++refused;
        refused_ops.insert(op.name);
      }
    }
  }
  INFO(ran << " samples ran on the test backend, " << refused << " were refused");
  // these ran through the test backend's own kernels, forward and backward (views such as
  // reshape run anywhere without a kernel)
  const std::map<std::string, std::set<std::string>> expected = {
      {"matmul", {"gemm"}},
      {"softmax", {"softmax", "softmax_backward"}},
      {"log_softmax", {"softmax", "softmax_backward"}},
      {"max", {"reduce_extremum", "reduce_extremum_backward"}},
      {"min", {"reduce_extremum", "reduce_extremum_backward"}}};
  for (const auto& [name, kernels] : expected) {
    INFO(name);
    CHECK(ran_ops.count(name) == 1);
    for (const std::string& k : kernels) CHECK(kernels_run[name].count(k) == 1);
  }
  CHECK(refused > 0);
  CHECK(ran > 5);
}
