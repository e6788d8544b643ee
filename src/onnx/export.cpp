// src/onnx/export.cpp — the tracer behind gd::onnx::export_model: an op observer that records
// the outermost ops of one forward pass (their operands, settings and, for an elementwise
// expression, its program), then writes each as ONNX nodes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include "gradus/core/error.hpp"
#include "gradus/core/op_events.hpp"
#include "gradus/io/file.hpp"
#include "gradus/onnx/export.hpp"

namespace gradus::onnx::detail {

using gradus::detail::str;

namespace {

struct Operand {
  uint64_t seq = 0;
  Shape shape;
  std::string name;  // known at describe time: a parameter, buffer, input or earlier result
  std::optional<Tensor<float>> constant;  // else the value, copied
};

struct Record {
  std::string op, scope, program;
  std::vector<int64_t> ints;
  double real = 0;
  std::string text;
  std::vector<Operand> in;
  std::string int_input;                   // gather's indices when they are a graph input
  std::optional<Tensor<int64_t>> indices;  // else their values
  uint64_t out_seq = 0;
  Shape out_shape;
};

const char* const kNoForm = " has no ONNX form in gd::onnx::export_model";
/// The doc_string of an initializer that holds a module's buffer (a statistic, not a parameter).
const char* const kBufferDoc = "gradus buffer";
/// The doc_string of an initializer that holds a constant of the forward pass (no parameter).
const char* const kConstantDoc = "gradus constant";

}  // namespace

struct Tracer::State final : gradus::detail::OpObserver {
  ExportOptions opt;
  std::map<uint64_t, std::string> names;  // tape node -> value name
  std::vector<std::pair<std::string, Tensor<float>>> initial;  // parameters and buffers, by name
  std::map<const void*, std::string> buffer_by_data;
  std::set<std::string> buffer_names;
  std::map<const void*, std::string> module_paths;
  struct GraphInput {
    std::string name;
    int type;  // 1 float, 7 int64
    Shape shape;
    const void* int_data = nullptr;
  };
  std::vector<GraphInput> inputs;
  std::vector<gradus::detail::OpPhase> phases;
  std::vector<std::string> scopes;
  std::vector<Record> records;
  std::vector<std::string> problems;
  gradus::detail::OpObserver* previous = nullptr;
  bool installed = false;
  std::string output_name;
  Shape output_shape;
  int next_value = 0;

  std::string input_name(size_t k, size_t n) const {
    if (k < opt.input_names.size()) return opt.input_names[k];
    return n == 1 ? "input" : "input_" + std::to_string(k);
  }

  void begin(gradus::detail::OpPhase phase, std::string_view) override { phases.push_back(phase); }
  void end() override {
    if (!phases.empty()) phases.pop_back();
  }
  void set_flops(double) override {}
  void enter_module(const void* module, const std::type_info&) override {
    auto it = module_paths.find(module);
    scopes.push_back(it == module_paths.end() ? (scopes.empty() ? "" : scopes.back()) : it->second);
  }
  void leave_module() override {
    if (!scopes.empty()) scopes.pop_back();
  }
  bool wants_programs() const override { return true; }

