// src/onnx/load.cpp — reading ONNX files: TensorProto into gradus tensors, ModelProto into the
// graph of src/onnx/graph.hpp, checked against the operators run.cpp implements, and the
// Model's parameters registered under the initializers' names.
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include <onnx/onnx_pb.h>

#include "gradus/core/error.hpp"
#include "gradus/io/file.hpp"
#include "src/onnx/graph.hpp"

namespace gradus::onnx {
namespace detail {
namespace {

const char* type_name(int t) {
  static const char* const names[] = {"UNDEFINED", "FLOAT",  "UINT8",   "INT8",   "UINT16",    "INT16",
                                      "INT32",     "INT64",  "STRING",  "BOOL",   "FLOAT16",   "DOUBLE",
                                      "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  return t >= 0 && t < int(std::size(names)) ? names[t] : "an unknown type";
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, nan
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

int64_t element_count(const ::onnx::TensorProto& t, std::string_view what) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    GRADUS_CHECK(value_error, d >= 0, "onnx: ", what, " has a negative dimension (", d, ")");
    GRADUS_CHECK(value_error, d == 0 || n <= (int64_t(1) << 40) / d, "onnx: ", what, " is too large");
    n *= d;
  }
  return n;
}

// The readers of a tensor's n elements; to_value checked first that the data holds n.
template <class Out, class In>
void from_raw(const std::string& raw, int64_t n, Out* out, int type) {
  for (int64_t k = 0; k < n; ++k) {
    In v;
    std::memcpy(&v, raw.data() + size_t(k) * sizeof(In), sizeof(In));  // little-endian, as x86-64 and ONNX
    if constexpr (std::is_same_v<In, uint16_t> && std::is_same_v<Out, float>)
      out[k] = type == 16 ? std::bit_cast<float>(uint32_t(v) << 16) : half_to_float(v);
    else
      out[k] = Out(v);
  }
}

template <class Out, class Field>
void from_field(const Field& field, int64_t n, Out* out) {
  for (int64_t k = 0; k < n; ++k) out[k] = Out(field.Get(int(k)));
}

}  // namespace

Value to_value(const ::onnx::TensorProto& t, std::string_view what) {
  GRADUS_CHECK(value_error, t.data_location() != ::onnx::TensorProto::EXTERNAL, "onnx: ", what,
               " keeps its data in an external file, which gradus does not read");
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  GRADUS_CHECK(value_error, dims.size() <= size_t(kMaxRank), "onnx: ", what, " has rank ", dims.size(),
               "; gradus tensors have at most ", kMaxRank, " axes");
  const Shape shape(dims);
  const int64_t n = element_count(t, what);
  const int type = t.data_type();
  const bool raw = t.has_raw_data();
  const std::string& r = t.raw_data();
  // the data must hold n elements before anything of n elements is allocated (a file may
  // declare any shape)
  static const std::map<int, std::pair<size_t, int>> sizes{  // element size, typed field (0 float 1 double 2 int32 3 int64 4 uint64)
      {::onnx::TensorProto::FLOAT, {4, 0}},  {::onnx::TensorProto::DOUBLE, {8, 1}}, {::onnx::TensorProto::FLOAT16, {2, 2}},
      {::onnx::TensorProto::BFLOAT16, {2, 2}}, {::onnx::TensorProto::BOOL, {1, 2}}, {::onnx::TensorProto::INT64, {8, 3}},
      {::onnx::TensorProto::INT32, {4, 2}},  {::onnx::TensorProto::INT16, {2, 2}},  {::onnx::TensorProto::INT8, {1, 2}},
      {::onnx::TensorProto::UINT16, {2, 2}}, {::onnx::TensorProto::UINT8, {1, 2}},  {::onnx::TensorProto::UINT32, {4, 4}}};
  if (auto it = sizes.find(type); it != sizes.end()) {
    const auto [bytes, field] = it->second;
    const int64_t have = raw ? int64_t(r.size() / bytes)
                             : field == 0 ? t.float_data_size() : field == 1 ? t.double_data_size()
                             : field == 2 ? t.int32_data_size() : field == 3 ? t.int64_data_size() : t.uint64_data_size();
    GRADUS_CHECK(io_error, have == n && (!raw || r.size() % bytes == 0), "onnx: ", what, ": its data holds ",
                 raw ? r.size() : size_t(have), raw ? " bytes" : " values", " for ", n, " elements of ", type_name(type));
  }
  switch (type) {
    case ::onnx::TensorProto::FLOAT:
    case ::onnx::TensorProto::DOUBLE:
    case ::onnx::TensorProto::FLOAT16:
    case ::onnx::TensorProto::BFLOAT16: {
      auto out = Tensor<float>::empty(shape);
      float* p = out.data();
      if (type == ::onnx::TensorProto::FLOAT)
        raw ? from_raw<float, float>(r, n, p, type) : from_field(t.float_data(), n, p);
      else if (type == ::onnx::TensorProto::DOUBLE)
        raw ? from_raw<float, double>(r, n, p, type) : from_field(t.double_data(), n, p);
      else if (raw)
        from_raw<float, uint16_t>(r, n, p, type);
      else {  // int32_data holds the 16-bit patterns
        for (int64_t k = 0; k < n; ++k) {
          const auto bits = uint16_t(t.int32_data(int(k)));
          p[k] = type == ::onnx::TensorProto::BFLOAT16 ? std::bit_cast<float>(uint32_t(bits) << 16) : half_to_float(bits);
        }
      }
      return out;
    }
    case ::onnx::TensorProto::BOOL: {  // a mask of 0 and 1, as gradus' comparisons give
      auto out = Tensor<float>::empty(shape);
      float* p = out.data();
      if (raw) {
        for (int64_t k = 0; k < n; ++k) p[k] = r[size_t(k)] ? 1.0f : 0.0f;
      } else {
        from_field(t.int32_data(), n, p);
        for (int64_t k = 0; k < n; ++k) p[k] = p[k] != 0.0f ? 1.0f : 0.0f;
      }
      return out;
    }
    case ::onnx::TensorProto::INT64:
    case ::onnx::TensorProto::INT32:
    case ::onnx::TensorProto::INT16:
    case ::onnx::TensorProto::INT8:
    case ::onnx::TensorProto::UINT16:
    case ::onnx::TensorProto::UINT8:
    case ::onnx::TensorProto::UINT32: {
      auto out = Tensor<int64_t>::empty(shape);
      int64_t* p = out.data();
      if (type == ::onnx::TensorProto::INT64)
        raw ? from_raw<int64_t, int64_t>(r, n, p, type) : from_field(t.int64_data(), n, p);
      else if (type == ::onnx::TensorProto::UINT32)
        raw ? from_raw<int64_t, uint32_t>(r, n, p, type) : from_field(t.uint64_data(), n, p);
      else if (!raw)
        from_field(t.int32_data(), n, p);
      else if (type == ::onnx::TensorProto::INT32)
        from_raw<int64_t, int32_t>(r, n, p, type);
      else if (type == ::onnx::TensorProto::INT16)
        from_raw<int64_t, int16_t>(r, n, p, type);
      else if (type == ::onnx::TensorProto::INT8)
        from_raw<int64_t, int8_t>(r, n, p, type);
      else if (type == ::onnx::TensorProto::UINT16)
        from_raw<int64_t, uint16_t>(r, n, p, type);
      else
        from_raw<int64_t, uint8_t>(r, n, p, type);
      return out;
    }
    default:
      throw value_error(gradus::detail::str("onnx: ", what, " has element type ", type_name(type),
                                            "; gradus reads float, double, float16, bfloat16 and integer tensors"));
  }
}

namespace {

Attr to_attr(const ::onnx::AttributeProto& a, std::string_view what) {
  Attr out;
  switch (a.type()) {
    case ::onnx::AttributeProto::FLOAT: out.kind = Attr::kFloat; out.f = a.f(); break;
    case ::onnx::AttributeProto::INT: out.kind = Attr::kInt; out.i = a.i(); break;
    case ::onnx::AttributeProto::STRING: out.kind = Attr::kString; out.s = a.s(); break;
    case ::onnx::AttributeProto::TENSOR:
      out.kind = Attr::kTensor;
      out.t = to_value(a.t(), gradus::detail::str(what, " attribute '", a.name(), "'"));
      break;
    case ::onnx::AttributeProto::FLOATS: out.kind = Attr::kFloats; out.floats.assign(a.floats().begin(), a.floats().end()); break;
    case ::onnx::AttributeProto::INTS: out.kind = Attr::kInts; out.ints.assign(a.ints().begin(), a.ints().end()); break;
    case ::onnx::AttributeProto::STRINGS: out.kind = Attr::kStrings; out.strings.assign(a.strings().begin(), a.strings().end()); break;
    case ::onnx::AttributeProto::GRAPH: out.kind = Attr::kGraph; break;
    default: out.kind = Attr::kOther; break;
  }
  return out;
}

/// A Constant node's value (opset 1-17 forms).
std::optional<Value> constant_value(const Node& n, std::string& why) {
  if (const Attr* a = n.find("value"); a && a->t) return *a->t;
  if (const Attr* a = n.find("value_float")) return Value(Tensor<float>::scalar(a->f));
  if (const Attr* a = n.find("value_floats")) return Value(Tensor<float>::from(a->floats));
  if (const Attr* a = n.find("value_int")) return Value(Tensor<int64_t>::scalar(a->i));
  if (const Attr* a = n.find("value_ints")) return Value(Tensor<int64_t>::from(a->ints));
  why = n.has("value") ? "its value tensor has an element type gradus does not read"
                       : "it holds a sparse or string value";
  return std::nullopt;
}

}  // namespace

[[noreturn]] void node_error(const Node& n, std::string_view why) {
  throw value_error(gradus::detail::str("onnx: ", n.label, ": ", why));
}

/// Reads a ModelProto into a Graph; throws one value_error listing every node it cannot import.
std::unique_ptr<Graph> read_graph(std::string_view bytes, std::string_view what) {
  ::onnx::ModelProto m;
  GRADUS_CHECK(io_error, bytes.size() < size_t(INT_MAX) && m.ParseFromArray(bytes.data(), int(bytes.size())),
               "onnx::load: ", what, " is not an ONNX model (its bytes do not parse as a ModelProto)");
  GRADUS_CHECK(io_error, m.has_graph() && m.graph().node_size() + m.graph().output_size() > 0, "onnx::load: ", what,
               " is not an ONNX model (it has no graph)");
  auto g = std::make_unique<Graph>();
  for (const auto& op : m.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") g->opset = op.version();
  GRADUS_CHECK(value_error, g->opset > 0, "onnx::load: ", what, " declares no opset of the default ONNX domain");
  GRADUS_CHECK(value_error, g->opset <= 17, "onnx::load: ", what, " needs opset ", g->opset,
               "; gradus imports opsets 7 to 17");

  const ::onnx::GraphProto& gp = m.graph();
  std::unordered_map<std::string, int> slots;
  auto slot_of = [&](const std::string& name) -> int {
    if (name.empty()) return -1;
    auto [it, fresh] = slots.try_emplace(name, int(g->slot_names.size()));
    if (fresh) g->slot_names.push_back(name);
    return it->second;
  };

  std::vector<std::string> problems;
  for (const auto& init : gp.initializer()) {
    try {
      g->initializers.push_back({slot_of(init.name()), init.name(),
                                 to_value(init, gradus::detail::str("initializer '", init.name(), "'")), false});
    } catch (const error& e) {
      problems.push_back(e.what());
    }
  }
  if (gp.sparse_initializer_size() > 0) problems.push_back("the graph has sparse initializers, which gradus does not read");
  std::set<std::string> initialized;
  for (const auto& init : gp.initializer()) initialized.insert(init.name());

  for (const auto& in : gp.input()) {
    if (initialized.count(in.name())) continue;  // IR version 3 lists initializers among the inputs
    const int type = in.type().has_tensor_type() ? in.type().tensor_type().elem_type() : -1;
    if (type != ::onnx::TensorProto::FLOAT && type != ::onnx::TensorProto::INT64 && type != ::onnx::TensorProto::BOOL) {
      problems.push_back(gradus::detail::str("graph input '", in.name(), "' is ",
                                             type < 0 ? std::string("not a tensor") : std::string("of element type ") + type_name(type),
                                             "; gradus takes float, int64 and bool inputs"));
    }
    g->inputs.push_back(slot_of(in.name()));
    g->input_names.push_back(in.name());
    g->input_types.push_back(type == ::onnx::TensorProto::BOOL ? int(::onnx::TensorProto::FLOAT) : type);  // a 0/1 mask
  }

  const auto& table = op_table();
  for (int k = 0; k < gp.node_size(); ++k) {
    const ::onnx::NodeProto& np = gp.node(k);
    Node n;
    n.op = np.op_type();
    n.name = np.name();
    n.label = np.name().empty() ? gradus::detail::str(n.op, " node #", k) : gradus::detail::str(n.op, " node '", n.name, "'");
    for (const auto& s : np.input()) n.in.push_back(slot_of(s));
    for (const auto& s : np.output()) n.out.push_back(slot_of(s));
    try {
      for (const auto& a : np.attribute()) n.attrs[a.name()] = to_attr(a, n.label);
    } catch (const error& e) {
      problems.push_back(e.what());
      continue;
    }
    if (!np.domain().empty() && np.domain() != "ai.onnx") {
      problems.push_back(gradus::detail::str(n.label, ": operator domain '", np.domain(), "' is not imported"));
      continue;
    }
    if (n.op == "Constant") {  // folded now: its value becomes a constant slot
      std::string why;
      if (auto v = constant_value(n, why); v && n.wanted(0)) {
        if (auto* f = std::get_if<Tensor<float>>(&*v))
          g->constants.emplace_back(n.out[0], Var<float>::constant(*f));
        else
          g->constants.emplace_back(n.out[0], std::get<Tensor<int64_t>>(*v));
      } else if (!v) {
        problems.push_back(gradus::detail::str(n.label, ": ", why));
      }
      continue;
    }
    auto it = table.find(n.op);
    if (it == table.end()) {
      problems.push_back(gradus::detail::str(n.label, ": operator ", n.op, " is not imported"));
      continue;
    }
    if (it->second.check) {
      std::string why = it->second.check(n, g->opset);
      if (!why.empty()) {
        problems.push_back(gradus::detail::str(n.label, ": ", why));
        continue;
      }
    }
    n.run = it->second.run;
    g->nodes.push_back(std::move(n));
  }
  for (const auto& out : gp.output()) {
    g->outputs.push_back(slot_of(out.name()));
    g->output_names.push_back(out.name());
  }
  if (!problems.empty()) {
    std::string msg = gradus::detail::str("onnx::load: ", what, ": ", problems.size(),
                                          problems.size() == 1 ? " problem" : " problems", ":");
    for (const auto& p : problems) msg += "\n  " + p;
    throw value_error(msg);
  }
  // BatchNormalization's running mean and variance are statistics, not parameters; so are the
  // initializers gd::onnx::export_model wrote from a module's buffers.
  for (const auto& init : gp.initializer())
    if (init.doc_string() == "gradus buffer" || init.doc_string() == "gradus constant")
      for (Initializer& i : g->initializers)
        if (i.name == init.name()) (init.doc_string() == "gradus buffer" ? i.buffer : i.constant) = true;
  for (const Node& n : g->nodes)
    if (n.op == "BatchNormalization")
      for (size_t k : {size_t(3), size_t(4)})
        for (Initializer& init : g->initializers)
          if (n.given(k) && init.slot == n.in[k]) init.buffer = true;
  return g;
}

}  // namespace detail

Value parse_tensor(std::string_view bytes, std::string_view what) {
  ::onnx::TensorProto t;
  GRADUS_CHECK(io_error, bytes.size() < size_t(INT_MAX) && t.ParseFromArray(bytes.data(), int(bytes.size())),
               "onnx::read_tensor: ", what, " is not a TensorProto");
  return detail::to_value(t, what);
}

std::string serialize_tensor(const Value& value, std::string_view name) {
  ::onnx::TensorProto t;
  t.set_name(std::string(name));
  std::visit(
      [&](const auto& v) {
        using E = typename std::decay_t<decltype(v)>::value_type;
        t.set_data_type(std::is_same_v<E, float> ? ::onnx::TensorProto::FLOAT : ::onnx::TensorProto::INT64);
        for (int64_t d : v.shape()) t.add_dims(d);
        const auto host = v.to(gradus::cpu);
        t.set_raw_data(std::string(reinterpret_cast<const char*>(host.data()), size_t(host.size()) * sizeof(E)));
      },
      value);
  return t.SerializeAsString();
}

void write_tensor(const std::string& path, const Value& value, std::string_view name) {
  io::write_file_atomic(path, serialize_tensor(value, name));
}

Value read_tensor(const std::string& path) {
  return parse_tensor(gradus::io::read_file(path, "onnx::read_tensor"), path);
}

using detail::Scope;

Model::Model(std::unique_ptr<detail::Graph> graph) : graph_(std::move(graph)) {
  detail::Graph& g = *graph_;
  std::map<std::string, nn::Module<float>*> scopes;  // module path -> module
  std::set<std::string> names;                     // every path taken, modules and values
  for (detail::Initializer& init : g.initializers) {
    if (auto* ints = std::get_if<Tensor<int64_t>>(&init.value)) {
      g.constants.emplace_back(init.slot, *ints);
      continue;
    }
    if (init.constant) {
      g.constants.emplace_back(init.slot, Var<float>::constant(std::get<Tensor<float>>(init.value)));
      continue;
    }
    // "a.b.c" -> module "a.b", name "c" when that path is free of clashes; else the name at
    // the top with its dots as underscores.
    nn::Module<float>* owner = nullptr;
    std::string leaf = init.name;
    std::vector<std::string> parts;
    for (size_t at = 0;;) {
      const size_t dot = init.name.find('.', at);
      parts.push_back(init.name.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
      if (dot == std::string::npos) break;
      at = dot + 1;
    }
    bool nested = parts.size() > 1 && !names.count(init.name);
    for (const auto& p : parts) nested = nested && !p.empty();
    std::string path;
    for (size_t k = 0; nested && k + 1 < parts.size(); ++k) {
      path += (k ? "." : "") + parts[k];
      if (names.count(path) && !scopes.count(path)) nested = false;  // a value already has that name
    }
    if (nested) {
      path.clear();
      for (size_t k = 0; k + 1 < parts.size(); ++k) {
        const std::string parent = path;
        path += (k ? "." : "") + parts[k];
        if (!scopes.count(path)) {
          auto child = std::make_unique<Scope>();
          nn::Module<float>* made = child.get();
          if (parent.empty())
            register_module(parts[k], std::move(child));
          else
            static_cast<Scope*>(scopes[parent])->register_module(parts[k], std::move(child));
          scopes[path] = made;
          names.insert(path);
        }
      }
      owner = scopes[path];
      leaf = parts.back();
    } else {
      for (char& c : leaf)
        if (c == '.') c = '_';
      if (leaf.empty()) leaf = "_";
      const std::string base = leaf;
      for (int k = 1; names.count(leaf); ++k) leaf = base + "_" + std::to_string(k);
    }
    names.insert(owner ? init.name : leaf);
    auto& value = std::get<Tensor<float>>(init.value);
    if (init.buffer) {
      if (owner)
        static_cast<Scope*>(owner)->register_buffer(leaf, value);
      else
        register_buffer(leaf, value);
      g.buffers.push_back({init.slot, owner, leaf});
    } else {
      Var<float> v = owner ? static_cast<Scope*>(owner)->register_parameter(leaf, value) : register_parameter(leaf, value);
      g.params.emplace_back(init.slot, v);
    }
  }
  g.initializers.clear();
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

Model parse(std::string_view bytes, const LoadOptions& options, std::string_view what) {
  Model m(detail::read_graph(bytes, what));
  if (!options.trainable) m.freeze();
  return m;
}

Model load(const std::string& path, const LoadOptions& options) {
  return parse(gradus::io::read_file(path, "onnx::load"), options, path);
}

const std::vector<std::string>& Model::input_names() const { return graph_->input_names; }
const std::vector<std::string>& Model::output_names() const { return graph_->output_names; }
int64_t Model::opset() const { return graph_->opset; }
std::vector<std::string> Model::operators() const {
  std::vector<std::string> out;
  for (const auto& n : graph_->nodes)
    if (std::find(out.begin(), out.end(), n.op) == out.end()) out.push_back(n.op);
  return out;
}

std::vector<std::string> supported_operators() {
  std::vector<std::string> out{"Constant"};
  for (const auto& [name, entry] : detail::op_table()) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gradus::onnx
