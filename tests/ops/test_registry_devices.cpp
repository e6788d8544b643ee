// The registry's device pass (PyTorch's OpInfo device x dtype matrix): every sample of every op
// runs on every device this process has — the CPU, and a CUDA GPU when gd::cuda::is_available()
// (a real one, or the emulated device of tests/gpu_emu under ctest's label gpu-emu) — in double
// and, for samples written for any element type, in float. The forward value and the gradient of
// sum(y * w) for a fixed cotangent w (so every output element counts with its own weight) with
// respect to every leaf are compared with the CPU's double results: double to 1e-12 relative,
// float to OpSample::float_ulps units in the last place of float (both relative to
// max(1, |CPU double|)). Samples where one leaf appears several times (kind::repeated) catch
// gradients that a backend writes instead of adding.
//
// An op whose entry lists a device type in no_kernel_on must throw gd::device_error there for at
// least one sample (else the mark is stale and the test fails); an op without the mark must run
// every sample. The README's table of ops by device is generated from those marks and checked here
// ("[readme]"; GRADUS_UPDATE_DOCS=1 rewrites it).
#include <catch2/catch.hpp>

#include <cfloat>
#include <cstdlib>
#include <set>
#include <sstream>

#include "../support/files.hpp"
#include "op_registry.hpp"

namespace {

using namespace op_registry;

/// One run of a sample: its value and the gradient of sum(y * w) for each leaf, on the CPU.
template <class T>
struct Run {
  gd::Tensor<T> value;
  std::vector<gd::Tensor<T>> gradients;  ///< empty: the result needs no gradient
};

/// The cotangent of a result of shape `s`: fixed values in [0.5, 1.5], a different one for each
/// element.
TensorD cotangent(const gd::Shape& s) { return uniform(s, 7001, 0.5, 1.5); }

template <class T>
Run<T> run(const OpSample& s, const std::function<gd::Var<T>(const std::vector<gd::Var<T>>&)>& call, gd::Device device,
           bool differentiable) {
  sample_device() = device;
  struct Reset {
    ~Reset() { sample_device() = gd::cpu; }
  } reset;
  std::vector<gd::Var<T>> xs;
  for (const TensorD& x : s.inputs) xs.emplace_back(convert<T>(x).to(device));
  const gd::Var<T> y = call(xs);
  Run<T> r{.value = gd::eval(y).to(gd::cpu), .gradients = {}};
  if (differentiable && y.requires_grad() && !xs.empty()) {
    const gd::Tensor<T> w = convert<T>(cotangent(y.shape())).to(device);
    for (const gd::Tensor<T>& g : gd::gradients(gd::sum(y * w), xs)) r.gradients.push_back(g.to(gd::cpu));
  }
  return r;
}

/// Checks `got` against the CPU's double result: |got - ref| <= tol * max(1, |ref|), NaNs and
/// infinities equal. Reports at most three elements.
template <class T>
void compare(const gd::Tensor<T>& got, const TensorD& ref, double tol, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == ref.shape());
  int bad = 0;
  for (int64_t i = 0; i < ref.size() && bad < 3; ++i) {
    const double g = double(got.data()[i]), r = ref.data()[i];
    const bool ok = std::isnan(r) ? std::isnan(g) : std::isinf(r) ? g == r : std::abs(g - r) <= tol * std::max(1.0, std::abs(r));
    if (!ok) {
      ++bad;
      FAIL_CHECK("element " << i << ": " << g << ", the CPU in double gives " << r << " (tolerance " << tol << ")");
    }
  }
}

template <class T>
void compare(const Run<T>& got, const Run<double>& ref, double tol, const std::string& where) {
  compare(got.value, ref.value, tol, where + ": the value");
  REQUIRE(got.gradients.size() == ref.gradients.size());
  for (size_t k = 0; k < ref.gradients.size(); ++k)
    compare(got.gradients[k], ref.gradients[k], tol, where + ": the gradient of leaf " + std::to_string(k));
}

/// The devices of this process: the CPU, and the first CUDA GPU where there is one.
std::vector<gd::Device> devices() {
  std::vector<gd::Device> d{gd::cpu};
  if (gd::cuda::is_available())
    d.push_back(gd::cuda(0));
  else
    WARN("no GPU: " << gd::cuda::unavailable_reason());  // the device pass runs on the CPU alone
  return d;
}

