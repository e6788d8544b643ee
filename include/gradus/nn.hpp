// gradus/nn.hpp — the layers area (gd::nn): Module, layers, Sequential and regularizers. The
// generic gradient check of a module, check_module_gradient, is test-only: <gradus/testing/module_check.hpp>.
//   gd::Rng rng(42);
//   gd::nn::Sequential net(gd::nn::Dense<float>({.in = 784, .out = 500, .activation = gd::nn::relu}, rng),
//                          gd::nn::Dense<float>({.in = 500, .out = 10}, rng));
//   gd::optim::SGD opt(net.parameters(), {.lr = 0.1});
//   opt.minimize(gd::losses::sparse_softmax_cross_entropy_with_logits(labels, net.forward(x)));
#pragma once
#include "gradus/nn/module.hpp"
#include "gradus/nn/regularizers.hpp"
#include "gradus/nn/activations.hpp"
#include "gradus/nn/dense.hpp"
#include "gradus/nn/dropout.hpp"
#include "gradus/nn/normalization.hpp"
#include "gradus/nn/conv.hpp"
#include "gradus/nn/sequential.hpp"
#include "gradus/nn/registration.hpp"
#include "gradus/nn/recurrent.hpp"
#include "gradus/nn/attention.hpp"
#include "gradus/nn/bidirectional.hpp"
#include "gradus/nn/tied_output.hpp"
