// Walks the op registry (op_registry.hpp, entries in registry_*.cpp). For every sample of every
// op: the forward against its independent reference; the gradient in double against central
// differences (gd::compute_gradient_error), or a zero gradient for ops that pass none; and that
// a warm forward + backward allocates nothing (tests/support/counting_new.cpp counts operator
// new; a sample its entry marks as allocating must still allocate, so the mark goes once the op
// is fixed).
// Each op must have the fused-chain and broadcast samples its entry asks for. Then the names: the
// documented function list (docs/tensors-and-autodiff.md), the public op functions declared in
// include/gradus/ops/ and include/gradus/losses/, and the registry must name the same ops, so an op without an entry
// (or an entry without an op) fails here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "op_registry.hpp"

namespace op_registry {

const std::vector<OpInfo>& registry() {
  static const std::vector<OpInfo> r = [] {
    std::vector<OpInfo> all;
    add_elementwise(all);
    add_binary(all);
    add_reductions(all);
    add_linalg_softmax(all);
    add_shape(all);
    add_nn(all);
    add_losses(all);
    add_xent(all);
    return all;
  }();
  return r;
}

}  // namespace op_registry

namespace {

using namespace op_registry;

std::vector<VarD> leaves(const std::vector<TensorD>& x0) {
  std::vector<VarD> xs;
  for (const TensorD& x : x0) xs.emplace_back(x.clone());
  return xs;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kRoot = GRADUS_TEST_DATA_DIR "/../..";

/// The names in backticks of the documented function list (docs/tensors-and-autodiff.md): the
/// bullets ("- kind: `names`", continued on indented lines) after the line that starts with
/// "Functions (", up to the next blank line; in each, the text after the first ": ".
std::set<std::string> readme_functions() {
  std::istringstream in(read_file(kRoot + "/docs/tensors-and-autodiff.md"));
  std::vector<std::string> bullets;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside) {
      inside = line.rfind("Functions (", 0) == 0;
      continue;
    }
    if (line.empty()) break;
    if (line.rfind("- ", 0) == 0)
      bullets.push_back(line);
    else if (!bullets.empty() && line.rfind("  ", 0) == 0)
      bullets.back() += line;
  }
  std::set<std::string> names;
  for (const std::string& bullet : bullets) {
    const auto colon = bullet.find(": ");
    if (colon == std::string::npos) continue;
    const std::string body = bullet.substr(colon + 2);
    for (size_t a = body.find('`'); a != std::string::npos; a = body.find('`', a)) {
      const size_t b = body.find('`', a + 1);
      if (b == std::string::npos) break;
      std::istringstream words(body.substr(a + 1, b - a - 1));
      for (std::string w; words >> w;) names.insert(w);
      a = b + 1;
    }
  }
  return names;
}

/// C++ text without comments, string and character literals, and preprocessor lines.
std::string strip(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') ++i;
      out += '\n';
    } else if (s.compare(i, 2, "/*") == 0) {
      i = s.find("*/", i + 2);
      if (i == std::string::npos) break;
      ++i;
    } else if (s[i] == '"' || s[i] == '\'') {
      const char q = s[i];
      for (++i; i < s.size() && s[i] != q; ++i)
        if (s[i] == '\\') ++i;
      out += "0";
    } else if (s[i] == '#' && (out.empty() || out.back() == '\n')) {
      while (i < s.size() && !(s[i] == '\n' && s[i - 1] != '\\')) ++i;
      out += '\n';
    } else {
      out += s[i];
    }
  }
  return out;
}