bool marked(const OpInfo& op, gd::DeviceType t) {
  return std::find(op.no_kernel_on.begin(), op.no_kernel_on.end(), t) != op.no_kernel_on.end();
}

const std::string kReadme = GRADUS_TEST_DATA_DIR "/../../README.md";

/// The README's table of ops by device, from the registry's no_kernel_on marks.
std::string ops_by_device_table() {
  const std::vector<OpInfo>& reg = registry();
  std::ostringstream out;
  out << "| device | element types | ops that run there | ops without a kernel there |\n|---|---|---:|---|\n";
  for (gd::DeviceType t : {gd::DeviceType::cpu, gd::DeviceType::cuda}) {
    std::set<std::string> missing;
    for (const OpInfo& op : reg)
      if (marked(op, t)) missing.insert(op.name);
    std::string names;
    for (const std::string& n : missing) names += (names.empty() ? "`" : ", `") + n + "`";
    out << "| " << (t == gd::DeviceType::cpu ? "CPU (`gd::cpu`)" : "CUDA GPU (`gd::cuda(i)`)") << " | float, double | "
        << reg.size() - missing.size() << " of " << reg.size() << " | " << (names.empty() ? "none" : names) << " |\n";
  }
  return out.str();
}

}  // namespace

TEST_CASE("registry: every sample on every device, in float and double, matches the CPU in double", "[registry][device]") {
  const std::vector<gd::Device> devs = devices();
  for (const OpInfo& op : registry()) {
    std::vector<Run<double>> refs;  // each sample on the CPU in double, once for every device
    for (const OpSample& s : op.samples) {
      INFO("op " << op.name << ", sample \"" << s.label << "\" on the CPU in double");
      refs.push_back(run<double>(s, s.call, gd::cpu, op.differentiable));
    }
    for (const gd::Device& device : devs) {
      bool threw = false;  // the device's backend has no kernel for one of the op's samples
      for (size_t k = 0; k < op.samples.size(); ++k) {
        const OpSample& s = op.samples[k];
        const Run<double>& ref = refs[k];
        INFO("op " << op.name << ", sample \"" << s.label << "\" on " << device);
        try {
          if (device != gd::Device(gd::cpu)) compare(run<double>(s, s.call, device, op.differentiable), ref, 1e-12, "double");
          if (s.call_float)
            compare(run<float>(s, s.call_float, device, op.differentiable), ref, s.float_ulps * FLT_EPSILON, "float");
        } catch (const gd::device_error& e) {
          threw = true;
          if (!marked(op, device.type)) FAIL_CHECK("no kernel on " << device << ": " << e.what());
        } catch (const std::exception& e) {
          FAIL_CHECK("threw: " << e.what());
        }
      }
      if (marked(op, device.type)) {
        INFO("op " << op.name << " on " << device);
        INFO("its entry says the " << gd::device_type_name(device.type)
                                   << " backend has no kernel for it, but every sample ran: remove the mark");
        CHECK(threw);
      }
    }
  }
}

TEST_CASE("registry: every sample is also written for float", "[registry][device]") {
  // a call written for std::vector<VarD> alone is kept in double only (op_registry.hpp: sample)
  for (const OpInfo& op : registry())
    for (const OpSample& s : op.samples) {
      INFO("op " << op.name << ", sample \"" << s.label << "\": write its call as [](const auto& v) {...}");
      CHECK(static_cast<bool>(s.call_float));
    }
}

TEST_CASE("registry: the README's table of ops by device is the registry's", "[registry][readme]") {
  const std::string begin = "<!-- ops by device: generated from the op registry by tests/ops/test_registry_devices.cpp -->\n";
  const std::string end = "<!-- end of ops by device -->";
  const std::string text = gradus_test::slurp_existing(kReadme);
  const size_t b = text.find(begin), e = text.find(end);
  INFO("README.md needs the lines\n" << begin << "and\n" << end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  REQUIRE(b < e);
  const std::string now = text.substr(b + begin.size(), e - b - begin.size()), table = ops_by_device_table();
  if (now != table && std::getenv("GRADUS_UPDATE_DOCS")) {
    gradus_test::spit(kReadme, text.substr(0, b + begin.size()) + table + text.substr(e));
    WARN("README.md: the table of ops by device rewritten");
    return;
  }
  INFO("the generated table (GRADUS_UPDATE_DOCS=1 writes it into README.md):\n" << table);
  CHECK(now == table);
}