  void describe(const gradus::detail::OpDescription& d) override {
    if (phases.empty() || phases.back() != gradus::detail::OpPhase::forward) return;
    const auto forward = std::count(phases.begin(), phases.end(), gradus::detail::OpPhase::forward);
    if (forward != 1) return;  // an op run inside another op: the outer one is exported
    Record r;
    r.op = d.op ? d.op : "?";
    r.scope = scopes.empty() ? "" : scopes.back();
    r.program = d.program;
    r.ints.assign(d.attrs.ints.begin(), d.attrs.ints.begin() + d.attrs.n_ints);
    r.real = d.attrs.real;
    r.text = std::string(d.attrs.text);
    if (d.dtype && std::string_view(d.dtype) != "float32") {
      problems.push_back(str("op ", r.op, " computes in ", d.dtype, "; export_model writes float32 models"));
      return;
    }
    for (int i = 0; i < d.n_inputs; ++i) {
      Operand o;
      o.seq = d.input_nodes[size_t(i)];
      o.shape = d.inputs[size_t(i)];
      const auto* t = static_cast<const Tensor<float>*>(d.input_values[size_t(i)]);
      if (auto it = names.find(o.seq); o.seq && it != names.end()) {
        o.name = it->second;
      } else if (auto b = t ? buffer_by_data.find(t->device_data()) : buffer_by_data.end(); b != buffer_by_data.end()) {
        o.name = b->second;
      } else if (t) {
        o.constant = t->to(gradus::cpu).clone();
      } else {
        problems.push_back(str("op ", r.op, ": operand ", i, " has no value to export"));
      }
      r.in.push_back(std::move(o));
    }
    if (d.attrs.int_tensor) {
      const auto* ids = static_cast<const Tensor<int64_t>*>(d.attrs.int_tensor);
      for (const GraphInput& in : inputs)
        if (in.int_data && in.int_data == static_cast<const void*>(ids->device_data())) r.int_input = in.name;
      if (r.int_input.empty()) r.indices = ids->to(gradus::cpu).clone();
    }
    r.out_seq = d.node;
    r.out_shape = d.output;
    if (r.out_seq) names[r.out_seq] = "v" + std::to_string(next_value++);
    records.push_back(std::move(r));
  }
};

Tracer::Tracer(const ExportOptions& options) : s_(std::make_unique<State>()) {
  GRADUS_CHECK(value_error, options.opset >= 13 && options.opset <= 17, "onnx::export_model: opset ", options.opset,
               " is not one of 13 to 17");
  s_->opt = options;
}
Tracer::~Tracer() { stop(); }

void Tracer::module_path(const void* module, const std::string& path) { s_->module_paths[module] = path; }
void Tracer::parameter(const std::string& name, const Var<float>& v) {
  if (v.node()) s_->names[v.node()->seq] = name;
  s_->initial.emplace_back(name, v.value().to(gradus::cpu));
}
void Tracer::buffer(const std::string& name, const Tensor<float>& t) {
  s_->buffer_by_data[t.device_data()] = name;
  s_->buffer_names.insert(name);
  s_->initial.emplace_back(name, t.to(gradus::cpu));
}
void Tracer::input(const Var<float>& v) {
  const std::string name = s_->input_name(s_->inputs.size(), 1);
  s_->inputs.push_back({name, 1, v.shape(), nullptr});
  s_->names[v.node()->seq] = name;
}
void Tracer::input(const Tensor<int64_t>& ids) {
  const std::string name = s_->input_name(s_->inputs.size(), 1);
  s_->inputs.push_back({name, 7, ids.shape(), ids.device_data()});
}
void Tracer::start() {
  s_->previous = gradus::detail::g_op_observer.exchange(s_.get());
  s_->installed = true;
}
void Tracer::stop() {
  if (!s_ || !s_->installed) return;
  gradus::detail::g_op_observer.store(s_->previous);
  s_->installed = false;
}
void Tracer::output(const Var<float>& y) {
  GRADUS_CHECK(value_error, y.node() && s_->names.count(y.node()->seq), "onnx::export_model: the forward pass's output",
               " was not computed by a gradus op of the traced pass");
  s_->output_name = s_->names[y.node()->seq];
  s_->output_shape = y.shape();
}

void write_model(const std::string& path, const std::string& bytes) { io::write_file_atomic(path, bytes); }

// --- writing ONNX ------------------------------------------------------------------------------

namespace {

class Writer {
 public:
  Writer(::onnx::GraphProto& g, int64_t opset) : g_(g), opset_(opset) {}

  std::string fresh(const std::string& base) { return base + "_" + std::to_string(counter_++); }