/// The name a declaration `t` (the text before a `{` at namespace scope) defines, if it is a
/// function (`... name(...)`, `... operator@(...)`) or a function object
/// (`inline constexpr type<...> name`); "" otherwise.
std::string declared_name(std::string t) {
  auto trim = [&] {
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  };
  trim();
  for (const std::string q : {"const", "noexcept"})
    if (t.size() > q.size() && t.compare(t.size() - q.size(), q.size(), q) == 0) t.resize(t.size() - q.size()), trim();
  static const std::regex var_re(R"(constexpr\s+\w+<[^>]*>\s+(\w+)\s*$)");
  std::smatch v;
  if (std::regex_search(t, v, var_re)) return v[1];
  if (t.empty() || t.back() != ')') return "";  // a class head or an initialiser
  int depth = 0;
  size_t p = t.size();
  while (p-- > 0) {
    depth += t[p] == ')' ? 1 : t[p] == '(' ? -1 : 0;
    if (depth == 0) break;
  }
  if (p == std::string::npos) return "";  // unbalanced: not a declaration
  size_t e = p;
  while (e > 0 && std::isspace(static_cast<unsigned char>(t[e - 1]))) --e;
  size_t b = e;
  while (b > 0 && (std::isalnum(static_cast<unsigned char>(t[b - 1])) || t[b - 1] == '_')) --b;
  if (b < e) return t.substr(b, e - b);
  const size_t o = t.rfind("operator", e);  // operator@
  if (o == std::string::npos) return "";
  std::string name = t.substr(o + 8, e - o - 8);
  name.erase(std::remove_if(name.begin(), name.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
             name.end());
  return name;
}

/// Public functions (and function objects) that a header declares directly in namespace
/// gradus or gradus::losses: names of definitions at namespace scope, `inline constexpr
/// unary_fn<...> name{}` objects, and operators made by GRADUS_BINARY_OPERATOR.
std::set<std::string> public_functions(const std::string& path) {
  const std::string raw = read_file(path);
  std::set<std::string> names;
  static const std::regex op_macro(R"(GRADUS_BINARY_OPERATOR\(\s*([^,\s]+)\s*,)");
  for (std::sregex_iterator it(raw.begin(), raw.end(), op_macro), end; it != end; ++it)
    if (it->position() < 8 || raw.compare(size_t(it->position()) - 8, 8, "#define ") != 0) names.insert((*it)[1]);
  const std::string s = strip(raw);
  std::vector<std::string> scopes;  // for each open brace: a namespace name, or "" for any other block
  std::string stmt;                 // the text since the last ; { or }
  auto public_scope = [&] {
    std::string ns;
    for (const auto& n : scopes) {
      if (n.empty()) return false;
      ns += (ns.empty() ? "" : "::") + n;
    }
    return ns == "gradus" || ns == "gradus::losses";
  };
  static const std::regex ns_re(R"((?:^|\W)namespace\s+([\w:]+)\s*$)");
  int parens = 0;  // braces inside parentheses (`opts = {}`) belong to the declaration
  for (char c : s) {
    parens += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (parens > 0 && (c == '{' || c == '}' || c == ';')) {
      stmt += c;
    } else if (c == '{') {
      std::smatch m;
      if (std::regex_search(stmt, m, ns_re)) {
        scopes.push_back(m[1]);  // `namespace a::b {` is one scope named a::b
      } else {
        if (public_scope()) {
          const std::string name = declared_name(stmt);
          if (!name.empty()) names.insert(name);
        }
        scopes.emplace_back();
      }
      stmt.clear();
    } else if (c == '}') {
      if (!scopes.empty()) scopes.pop_back();
      stmt.clear();
    } else if (c == ';') {
      stmt.clear();
    } else {
      stmt += c;
    }
  }
  return names;
}

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& n : s) out += (out.empty() ? "" : " ") + n;
  return out;
}

bool close(double v, double r, double tol) {
  if (std::isnan(v) || std::isnan(r)) return false;
  if (std::isinf(r)) return v == r;
  return std::abs(v - r) <= tol * std::max(1.0, std::abs(r));
}

}  // namespace

TEST_CASE("registry: every sample's forward matches its independent reference", "[registry]") {
  for (const OpInfo& op : registry()) {
    for (const OpSample& s : op.samples) {
      INFO("op " << op.name << ", sample \"" << s.label << '"');
      const std::vector<VarD> xs = leaves(s.inputs);
      const TensorD y = gd::eval(s.call(xs));
      const TensorD ref = s.reference(s.inputs);
      REQUIRE(y.shape() == ref.shape());
      int bad = 0;
      for (int64_t i = 0; i < y.size() && bad < 3; ++i)
        if (!close(y.data()[i], ref.data()[i], s.forward_tolerance)) {
          ++bad;
          FAIL_CHECK("element " << i << ": " << y.data()[i] << " vs reference " << ref.data()[i]);
        }
    }
  }
}

TEST_CASE("registry: every sample's gradient matches central differences in double", "[registry]") {
  for (const OpInfo& op : registry()) {
    for (const OpSample& s : op.samples) {
      INFO("op " << op.name << ", sample \"" << s.label << '"');
      if (s.check_gradient) {
        REQUIRE_FALSE(s.inputs.empty());
        const double err = gd::compute_gradient_error(s.call, s.inputs, {.delta = s.delta});
        CHECK(err <= s.gradient_tolerance);
      } else if (!op.differentiable && !s.inputs.empty()) {
        // no gradient: a zero one (or none recorded at all)
        const std::vector<VarD> xs = leaves(s.inputs);
        const VarD y = s.call(xs);
        if (y.requires_grad())
          for (const TensorD& g : gd::gradients(y, xs))
            for (const double v : g) CHECK(v == 0.0);
      }
    }
  }
}

