// Lazy layers and checkpoints: a model whose Dense, Conv2d and LSTM layers take their input size
// from the first batch restores into a freshly constructed twin that has seen no input (io::load,
// io::restore_module), every layer kind in it, and predicts bit for bit as the saved model did.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include <gradus/gradus.hpp>
#include <gradus/io.hpp>
#include <gradus/nn.hpp>
#include <gradus/optim.hpp>

#include "../support/short_names.hpp"

using Catch::Contains;
using Tf = gd::Tensor<float>;
using Ti = gd::Tensor<int64_t>;
using V = gd::Var<float>;

namespace {

/// Conv2d (lazy) -> BatchNorm -> MaxPool2d -> Conv2d (lazy, tanh) -> AvgPool2d -> Flatten ->
/// Dense (lazy) -> LayerNorm -> Dropout -> Dense; and GlobalAvgPool of the second convolution
/// added in, so that both the pooled and the flattened paths carry gradients.
struct ImageNet : nn::Module<float, ImageNet> {
  nn::Conv2d<float> conv1, conv2;
  nn::BatchNorm<float> bn;
  nn::Dense<float> d1, side, d2;
  nn::LayerNorm<float> ln;
  nn::Dropout<float> drop;
  nn::MaxPool2d max_pool;
  nn::AvgPool2d avg_pool{.pool_size = {2, 2}, .strides = {1, 1}};
  nn::GlobalAvgPool global_pool;
  nn::Flatten flatten;

  explicit ImageNet(gd::Rng& rng)
      : conv1({.filters = 4, .kernel_size = {3, 3}, .padding = gd::Padding::same, .activation = nn::relu}, rng),
        conv2({.filters = 3, .kernel_size = {2, 2}, .activation = nn::tanh}, rng),
        bn({.features = 4}),
        d1({.out = 6, .activation = nn::elu}, rng),
        side({.out = 6}, rng),
        d2({.in = 6, .out = 5}, rng),
        ln({.features = 6}),
        drop({.rate = 0.25}, rng) {
    register_module("conv1", conv1);
    register_module("bn", bn);
    register_module("conv2", conv2);
    register_module("d1", d1);
    register_module("side", side);
    register_module("ln", ln);
    register_module("drop", drop);
    register_module("d2", d2);
  }
  V forward(const Tf& images) {
    const V c = conv2(max_pool(V(bn(conv1(V::constant(images))))));
    const V h(d1(flatten(avg_pool(c))) + side(global_pool(c)));
    return d2(drop(V(ln(h))));
  }
};

/// Embedding -> LSTM (lazy) -> Bidirectional LSTM (lazy) -> GRU -> multi-head self-attention ->
/// SimpleRNN -> Dense (lazy).
struct SequenceNet : nn::Module<float, SequenceNet> {
  nn::Embedding<float> embed;
  nn::LSTM<float> lstm;
  nn::Bidirectional<nn::LSTM<float>> bi;
  nn::GRU<float> gru;
  nn::MultiHeadAttention<float> mha;
  nn::SimpleRNN<float> rnn;
  nn::Dense<float> head;

  explicit SequenceNet(gd::Rng& rng)
      : embed({.vocab = 11, .dim = 5}, rng),
        lstm({.units = 4, .return_sequences = true}, rng),
        bi({.units = 3, .return_sequences = true}, rng),
        gru({.in = 6, .units = 4, .return_sequences = true}, rng),
        mha({.num_heads = 2, .key_dim = 3, .query_units = 4}, rng),
        rnn({.in = 4, .units = 3}, rng),
        head({.out = 2}, rng) {
    register_module("embed", embed);
    register_module("lstm", lstm);
    register_module("bi", bi);
    register_module("gru", gru);
    register_module("mha", mha);
    register_module("rnn", rnn);
    register_module("head", head);
  }
  V forward(const Ti& ids) {
    const V g = gru(bi(lstm(embed(ids))));
    const V attended = mha(g, g).context;
    return head(rnn(V(attended + g)));
  }
};

Tf images(uint64_t seed) {
  gd::Rng r(seed);
  return Tf::random_normal({3, 8, 8, 2}, r);
}
Ti ids(uint64_t seed) {
  gd::Rng r(seed);
  Ti t = Ti::empty({3, 5});
  for (int64_t i = 0; i < t.size(); ++i) t.data()[i] = int64_t(r.below(11));
  return t;
}

/// A few Adam steps on a squared-error loss, so that weights, BatchNorm's moving statistics and
/// the optimizer's moments all differ from their initial values.
template <class Net, class Input>
void train(Net& net, gd::optim::Adam<float>& opt, Input (*input)(uint64_t)) {
  for (uint64_t s = 0; s < 3; ++s) {
    const V y = net(input(10 + s));
    opt.minimize(gd::mean(gd::square(y - 0.5f)));
  }
}

template <class Net, class Input>
Tf predict(Net& net, const Input& x) {
  gd::no_grad guard;
  net.eval();
  Tf y = net(x).value().clone();
  net.train();
  return y;
}

bool same_bits(const Tf& a, const Tf& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), size_t(a.size()) * sizeof(float)) == 0;
}

