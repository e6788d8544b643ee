// gradus/data/example.hpp — the element of an input pipeline: an ordered list of fields, each a
// tensor (float, double or int64) or a string (or, after batching, a list of strings), with an
// optional name. One tensor, a tuple of tensors and named fields are all an Example, so every
// Dataset is the same type and a pipeline compiles once, whatever flows through it.
// Not tf.train.Example, the protocol buffer of TFRecord files (gd::io::Example, in
// gradus/io/example.hpp): a pipeline reads such records as string fields and
// data::parse_example turns each into an element with one field per feature.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::data {

/// A batch of strings (what `batch` makes of a string field).
using Strings = std::vector<std::string>;
/// One field of an Example.
using Value = std::variant<Tensor<float>, Tensor<double>, Tensor<int64_t>, std::string, Strings>;

/// What a field holds, in words: "float32 [2,3]", "int64 []", "string", "strings [4]".
std::string describe(const Value& v);

namespace detail {
template <class T>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, float>) return "float32";
  else if constexpr (std::is_same_v<T, double>) return "float64";
  else return "int64";
}
}  // namespace detail

/// An element of a Dataset: fields in order, each with a name ("" for a positional one).
///   gd::data::Example a = gd::Tensor<float>::ones({3});                     // one field
///   auto b = gd::data::Example::tuple(x, y);                                // two unnamed fields
///   gd::data::Example c{{"image", img}, {"label", lbl}, {"path", std::string("a.png")}};
///   c.tensor<float>("image");  c.tensor<int64_t>(1);  c.string("path");
///   auto [xs, ys] = batch.as<float, int64_t>();                             // fields 0 and 1
class Example {
 public:
  struct Field {
    std::string name;
    Value value;
  };

  Example() = default;
  /// One unnamed field.
  template <gradus::Element T>
  Example(Tensor<T> t) {  // NOLINT: implicit, so a map function may return a tensor
    fields_.push_back({std::string(), Value(std::move(t))});
  }
  Example(std::string s) { fields_.push_back({std::string(), Value(std::move(s))}); }  // NOLINT
  /// Named (or, with "", positional) fields in order: {{"x", x}, {"y", y}}.
  Example(std::initializer_list<Field> fields);
  /// Unnamed fields in order: Example::tuple(x, y).
  template <class... V>
  static Example tuple(V&&... values) {
    Example e;
    (e.fields_.push_back({std::string(), Value(std::forward<V>(values))}), ...);
    return e;
  }

  /// Appends a field; a non-empty name must not be taken yet.
  Example& add(std::string name, Value v);

  int size() const { return int(fields_.size()); }
  bool empty() const { return fields_.empty(); }
  const std::vector<Field>& fields() const { return fields_; }
  std::vector<Field>& fields() { return fields_; }
  const std::string& name(int i) const { return fields_[size_t(check(i))].name; }
  /// The position of the field `name`, or -1.
  int index(std::string_view name) const {
    for (size_t i = 0; i < fields_.size(); ++i)
      if (fields_[i].name == name) return int(i);
    return -1;
  }
  bool has(std::string_view name) const { return !name.empty() && index(name) >= 0; }

  const Value& operator[](int i) const { return fields_[size_t(check(i))].value; }
  Value& operator[](int i) { return fields_[size_t(check(i))].value; }
  const Value& operator[](std::string_view name) const { return fields_[size_t(find(name))].value; }
  Value& operator[](std::string_view name) { return fields_[size_t(find(name))].value; }

  /// The tensor of field `i` (or `name`); value_error when the field holds something else.
  template <gradus::Element T>
  const Tensor<T>& tensor(int i) const {
    return get<Tensor<T>>(check(i), detail::dtype_name<T>(), "tensor");
  }
  template <gradus::Element T>
  const Tensor<T>& tensor(std::string_view name) const {
    return get<Tensor<T>>(find(name), detail::dtype_name<T>(), "tensor");
  }
  const std::string& string(int i) const { return get<std::string>(check(i), "a string", "string"); }
  const std::string& string(std::string_view name) const { return get<std::string>(find(name), "a string", "string"); }
  const Strings& strings(int i) const { return get<Strings>(check(i), "a list of strings", "strings"); }
  const Strings& strings(std::string_view name) const { return get<Strings>(find(name), "a list of strings", "strings"); }

  /// Fields 0..n-1 as tensors of the given types (there must be exactly n fields):
  ///   auto [x, y] = batch.as<float, int64_t>();
  template <gradus::Element... T>
  std::tuple<Tensor<T>...> as() const {
    GRADUS_CHECK(value_error, size() == int(sizeof...(T)), "Example::as: asked for ", sizeof...(T),
                 " tensors, the example has ", size(), " fields ", *this);
    return as_impl<T...>(std::index_sequence_for<T...>{});
  }

  friend std::ostream& operator<<(std::ostream& os, const Example& e) {
    os << '{';
    for (size_t i = 0; i < e.fields_.size(); ++i) {
      if (i) os << ", ";
      if (!e.fields_[i].name.empty()) os << e.fields_[i].name << ": ";
      os << describe(e.fields_[i].value);
    }
    return os << '}';
  }

 private:
  int check(int i) const {
    GRADUS_CHECK(value_error, i >= 0 && i < size(), "Example: no field ", i, " in ", *this);
    return i;
  }
  int find(std::string_view name) const {
    const int i = name.empty() ? -1 : index(name);
    GRADUS_CHECK(value_error, i >= 0, "Example: no field named '", name, "' in ", *this);
    return i;
  }
  template <class V>
  const V& get(int i, const char* want, const char* who) const {
    const Field& f = fields_[size_t(i)];
    const V* v = std::get_if<V>(&f.value);
    GRADUS_CHECK(value_error, v, "Example::", who, ": field ", f.name.empty() ? std::to_string(i) : "'" + f.name + "'",
                 " holds ", describe(f.value), ", not ", want);
    return *v;
  }
  template <class... T, size_t... I>
  std::tuple<Tensor<T>...> as_impl(std::index_sequence<I...>) const {
    return {tensor<T>(int(I))...};
  }

  std::vector<Field> fields_;
};

}  // namespace gradus::data

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data {
GRADUS_INLINE std::string describe(const Value& v) {
  switch (v.index()) {
    case 0: return gradus::detail::str("float32 ", std::get<0>(v).shape());
    case 1: return gradus::detail::str("float64 ", std::get<1>(v).shape());
    case 2: return gradus::detail::str("int64 ", std::get<2>(v).shape());
    case 3: return "string";
    default: return gradus::detail::str("strings [", std::get<4>(v).size(), "]");
  }
}

GRADUS_INLINE Example::Example(std::initializer_list<Field> fields) {
  for (const Field& f : fields) add(f.name, f.value);
}

GRADUS_INLINE Example& Example::add(std::string name, Value v) {
  GRADUS_CHECK(value_error, name.empty() || index(name) < 0, "Example: two fields named '", name, "'");
  fields_.push_back({std::move(name), std::move(v)});
  return *this;
}
}  // namespace gradus::data
#endif  // GRADUS_DEFINE_COMPILED