  std::string floats(const Tensor<float>& t, const std::string& name = {}, const std::string& doc = {}) {
    ::onnx::TensorProto* p = g_.add_initializer();
    p->set_name(name.empty() ? fresh("const") : name);
    if (!doc.empty() || name.empty()) p->set_doc_string(name.empty() ? kConstantDoc : doc);
    p->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : t.shape()) p->add_dims(d);
    p->set_raw_data(std::string(reinterpret_cast<const char*>(t.data()), size_t(t.size()) * sizeof(float)));
    return p->name();
  }
  std::string scalar(double v) {
    if (auto it = scalars_.find(v); it != scalars_.end()) return it->second;
    return scalars_[v] = floats(Tensor<float>::scalar(float(v)));
  }
  std::string ints(const std::vector<int64_t>& v) {
    ::onnx::TensorProto* p = g_.add_initializer();
    p->set_name(fresh("ints"));
    p->set_data_type(::onnx::TensorProto::INT64);
    p->add_dims(int64_t(v.size()));
    for (int64_t x : v) p->add_int64_data(x);
    return p->name();
  }
  std::string int_tensor(const Tensor<int64_t>& t) {
    ::onnx::TensorProto* p = g_.add_initializer();
    p->set_name(fresh("indices"));
    p->set_data_type(::onnx::TensorProto::INT64);
    for (int64_t d : t.shape()) p->add_dims(d);
    for (int64_t k = 0; k < t.size(); ++k) p->add_int64_data(t.data()[k]);
    return p->name();
  }

