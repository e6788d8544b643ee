// check_gradient(module, x): a module's gradients with respect to its parameters and its input
// agree with central differences (nn::check_module_gradient in double, delta and tolerance 1e-6).
#pragma once
#include <catch2/catch.hpp>

#include <gradus/core/tensor.hpp>
#include <gradus/testing/module_check.hpp>

namespace gradus_test {

template <class M>
void check_gradient(M& module, const gradus::Tensor<double>& x) {
  const gradus::nn::GradientReport report =
      gradus::nn::check_module_gradient(module, x, {.delta = 1e-6, .tolerance = 1e-6});
  INFO(report);
  CHECK(report.ok());
}

}  // namespace gradus_test