/// Saves a trained `Net` (built by its first batches), loads it into a fresh `Net` that has seen
/// no input, and compares predictions and the optimizer state bit for bit.
template <class Net, class Input>
void check_reload(const std::string& file, Input (*input)(uint64_t)) {
  gd::Rng rng_a(1);
  Net a(rng_a);
  gd::optim::Adam<float> opt_a(a.parameters(), {.lr = 0.01});
  train(a, opt_a, input);
  io::save(file, a, opt_a, 3);

  gd::Rng rng_b(99);  // other initial values: only the checkpoint can make the twin agree
  Net b(rng_b);
  gd::optim::Adam<float> opt_b(b.parameters(), {.lr = 0.01});
  CHECK(io::load(file, b, opt_b) == 3);
  const auto input_x = input(77);
  CHECK(same_bits(predict(b, input_x), predict(a, input_x)));
  CHECK(opt_b.iterations() == 3);

  // Both continue training alike: the restored optimizer state fits the built layers.
  const auto step = [&](Net& net, gd::optim::Adam<float>& opt) {
    net.eval();  // no dropout draws: the two models' generators differ
    opt.minimize(gd::mean(gd::square(net(input(5)) - 0.5f)));
    net.train();
  };
  step(a, opt_a);
  step(b, opt_b);
  CHECK(same_bits(predict(b, input_x), predict(a, input_x)));
}

}  // namespace

TEST_CASE("lazy restore: a CNN of every image layer kind reloads into a fresh lazy twin bit for bit",
          "[io][checkpoint][lazy]") {
  check_reload<ImageNet>("lazy_image_net.safetensors", images);
}

TEST_CASE("lazy restore: a sequence model of every sequence layer kind reloads into a fresh lazy twin bit for bit",
          "[io][checkpoint][lazy]") {
  check_reload<SequenceNet>("lazy_sequence_net.safetensors", ids);
}

TEST_CASE("lazy restore: restore_module builds the lazy layers from the checkpoint's shapes", "[io][checkpoint][lazy]") {
  gd::Rng rng(3);
  ImageNet a(rng);
  (void)a(images(1));  // builds the lazy layers
  io::TensorList list;
  io::add_module(list, a);
  const io::Safetensors ckpt = io::decode_safetensors(io::encode_safetensors(list), "in memory");

  ImageNet b(rng);
  CHECK_FALSE(b.conv1.built());
  CHECK(b.d1.kernel().shape() == gd::Shape{0, 6});
  io::restore_module(ckpt, b);
  CHECK(b.conv1.built());
  CHECK(b.conv1.in() == 2);
  CHECK(b.conv2.in() == 4);
  CHECK(b.d1.in() == 12);  // 2 x 2 x 3 after the pools
  CHECK(b.d1.kernel().shape() == gd::Shape{12, 6});
  CHECK(same_bits(b.d1.kernel().value(), a.d1.kernel().value()));
  CHECK(same_bits(predict(b, images(2)), predict(a, images(2))));
}

TEST_CASE("lazy restore: a checkpoint that does not fit leaves the lazy layers waiting", "[io][checkpoint][lazy]") {
  const fs::path file = "lazy_misfit.safetensors";
  gd::Rng rng(4);
  struct One : nn::Module<float> {
    nn::Dense<float> d;
    One(gd::Rng& r, int64_t out) : d({.out = out}, r) { register_module("d", d); }
  };
  One saved(rng, 7);
  (void)saved.d(Tf::ones({2, 3}));
  io::save(file, saved);

  One other(rng, 6);
  CHECK_THROWS_WITH(io::load(file, other),
                    Contains("'model/d.kernel' has shape [3,7] in the checkpoint but [0,6] in the module"));
  CHECK_FALSE(other.d.built());

  // The model fits but the optimizer state does not: io::load puts the lazy layer back unbuilt.
  One twin(rng, 7);
  gd::optim::SGD<float> sgd(saved.parameters(), {.lr = 0.1});
  io::save(file, saved, sgd);  // SGD without momentum: no per-parameter state
  gd::optim::Adam<float> adam(twin.parameters(), {.lr = 0.1});
  CHECK_THROWS_AS(io::load(file, twin, adam), gd::io_error);
  CHECK_FALSE(twin.d.built());
  CHECK(twin.d.kernel().shape() == gd::Shape{0, 7});
  const V y = twin.d(Tf::ones({2, 5}));  // and builds from its first input as before
  CHECK(twin.d.in() == 5);
  CHECK(y.shape() == gd::Shape{2, 7});
}

TEST_CASE("io::load names itself when the file is missing", "[io][checkpoint]") {
  gd::Rng rng(5);
  struct One : nn::Module<float> {
    nn::Dense<float> d;
    explicit One(gd::Rng& r) : d({.in = 2, .out = 2}, r) { register_module("d", d); }
  } m(rng);
  CHECK_THROWS_WITH(io::load("no_such_checkpoint.safetensors", m),
                    Contains("load: cannot open 'no_such_checkpoint.safetensors'"));
}