  /// Adds a node; returns its first output's name (`out`, or a fresh one).
  ::onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, std::string out = {},
                          const std::string& scope = {}) {
    ::onnx::NodeProto* n = g_.add_node();
    n->set_op_type(op);
    n->set_name((scope.empty() ? "" : scope + "/") + fresh(op));
    for (const auto& s : in) n->add_input(s);
    n->add_output(out.empty() ? fresh("t") : out);
    return n;
  }
  std::string op(const std::string& type, const std::vector<std::string>& in, std::string out = {},
                 const std::string& scope = {}) {
    return node(type, in, std::move(out), scope)->output(0);
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, double v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(float(v));
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  std::string transpose(const std::string& x, const std::vector<int64_t>& perm, const std::string& scope, std::string out = {}) {
    auto* n = node("Transpose", {x}, std::move(out), scope);
    attr(n, "perm", perm);
    return n->output(0);
  }
  std::string unsqueeze(const std::string& x, int64_t axis, const std::string& scope) {
    return op("Unsqueeze", {x, ints({axis})}, {}, scope);
  }
  std::string squeeze(const std::string& x, int64_t axis, const std::string& scope, std::string out = {}) {
    return op("Squeeze", {x, ints({axis})}, std::move(out), scope);
  }
  int64_t opset() const { return opset_; }

 private:
  ::onnx::GraphProto& g_;
  int64_t opset_;
  int counter_ = 0;
  std::map<double, std::string> scalars_;
};

/// An activation by gradus' name (Activation::name) applied to `x`.
std::string activation(Writer& w, const std::string& name, double alpha, const std::string& x, std::string out,
                       const std::string& scope) {
  if (name == "linear") return w.op("Identity", {x}, std::move(out), scope);
  if (name == "relu") return w.op("Relu", {x}, std::move(out), scope);
  if (name == "tanh") return w.op("Tanh", {x}, std::move(out), scope);
  if (name == "sigmoid") return w.op("Sigmoid", {x}, std::move(out), scope);
  if (name == "softplus") return w.op("Softplus", {x}, std::move(out), scope);
  if (name == "softsign") return w.op("Softsign", {x}, std::move(out), scope);
  if (name == "selu") return w.op("Selu", {x}, std::move(out), scope);
  if (name == "leaky_relu" || name == "elu") {
    auto* n = w.node(name == "elu" ? "Elu" : "LeakyRelu", {x}, std::move(out), scope);
    Writer::attr(n, "alpha", alpha);
    return n->output(0);
  }
  if (name == "gelu") {  // x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
    const std::string e = w.op("Erf", {w.op("Mul", {x, w.scalar(M_SQRT1_2)}, {}, scope)}, {}, scope);
    const std::string half = w.op("Mul", {x, w.scalar(0.5)}, {}, scope);
    return w.op("Mul", {half, w.op("Add", {e, w.scalar(1.0)}, {}, scope)}, std::move(out), scope);
  }
  throw value_error(str("activation ", name, kNoForm));
}

/// An elementwise program (OpDescription::program) as ONNX nodes; the last writes `out`.
std::string program(Writer& w, const std::string& text, const std::vector<std::string>& operands, std::string out,
                    const std::string& scope) {
  std::vector<std::string> tokens;
  std::istringstream is(text);
  for (std::string t; is >> t;) tokens.push_back(t);
  std::vector<std::string> stack;
  auto pop = [&] {
    GRADUS_CHECK(value_error, !stack.empty(), "onnx::export_model: a malformed elementwise program: ", text);
    std::string v = stack.back();
    stack.pop_back();
    return v;
  };
  for (size_t k = 0; k < tokens.size(); ++k) {
    const std::string& t = tokens[k];
    const std::string dst = k + 1 == tokens.size() ? out : std::string();
    if (t[0] == '$') {
      const size_t i = std::stoul(t.substr(1));
      GRADUS_CHECK(value_error, i < operands.size(), "onnx::export_model: program operand ", t, " out of range");
      if (k + 1 == tokens.size()) {
        stack.push_back(w.op("Identity", {operands[i]}, out, scope));
      } else {
        stack.push_back(operands[i]);
      }
      continue;
    }
    if (t[0] == '#') {
      stack.push_back(w.scalar(std::stod(t.substr(1))));
      if (k + 1 == tokens.size()) stack.back() = w.op("Identity", {stack.back()}, out, scope);
      continue;
    }
    GRADUS_CHECK(value_error, t != "?", "onnx::export_model: an elementwise expression reads an operand that is neither a tensor nor a number");
    const size_t paren = t.find('(');
    const std::string name = t.substr(0, paren);
    std::vector<double> params;
    if (paren != std::string::npos) {
      std::string list = t.substr(paren + 1, t.size() - paren - 2);
      std::istringstream ps(list);
      for (std::string p; std::getline(ps, p, ',');) params.push_back(std::stod(p));
    }
    static const std::map<std::string, std::string> unary{{"neg", "Neg"},   {"abs", "Abs"},         {"sign", "Sign"},
                                                          {"exp", "Exp"},   {"log", "Log"},         {"sqrt", "Sqrt"},
                                                          {"sin", "Sin"},   {"cos", "Cos"},         {"tanh", "Tanh"},
                                                          {"sigmoid", "Sigmoid"}, {"relu", "Relu"}, {"selu", "Selu"},
                                                          {"softplus", "Softplus"}, {"softsign", "Softsign"},
                                                          {"identity", "Identity"}};
    static const std::map<std::string, std::string> binary{{"add", "Add"}, {"sub", "Sub"}, {"mul", "Mul"},
                                                           {"div", "Div"}, {"pow", "Pow"}, {"minimum", "Min"},
                                                           {"maximum", "Max"}};
    static const std::map<std::string, std::string> compare{{"greater", "Greater"}, {"less", "Less"},
                                                            {"greater_equal", "GreaterOrEqual"},
                                                            {"less_equal", "LessOrEqual"}, {"equal", "Equal"}};
    if (auto u = unary.find(name); u != unary.end()) {
      stack.push_back(w.op(u->second, {pop()}, dst, scope));
    } else if (auto b = binary.find(name); b != binary.end()) {
      const std::string rhs = pop(), lhs = pop();
      stack.push_back(w.op(b->second, {lhs, rhs}, dst, scope));
    } else if (auto c = compare.find(name); c != compare.end()) {
      const std::string rhs = pop(), lhs = pop();
      auto* n = w.node("Cast", {w.op(c->second, {lhs, rhs}, {}, scope)}, dst, scope);
      Writer::attr(n, "to", int64_t(::onnx::TensorProto::FLOAT));
      stack.push_back(n->output(0));
    } else if (name == "not_equal") {
      const std::string rhs = pop(), lhs = pop();
      auto* n = w.node("Cast", {w.op("Not", {w.op("Equal", {lhs, rhs}, {}, scope)}, {}, scope)}, dst, scope);
      Writer::attr(n, "to", int64_t(::onnx::TensorProto::FLOAT));
      stack.push_back(n->output(0));
    } else if (name == "log1p") {
      stack.push_back(w.op("Log", {w.op("Add", {pop(), w.scalar(1.0)}, {}, scope)}, dst, scope));
    } else if (name == "rsqrt") {
      stack.push_back(w.op("Reciprocal", {w.op("Sqrt", {pop()}, {}, scope)}, dst, scope));
    } else if (name == "square") {
      const std::string x = pop();
      stack.push_back(w.op("Mul", {x, x}, dst, scope));
    } else if (name == "leaky_relu" || name == "elu" || name == "gelu") {
      stack.push_back(activation(w, name, params.empty() ? 0.0 : params[0], pop(), dst, scope));
    } else if (name == "clamp" && params.size() == 2) {
      stack.push_back(w.op("Clip", {pop(), w.scalar(params[0]), w.scalar(params[1])}, dst, scope));
    } else if (name == "pow_scalar" && params.size() == 1) {
      stack.push_back(w.op("Pow", {pop(), w.scalar(params[0])}, dst, scope));
    } else if (name == "where") {
      const std::string b = pop(), a = pop(), cond = pop();
      auto* c = w.node("Cast", {cond}, {}, scope);
      Writer::attr(c, "to", int64_t(::onnx::TensorProto::BOOL));
      stack.push_back(w.op("Where", {c->output(0), a, b}, dst, scope));
    } else {
      throw value_error(str("onnx::export_model: elementwise op ", name, kNoForm));
    }
  }
  GRADUS_CHECK(value_error, stack.size() == 1, "onnx::export_model: a malformed elementwise program: ", text);
  return stack.back();
}

}  // namespace

