// gradus/nn/sequential.hpp — Sequential: layers chained at compile time.
#pragma once
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "gradus/nn/module.hpp"

namespace gradus::nn {
namespace detail {

/// The element type of a Module-derived layer, or void for a stateless one.
template <class L>
struct layer_value {
  using type = void;
};
template <class L>
  requires std::derived_from<L, Module<float>>
struct layer_value<L> {
  using type = float;
};
template <class L>
  requires std::derived_from<L, Module<double>>
struct layer_value<L> {
  using type = double;
};

/// The element type of the first Module-derived layer (float when there is none).
template <class... L>
struct sequential_value {
  using type = float;
};
template <class L, class... R>
struct sequential_value<L, R...> {
  using type = std::conditional_t<std::is_void_v<typename layer_value<L>::type>, typename sequential_value<R...>::type,
                                  typename layer_value<L>::type>;
};

template <class T, class... L>
inline constexpr bool same_layer_values_v =
    ((std::is_void_v<typename layer_value<L>::type> || std::is_same_v<typename layer_value<L>::type, T>) && ...);

}  // namespace detail

/// Layers applied one after the other, composed at compile time: the type records every layer,
/// `forward` is one inlined chain, and a layer that returns a lazy elementwise expression (an
/// activation, LayerNorm, BatchNorm) fuses into the next materialisation. A Sequential is a
/// Module: the Module layers are registered as children "0", "1", ... by position (stateless
/// layers keep their number), so parameters read "0.kernel", "2.bias". Layers are moved in.
///   gd::nn::Sequential net(gd::nn::Dense<float>({.in = 784, .out = 500}, rng), gd::nn::ReLU{},
///                          gd::nn::Dense<float>({.in = 500, .out = 10}, rng));
///   gd::Var<float> logits = net.forward(x);   // [N, 784] -> [N, 10]
template <class... Layers>
class Sequential : public Module<typename detail::sequential_value<Layers...>::type, Sequential<Layers...>> {
 public:
  using value_type = typename detail::sequential_value<Layers...>::type;
  static_assert(sizeof...(Layers) > 0, "A_SEQUENTIAL_NEEDS_AT_LEAST_ONE_LAYER: Sequential");
  static_assert(detail::same_layer_values_v<value_type, Layers...>,
                "ALL_MODULES_OF_A_SEQUENTIAL_MUST_HAVE_THE_SAME_ELEMENT_TYPE: Sequential — Dense<float> with Dense<double>?");

  explicit Sequential(Layers... layers) : layers_(std::move(layers)...) {
    register_layers(std::index_sequence_for<Layers...>{});
  }

  /// Applies every layer in order: layer_{n-1}.forward(... layer_0.forward(x)).
  template <class X>
  auto forward(const X& x) {
    return chain<0>(x);
  }

  /// Layer I.
  template <size_t I>
  auto& get() {
    return std::get<I>(layers_);
  }
  template <size_t I>
  const auto& get() const {
    return std::get<I>(layers_);
  }
  /// Number of layers.
  static constexpr size_t size() { return sizeof...(Layers); }

  /// The summary rows of every layer by position, stateless ones (ReLU, Flatten) included.
  void summary_rows(const std::string& path, std::vector<SummaryRow>& rows) const override {
    rows.push_back(this->own_summary_row(path));
    layer_rows(path, rows, std::index_sequence_for<Layers...>{});
  }

 private:
  template <size_t... I>
  void register_layers(std::index_sequence<I...>) {
    (register_layer<I>(), ...);
  }
  template <size_t I>
  void register_layer() {
    using L = std::tuple_element_t<I, std::tuple<Layers...>>;
    if constexpr (ModuleType<L>) this->register_module(std::to_string(I), std::get<I>(layers_));
  }
  template <size_t... I>
  void layer_rows(const std::string& path, std::vector<SummaryRow>& rows, std::index_sequence<I...>) const {
    (layer_row<I>(detail::child_path(path, std::to_string(I)), rows), ...);
  }
  template <size_t I>
  void layer_row(const std::string& path, std::vector<SummaryRow>& rows) const {
    using L = std::tuple_element_t<I, std::tuple<Layers...>>;
    if constexpr (ModuleType<L>)
      std::get<I>(layers_).summary_rows(path, rows);
    else
      rows.push_back({path, detail::short_type_name(typeid(L)), "", 0,
                      stateless_outputs_[I] ? stateless_outputs_[I]->str() : std::string()});
  }
  template <size_t I, class X>
  auto chain(const X& x) {
    using L = std::tuple_element_t<I < sizeof...(Layers) ? I : 0, std::tuple<Layers...>>;
    if constexpr (I == sizeof...(Layers)) {
      return x;
    } else if constexpr (ModuleType<L>) {
      auto y = [&] {  // the layer runs under its own module path (see gd::profile)
        const gradus::detail::ModuleScope scope(static_cast<const Module<value_type, void>*>(&std::get<I>(layers_)), typeid(L));
        return std::get<I>(layers_).forward(x);
      }();
      if constexpr (requires { y.shape(); }) std::get<I>(layers_).record_output_shape(y.shape());  // for the summary
      return chain<I + 1>(y);
    } else {
      auto y = std::get<I>(layers_).forward(x);
      if constexpr (requires { y.shape(); }) stateless_outputs_[I] = y.shape();  // for the summary
      return chain<I + 1>(y);
    }
  }

  std::tuple<Layers...> layers_;
  std::array<std::optional<Shape>, sizeof...(Layers)> stateless_outputs_{};  ///< of the layers that are not modules
};

template <class... Layers>
Sequential(Layers...) -> Sequential<Layers...>;

}  // namespace gradus::nn
