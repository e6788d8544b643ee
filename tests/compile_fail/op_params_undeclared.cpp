// An op struct with run-time parameters must say how the generated CUDA source rebuilds it.
// expect: AN_OP_WITH_PARAMETERS_MUST_DECLARE_NUM_PARAMS_AND_PARAM
// max-lines: 40
#include <gradus/backend/cuda/codegen.hpp>
#include <gradus/gradus.hpp>

struct Scale : gradus::ops::UnaryOp {
  static constexpr std::string_view name = "scale";
  double factor = 2;
  auto forward(const auto& x) const { return x * gradus::ops::ScalarOf<decltype(x)>(factor); }
  auto backward(const auto&, const auto&, const auto& g) const { return g * gradus::ops::ScalarOf<decltype(g)>(factor); }
};

int main() {
  using E = gradus::UnaryExpr<Scale, gradus::Tensor<float>>;
  return int(gradus::backend::cuda::elementwise_source<E>(gradus::backend::cuda::Pass::forward).leaves);
}