std::string Tracer::serialize() const {
  const State& s = *s_;
  if (!s.problems.empty()) {
    std::string msg = "onnx::export_model: the traced forward pass cannot be exported:";
    for (const auto& p : s.problems) msg += "\n  " + p;
    throw value_error(msg);
  }
  ::onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("gradus");
  model.set_producer_version("0.1");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(s.opt.opset);
  ::onnx::GraphProto& g = *model.mutable_graph();
  g.set_name("gradus");
  Writer w(g, s.opt.opset);

  // initializers: every parameter and buffer a node reads
  std::set<std::string> used;
  for (const Record& r : s.records)
    for (const Operand& o : r.in) used.insert(o.name);
  for (const auto& [name, t] : s.initial)  // a buffer is marked, so that gd::onnx::load keeps it one
    if (used.count(name)) w.floats(t, name, s.buffer_names.count(name) ? kBufferDoc : "");

  const int64_t batch = s.inputs.empty() || s.inputs[0].shape.rank() == 0 ? -1 : s.inputs[0].shape[0];
  auto value_info = [&](::onnx::ValueInfoProto* v, const std::string& name, int type, const Shape& shape) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* sh = tt->mutable_shape();
    for (int i = 0; i < shape.rank(); ++i) {
      auto* d = sh->add_dim();
      if (i == 0 && s.opt.dynamic_batch)
        d->set_dim_param("batch");
      else
        d->set_dim_value(shape[i]);
    }
  };
  for (const auto& in : s.inputs) value_info(g.add_input(), in.name, in.type, in.shape);

  std::map<uint64_t, std::pair<std::string, std::string>> lstm_finals;  // sequence node -> Y_h, Y_c
  const std::string output_name = s.opt.output_names.empty() ? "output" : s.opt.output_names[0];
  // A constant of the example's batch size whose elements are all equal (a zero initial state)
  // becomes a tensor of the running batch: ConstantOfShape over the first input's axis 0.
  std::string batch_dim;
  auto name_of = [&](const Record& r, size_t i) -> std::string {
    const Operand& o = r.in[i];
    if (!o.name.empty()) return o.name == s.output_name ? output_name : o.name;
    const Tensor<float>& c = *o.constant;
    const bool uniform = c.size() > 0 && std::all_of(c.data(), c.data() + c.size(), [&](float v) {
      return std::memcmp(&v, c.data(), sizeof v) == 0;
    });
    if (s.opt.dynamic_batch && batch > 1 && uniform && c.shape().rank() >= 1 && c.shape()[0] == batch) {
      if (batch_dim.empty()) {
        batch_dim = w.op("Gather", {w.op("Shape", {s.inputs[0].name}), w.ints({0})});  // [batch]
      }
      std::vector<int64_t> rest(c.shape().begin() + 1, c.shape().end());
      std::string shape = batch_dim;
      if (!rest.empty()) {
        auto* cat = w.node("Concat", {batch_dim, w.ints(rest)});
        Writer::attr(cat, "axis", int64_t(0));
        shape = cat->output(0);
      }
      auto* n = w.node("ConstantOfShape", {shape});
      auto* a = n->add_attribute();
      a->set_name("value");
      a->set_type(::onnx::AttributeProto::TENSOR);
      a->mutable_t()->set_data_type(::onnx::TensorProto::FLOAT);
      a->mutable_t()->add_dims(1);
      a->mutable_t()->add_float_data(c.data()[0]);
      return n->output(0);
    }
    return w.floats(c);
  };
  auto out_of = [&](const Record& r) {
    const std::string& v = s.names.at(r.out_seq);
    return v == s.output_name ? output_name : v;
  };

  for (const Record& r : s.records) {
    if (!r.out_seq) continue;
    const std::string out = out_of(r);
    const std::string& sc = r.scope;
    const std::string where = r.scope.empty() ? "" : " (in module '" + r.scope + "')";
    if (r.op == "elementwise") {
      std::vector<std::string> operands;
      for (size_t i = 0; i < r.in.size(); ++i) operands.push_back(name_of(r, i));
      program(w, r.program, operands, out, sc);
    } else if (r.op == "sum" || r.op == "mean" || r.op == "max" || r.op == "min" || r.op == "prod" ||
               r.op == "logsumexp") {
      std::string x;
      if (r.op == "sum" || r.op == "mean") {
        std::vector<std::string> operands;
        for (size_t i = 0; i < r.in.size(); ++i) operands.push_back(name_of(r, i));
        x = program(w, r.program, operands, {}, sc);
      } else {
        x = name_of(r, 0);
      }
      const bool keep = !r.ints.empty() && r.ints[0] != 0;
      std::vector<int64_t> axes(r.ints.begin() + (r.ints.empty() ? 0 : 1), r.ints.end());
      const char* type = r.op == "sum" ? "ReduceSum" : r.op == "mean" ? "ReduceMean" : r.op == "max" ? "ReduceMax"
                         : r.op == "min" ? "ReduceMin" : r.op == "prod" ? "ReduceProd" : "ReduceLogSumExp";
      ::onnx::NodeProto* n;
      if (r.op == "sum") {
        n = axes.empty() ? w.node(type, {x}, out, sc) : w.node(type, {x, w.ints(axes)}, out, sc);
      } else {
        n = w.node(type, {x}, out, sc);
        if (!axes.empty()) Writer::attr(n, "axes", axes);
      }
      Writer::attr(n, "keepdims", int64_t(keep));
    } else if (r.op == "matmul") {
      const bool ta = r.ints.size() > 0 && r.ints[0], tb = r.ints.size() > 1 && r.ints[1];
      std::string a = name_of(r, 0), b = name_of(r, 1);
      if (r.in[0].shape.rank() == 2 && r.in[1].shape.rank() == 2) {
        auto* n = w.node("Gemm", {a, b}, out, sc);
        if (ta) Writer::attr(n, "transA", int64_t(1));
        if (tb) Writer::attr(n, "transB", int64_t(1));
      } else {
        auto swap_last = [&](const std::string& x, int rank) {
          std::vector<int64_t> perm;
          for (int i = 0; i < rank; ++i) perm.push_back(i);
          std::swap(perm[size_t(rank - 1)], perm[size_t(rank - 2)]);
          return w.transpose(x, perm, sc);
        };
        if (ta) a = swap_last(a, r.in[0].shape.rank());
        if (tb) b = swap_last(b, r.in[1].shape.rank());
        w.op("MatMul", {a, b}, out, sc);
      }
    } else if (r.op == "bias_activation") {
      const std::string sum = w.op("Add", {name_of(r, 0), name_of(r, 1)}, {}, sc);
      activation(w, r.text, r.real, sum, out, sc);
    } else if (r.op == "conv2d" || r.op == "conv2d_bias_relu") {
      const std::string x = w.transpose(name_of(r, 0), {0, 3, 1, 2}, sc);
      const std::string k = w.transpose(name_of(r, 1), {3, 2, 0, 1}, sc);
      std::vector<std::string> in{x, k};
      if (r.in.size() > 2) in.push_back(name_of(r, 2));
      auto* n = w.node("Conv", in, {}, sc);
      Writer::attr(n, "strides", std::vector<int64_t>{r.ints[0], r.ints[1]});
      Writer::attr(n, "dilations", std::vector<int64_t>{r.ints[3], r.ints[4]});
      Writer::attr(n, "auto_pad", std::string(r.ints[2] ? "SAME_UPPER" : "VALID"));
      std::string y = n->output(0);
      if (r.op == "conv2d_bias_relu") y = w.op("Relu", {y}, {}, sc);
      w.transpose(y, {0, 2, 3, 1}, sc, out);
    } else if (r.op == "max_pool2d" || r.op == "avg_pool2d") {
      const std::string x = w.transpose(name_of(r, 0), {0, 3, 1, 2}, sc);
      auto* n = w.node(r.op == "max_pool2d" ? "MaxPool" : "AveragePool", {x}, {}, sc);
      Writer::attr(n, "kernel_shape", std::vector<int64_t>{r.ints[0], r.ints[1]});
      Writer::attr(n, "strides", std::vector<int64_t>{r.ints[2], r.ints[3]});
      Writer::attr(n, "auto_pad", std::string(r.ints[4] ? "SAME_UPPER" : "VALID"));
      w.transpose(n->output(0), {0, 2, 3, 1}, sc, out);
    } else if (r.op == "softmax" || r.op == "log_softmax") {
      auto* n = w.node(r.op == "softmax" ? "Softmax" : "LogSoftmax", {name_of(r, 0)}, out, sc);
      Writer::attr(n, "axis", r.ints.empty() ? int64_t(-1) : r.ints[0]);
    } else if (r.op == "reshape") {
      std::vector<int64_t> target = r.ints;
      const Shape& in = r.in[0].shape;
      if (s.opt.dynamic_batch && !target.empty() && in.rank() > 0 && target[0] == in[0] && in[0] == batch)
        target[0] = 0;  // ONNX: copy the input's axis 0, the batch
      w.op("Reshape", {name_of(r, 0), w.ints(target)}, out, sc);
    } else if (r.op == "transpose") {
      w.transpose(name_of(r, 0), r.ints, sc, out);
    } else if (r.op == "concat" || r.op == "stack") {
      const int64_t axis = r.ints.empty() ? 0 : r.ints[0];
      std::vector<std::string> parts;
      for (size_t i = 0; i < r.in.size(); ++i)
        parts.push_back(r.op == "stack" ? w.unsqueeze(name_of(r, i), axis, sc) : name_of(r, i));
      auto* n = w.node("Concat", parts, out, sc);
      Writer::attr(n, "axis", axis);
    } else if (r.op == "slice") {
      const Shape& in = r.in[0].shape;
      std::vector<int64_t> starts = r.ints, ends, axes;
      for (int a = 0; a < in.rank(); ++a) {
        axes.push_back(a);
        const int64_t end = starts[size_t(a)] + r.out_shape[a];
        ends.push_back(end == in[a] ? std::numeric_limits<int64_t>::max() : end);  // "to the end": any batch
      }
      w.op("Slice", {name_of(r, 0), w.ints(starts), w.ints(ends), w.ints(axes)}, out, sc);
    } else if (r.op == "pad") {
      std::vector<int64_t> pads(r.ints.size());
      const size_t rank = r.ints.size() / 2;
      for (size_t a = 0; a < rank; ++a) pads[a] = r.ints[2 * a], pads[a + rank] = r.ints[2 * a + 1];
      w.op("Pad", {name_of(r, 0), w.ints(pads), w.scalar(r.real)}, out, sc);
    } else if (r.op == "gather") {
      const std::string idx = r.int_input.empty() ? w.int_tensor(*r.indices) : r.int_input;
      auto* n = w.node("Gather", {name_of(r, 0), idx}, out, sc);
      Writer::attr(n, "axis", r.ints.empty() ? int64_t(0) : r.ints[0]);
    } else if (r.op == "dropout") {
      w.op("Identity", {name_of(r, 0)}, out, sc);
    } else if (r.op == "lstm_sequence" && (r.in.size() == 4 || r.in.size() == 5)) {
      // xp [N, T, 4u] (x·kernel + bias, gates i f g o; or x·kernel, with the bias [4u] as the
      // third input), recurrent kernel [u, 4u], h0, c0 -> ONNX LSTM with X = xp [T, N, 4u], W the
      // gate reordering (i o f c), R = kernelᵀ reordered and B = [bias reordered, zeros]
      const bool has_bias = r.in.size() == 5;
      const int64_t u = r.in[1].shape[0];
      const int64_t order[4] = {0, 3, 1, 2};  // ONNX gate k reads gradus gate order[k]
      auto W = Tensor<float>::zeros({1, 4 * u, 4 * u});
      std::vector<int64_t> rows;
      for (int64_t k = 0; k < 4; ++k)
        for (int64_t j = 0; j < u; ++j) {
          W.data()[(k * u + j) * 4 * u + order[k] * u + j] = 1.0f;
          rows.push_back(order[k] * u + j);
        }
      const std::string X = w.transpose(name_of(r, 0), {1, 0, 2}, sc);
      const std::string Rt = w.transpose(name_of(r, 1), {1, 0}, sc);
      const std::string R = w.unsqueeze(w.op("Gather", {Rt, w.ints(rows)}, {}, sc), 0, sc);
      auto state = [&](size_t i) -> std::string {
        const Operand& o = r.in[i];
        if (o.constant && std::all_of(o.constant->data(), o.constant->data() + o.constant->size(),
                                      [](float v) { return v == 0.0f; }))
          return "";  // ONNX's default initial state: zeros, for any batch
        return w.unsqueeze(name_of(r, i), 0, sc);
      };
      std::string B;
      if (has_bias) {  // [1, 8u]: W's bias in ONNX's gate order, then R's, zero
        const std::string wb = w.op("Gather", {name_of(r, 2), w.ints(rows)}, {}, sc);
        auto* cat = w.node("Concat", {wb, w.floats(Tensor<float>::zeros({4 * u}))}, {}, sc);
        Writer::attr(cat, "axis", int64_t(0));
        B = w.unsqueeze(cat->output(0), 0, sc);
      }
      const std::string h0 = state(has_bias ? 3 : 2), c0 = state(has_bias ? 4 : 3);
      auto* n = w.node("LSTM", {X, w.floats(W), R, B, "", h0, c0}, {}, sc);
      n->add_output(w.fresh("lstm_h"));
      n->add_output(w.fresh("lstm_c"));
      Writer::attr(n, "hidden_size", u);
      const std::string y = w.squeeze(n->output(0), 1, sc);  // [T, N, u]
      w.transpose(y, {1, 0, 2}, sc, out);
      lstm_finals[r.out_seq] = {n->output(1), n->output(2)};
    } else if (r.op == "lstm_sequence" && r.in.size() == 1) {
      auto it = lstm_finals.find(r.in[0].seq);
      GRADUS_CHECK(value_error, it != lstm_finals.end(), "onnx::export_model: an LSTM final state without its sequence");
      const bool c = !r.ints.empty() && r.ints[0] == 2;
      w.squeeze(c ? it->second.second : it->second.first, 0, sc, out);
    } else {
      throw value_error(str("onnx::export_model: op ", r.op, where, kNoForm));
    }
  }
  const int out_type = ::onnx::TensorProto::FLOAT;
  value_info(g.add_output(), output_name, out_type, s.output_shape);
  try {
    ::onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw value_error(str("onnx::export_model: ONNX's checker refuses the model: ", e.what()));
  }
  return model.SerializeAsString();
}

}  // namespace gradus::onnx::detail