TEST_CASE("registry: a warm forward and backward of every sample allocates nothing", "[registry][memory]") {
  for (const OpInfo& op : registry()) {
    for (const OpSample& s : op.samples) {
      INFO("op " << op.name << ", sample \"" << s.label << '"');
      std::vector<VarD> xs = leaves(s.inputs);
      auto step = [&] {
        const VarD y = s.call(xs);
        if (y.requires_grad()) gd::backward(y);
        for (VarD& x : xs) x.zero_grad();
      };
      step();
      step();
      const long before = allocations();
      step();
      const long n = allocations() - before;
      if (s.steady_state) {
        CHECK(n == 0);
      } else {  // marked in its entry as allocating: the mark goes when the op stops
        INFO("the entry says this sample allocates when warm; it no longer does: remove the mark");
        CHECK(n > 0);
      }
    }
  }
}

TEST_CASE("registry: each op has the samples its entry asks for", "[registry]") {
  std::set<std::string> seen;
  for (const OpInfo& op : registry()) {
    INFO("op " << op.name);
    CHECK(seen.insert(op.name).second);  // listed once
    CHECK_FALSE(op.samples.empty());
    unsigned kinds = 0;
    bool gradient = false;
    for (const OpSample& s : op.samples) kinds |= s.kinds, gradient = gradient || s.check_gradient;
    if (op.needs_fused) CHECK((kinds & gd::ops::kind::fused) != 0);
    if (op.needs_broadcast) CHECK((kinds & gd::ops::kind::broadcast) != 0);
    if (op.needs_repeated) CHECK((kinds & gd::ops::kind::repeated) != 0);
    CHECK(gradient == op.differentiable);
  }
}

TEST_CASE("registry: the documented function list and the registry name the same ops", "[registry]") {
  std::set<std::string> reg;
  for (const OpInfo& op : registry()) reg.insert(op.name);
  const std::set<std::string> readme = readme_functions();
  REQUIRE(readme.size() > 20);
  std::set<std::string> only_readme, only_registry;
  std::set_difference(readme.begin(), readme.end(), reg.begin(), reg.end(), std::inserter(only_readme, only_readme.end()));
  std::set_difference(reg.begin(), reg.end(), readme.begin(), readme.end(), std::inserter(only_registry, only_registry.end()));
  INFO("in the documentation only: " << join(only_readme));
  INFO("in the registry only: " << join(only_registry));
  CHECK(only_readme.empty());
  CHECK(only_registry.empty());
}

TEST_CASE("registry: every public op function in ops/ and losses/ has an entry, and every entry an op", "[registry]") {
  // public functions of these headers that are not ops (no tensor computation to check)
  const std::set<std::string> not_ops{"to_string"};  // gd::to_string(gd::Combiner)
  // every header of the two folders (a new op header is scanned without being listed here)
  std::vector<std::string> headers;
  for (const char* dir : {"ops", "losses"})
    for (const auto& e : std::filesystem::directory_iterator(kRoot + "/include/gradus/" + dir))
      if (e.path().extension() == ".hpp")
        headers.push_back(std::string(dir) + "/" + e.path().filename().string());
  REQUIRE(headers.size() >= 9);
  std::set<std::string> declared;
  for (const auto& h : headers) {
    const auto n = public_functions(kRoot + "/include/gradus/" + h);
    declared.insert(n.begin(), n.end());
  }
  for (const auto& n : not_ops) declared.erase(n);
  std::set<std::string> reg;
  for (const OpInfo& op : registry()) reg.insert(op.name);
  std::set<std::string> missing, extra;
  std::set_difference(declared.begin(), declared.end(), reg.begin(), reg.end(), std::inserter(missing, missing.end()));
  std::set_difference(reg.begin(), reg.end(), declared.begin(), declared.end(), std::inserter(extra, extra.end()));
  INFO("public op functions without a registry entry: " << join(missing));
  INFO("registry entries without a public function: " << join(extra));
  CHECK(missing.empty());
  CHECK(extra.empty());
}

TEST_CASE("registry: the source scan finds a function that is added", "[registry]") {
  // the scanner itself: a header with one op in gradus, one in detail and one in gradus::losses
  const std::string path = (std::filesystem::temp_directory_path() / "gradus_registry_scan_probe.hpp").string();
  {
    std::ofstream out(path);
    out << "namespace gradus {\nnamespace detail { inline int helper(int x) { return x; } }\n"
           "/// a comment: auto fake(int) {\ntemplate <Expression E>\n  requires(Real<E>)\nauto new_op(const E& e, "
           "int a = f(1), Options o = {}) {\n  return e; }\ninline constexpr unary_fn<ops::Exp> new_fn{};\n"
           "struct Options { int x = 1; };\nGRADUS_BINARY_OPERATOR(%, ops::Mod)\n"
           "namespace losses { template <class L> auto new_loss(const L& l) { return l; } }\n}\n";
  }
  const std::set<std::string> found = public_functions(path);
  std::filesystem::remove(path);
  CHECK(found == std::set<std::string>{"%", "new_fn", "new_loss", "new_op"});
}
