// ONNX's own backend node tests (Debian's libonnx-testdata): every case whose operators gradus
// imports is loaded, run on each of its data sets and compared with ONNX's expected outputs at
// ONNX's backend tolerance (rtol 1e-3, atol 1e-7, NaN equal to NaN, as numpy's assert_allclose in
// onnx/backend/test/runner). Each case that fails is listed, with its reason, in
// node_test_failures.txt beside this file; the test fails on a failure not listed there, and on
// a listed case that passes (the list stays exact). It writes every case's outcome to
// onnx_node_tests.txt in its working directory, and the count to its output.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>
#include <onnx/onnx_pb.h>

#include "gradus/io/file.hpp"
#include "gradus/onnx.hpp"

namespace fs = std::filesystem;
namespace onnx_g = gradus::onnx;

namespace {

const char* node_tests_dir() {
  const char* env = std::getenv("GRADUS_ONNX_NODE_TESTS");
  return env ? env : "/usr/include/onnx/backend/test/data/node";
}

/// The operator types of a model file, read with ONNX's own classes (not gradus').
std::set<std::string> model_operators(const fs::path& model) {
  ::onnx::ModelProto m;
  const std::string bytes = gradus::io::read_file(model);
  REQUIRE(m.ParseFromString(bytes));
  std::set<std::string> ops;
  for (const auto& n : m.graph().node()) ops.insert((n.domain().empty() ? "" : n.domain() + ":") + n.op_type());
  return ops;
}

/// "" when `got` matches `want` at ONNX's tolerance; else why not.
std::string compare(const onnx_g::Value& got, const onnx_g::Value& want) {
  if (got.index() != want.index()) return "element type differs";
  return std::visit(
      [&](const auto& w) -> std::string {
        using T = std::decay_t<decltype(w)>;
        const T g = std::get<T>(got).to(gradus::cpu);
        if (g.shape() != w.shape()) return "shape " + g.shape().str() + ", expected " + w.shape().str();
        for (int64_t k = 0; k < w.size(); ++k) {
          const double a = double(g.data()[k]), b = double(w.data()[k]);
          if (std::isnan(a) && std::isnan(b)) continue;
          if (!(std::fabs(a - b) <= 1e-7 + 1e-3 * std::fabs(b))) {
            std::ostringstream os;
            os << "element " << k << " is " << a << ", expected " << b;
            return os.str();
          }
        }
        return "";
      },
      want);
}

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (int k = 0;; ++k) {
    fs::path p = dir / (prefix + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p);
  }
  return out;
}

/// Runs one case: "" when every data set matches.
std::string run_case(const fs::path& dir) {
  try {
    onnx_g::Model model = onnx_g::load((dir / "model.onnx").string());
    int sets = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_directory() || entry.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
      ++sets;
      std::vector<onnx_g::Value> inputs, expected;
      for (const auto& p : numbered(entry.path(), "input_")) inputs.push_back(onnx_g::read_tensor(p.string()));
      for (const auto& p : numbered(entry.path(), "output_")) expected.push_back(onnx_g::read_tensor(p.string()));
      const std::vector<onnx_g::Value> got = model.run(inputs);
      if (got.size() < expected.size()) return "fewer outputs than expected";
      for (size_t k = 0; k < expected.size(); ++k)
        if (std::string why = compare(got[k], expected[k]); !why.empty())
          return "output " + std::to_string(k) + ": " + why;
    }
    return sets ? "" : "no data sets";
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    return what;
  }
}

}  // namespace

TEST_CASE("ONNX backend node tests of the imported operators", "[onnx][node-tests]") {
  const fs::path root = node_tests_dir();
  if (!fs::is_directory(root)) {
    WARN("no ONNX node tests at " << root << " (Debian's libonnx-testdata): skipped");
    return;
  }
  const auto supported_list = onnx_g::supported_operators();
  const std::set<std::string> supported(supported_list.begin(), supported_list.end());

  std::map<std::string, std::string> listed;  // case -> reason, from node_test_failures.txt
  {
    std::ifstream in(GRADUS_ONNX_FAILURES_FILE);
    REQUIRE(in);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.find(' ');
      listed[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
    }
  }

  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(root))
    if (entry.is_directory() && fs::exists(entry.path() / "model.onnx")) cases.push_back(entry.path());
  std::sort(cases.begin(), cases.end());

  int total = 0, passed = 0;
  std::ofstream report("onnx_node_tests.txt");
  std::vector<std::string> unexpected_failures, unexpected_passes;
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    const auto ops = model_operators(dir / "model.onnx");
    const bool imported = !ops.empty() && std::all_of(ops.begin(), ops.end(), [&](const std::string& op) {
      return supported.count(op) > 0;
    });
    if (!imported) continue;
    ++total;
    const std::string why = run_case(dir);
    report << name << ' ' << (why.empty() ? "pass" : "FAIL " + why) << '\n';
    if (why.empty()) {
      ++passed;
      if (listed.count(name)) unexpected_passes.push_back(name);
    } else if (!listed.count(name)) {
      unexpected_failures.push_back(name + ": " + why);
    }
  }
  std::cout << "ONNX node tests: " << passed << " of " << total << " cases for the imported operators pass ("
            << cases.size() << " cases in all, " << supported.size() << " operators imported)\n";
  for (const auto& f : unexpected_failures) UNSCOPED_INFO("fails, not listed: " << f);
  for (const auto& p : unexpected_passes) UNSCOPED_INFO("passes, but listed as failing: " << p);
  CHECK(unexpected_failures.empty());
  CHECK(unexpected_passes.empty());
  CHECK(total > 300);
}
