// examples/char_lstm.cpp — a character-level LSTM language model on the licence texts Debian ships
// in /usr/share/common-licenses: Embedding(vocab, 32) -> LSTM(128, every step, stateful) ->
// Dense(128 -> vocab). 32 streams over the text, windows of 35 characters, truncated
// backpropagation through time (the stateful layer carries its state, detached, from one window
// to the next), Adam with gradient clipping by global norm 5. Prints the validation perplexity
// against the unigram baseline, the speed and a sampled continuation; exits 1 unless the model
// beats 0.6 × the unigram perplexity. At the end of training the character embedding goes to
// --logdir (default runs/char_lstm) for TensorBoard's projector: chars/tensors.tsv (one 32-value
// row per character), chars/metadata.tsv (header "char<TAB>count", then per character its
// readable form — "<space>", "<newline>", "<tab>", "\xNN" for other control and non-ASCII
// bytes — and its count in the training text) and projector_config.pbtxt. See them with
// `tensorboard --logdir runs/char_lstm`, tab Projector.
//
//   build/examples/char_lstm [--logdir D] [--device cpu|cuda] [--steps N] [--print-every K]
//   --device cuda   train and evaluate on the first CUDA GPU (the same numbers as the CPU's, to
//                   rounding: the tests compare the first 50 steps' losses)
//   --steps N       training steps (default 2500; the perplexity bar applies to full runs only)
//   --print-every K print the mean training loss of every K steps (default 250)
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/losses.hpp>
#include <gradus/nn.hpp>
#include <gradus/optim.hpp>
#include <gradus/summary/projector.hpp>

#include "flags.hpp"

namespace gd = gradus;
namespace nn = gradus::nn;
namespace fs = std::filesystem;
using Ids = gd::Tensor<int64_t>;

constexpr int64_t kBatch = 32, kSteps = 35, kEmbed = 32, kUnits = 128, kTrainSteps = 2500;

// The licence texts concatenated, each file once (GPL is a link to GPL-3, and so on).
std::string read_corpus(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::set<fs::path> seen;
  std::string text;
  for (const auto& f : files) {
    if (!seen.insert(fs::canonical(f)).second) continue;
    std::ifstream in(f, std::ios::binary);
    text.append(std::istreambuf_iterator<char>(in), {});
  }
  return text;
}

// Inputs and next-character targets of window `w`: stream s starts at s * len of `ids`.
void window(const std::vector<int64_t>& ids, int64_t len, int64_t w, Ids& x, Ids& y) {
  for (int64_t s = 0; s < kBatch; ++s)
    for (int64_t t = 0; t < kSteps; ++t) {
      const int64_t at = s * len + w * kSteps + t;
      x.data()[s * kSteps + t] = ids[size_t(at)];
      y.data()[s * kSteps + t] = ids[size_t(at + 1)];
    }
}

// The projector's label of byte `c`: the character itself when printable ASCII, else a name.
std::string char_label(unsigned char c) {
  if (c == ' ') return "<space>";
  if (c == '\n') return "<newline>";
  if (c == '\t') return "<tab>";
  if (c >= 0x21 && c < 0x7f) return std::string(1, char(c));
  char hex[8];
  std::snprintf(hex, sizeof hex, "\\x%02X", unsigned(c));  // control and non-ASCII bytes
  return hex;
}

static int run(int argc, char** argv) {
  const fs::path logdir = flag(argc, argv, "--logdir", std::string("runs/char_lstm"));
  const int64_t train_steps = flag(argc, argv, "--steps", kTrainSteps);
  const int64_t print_every = std::max<int64_t>(1, flag(argc, argv, "--print-every", int64_t{250}));
  const std::string device_name = flag(argc, argv, "--device", std::string("cpu"));
  if (device_name != "cpu" && device_name != "cuda")
    throw gd::value_error("--device: expected cpu or cuda, got '" + device_name + "'");
  const gd::Device device = device_name == "cuda" ? gd::Device(gd::cuda(0)) : gd::cpu;
  const std::string text = read_corpus("/usr/share/common-licenses");
  if (text.size() < 10000) {
    std::fprintf(stderr, "char_lstm: need the licence texts in /usr/share/common-licenses, found %zu bytes\n",
                 text.size());
    return EXIT_FAILURE;
  }
  std::array<int64_t, 256> id_of{};
  std::vector<unsigned char> byte_of;
  for (unsigned char c : text)
    if (std::find(byte_of.begin(), byte_of.end(), c) == byte_of.end()) byte_of.push_back(c);
  std::sort(byte_of.begin(), byte_of.end());
  for (size_t i = 0; i < byte_of.size(); ++i) id_of[byte_of[i]] = int64_t(i);
  const int64_t vocab = int64_t(byte_of.size());
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = id_of[static_cast<unsigned char>(text[i])];
  const auto mid = ids.begin() + ptrdiff_t(ids.size() * 9 / 10);
  const std::vector<int64_t> train(ids.begin(), mid), valid(mid, ids.end());
  std::printf("corpus: %zu characters, vocabulary %lld, train %zu, validation %zu\n", text.size(),
              static_cast<long long>(vocab), train.size(), valid.size());

  // Unigram baseline: the training frequencies (add-one smoothed) scored on the validation text.
  std::vector<double> freq(size_t(vocab), 1.0);
  for (int64_t c : train) freq[size_t(c)] += 1;
  double unigram_nll = 0;
  for (int64_t c : valid) unigram_nll -= std::log(freq[size_t(c)] / double(train.size() + size_t(vocab)));
  const double unigram_ppl = std::exp(unigram_nll / double(valid.size()));

  gd::Rng rng(42);
  nn::Embedding<float> embed({.vocab = vocab, .dim = kEmbed}, rng);
  nn::LSTM<float> lstm({.in = kEmbed, .units = kUnits, .return_sequences = true, .stateful = true}, rng);
  nn::Dense<float> head({.in = kUnits, .out = vocab}, rng);
  embed.to(device), lstm.to(device), head.to(device);  // the batches go there in the ops that read them
  std::vector<gd::Var<float>> params = embed.parameters();
  for (auto& p : lstm.parameters()) params.push_back(p);
  for (auto& p : head.parameters()) params.push_back(p);
  gd::optim::Adam<float> opt(params, {.lr = 2e-3});

  auto logits = [&](const Ids& x) {  // x [N, T] -> [N*T, vocab]
    return head.forward(gd::reshape(lstm.forward(embed.forward(x)), {-1, kUnits}));
  };

  const int64_t train_len = int64_t(train.size()) / kBatch, windows = (train_len - 1) / kSteps;
  Ids x({kBatch, kSteps}), y({kBatch * kSteps});
  const auto start = std::chrono::steady_clock::now();
  double loss_sum = 0;
  for (int64_t step = 0; step < train_steps; ++step) {
    const int64_t w = step % windows;
    if (w == 0) lstm.reset_states();  // the streams wrap around: start afresh
    window(train, train_len, w, x, y);
    gd::Var<float> loss = gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits(x));
    opt.zero_grad();
    gd::backward(loss);
    gd::optim::clip_by_global_norm(opt.params(), 5.0);
    opt.step();
    loss_sum += double(loss.item());
    if ((step + 1) % print_every == 0) {
      std::printf("step %5lld  train loss %.6f\n", static_cast<long long>(step + 1), loss_sum / double(print_every));
      loss_sum = 0;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // The trained character embedding for TensorBoard's projector: one row per character.
  std::vector<int64_t> count(size_t(vocab), 0);
  for (int64_t c : train) ++count[size_t(c)];
  std::vector<std::vector<std::string>> rows;
  for (int64_t c = 0; c < vocab; ++c) rows.push_back({char_label(byte_of[size_t(c)]), std::to_string(count[size_t(c)])});
  gd::summary::write_projector(logdir, {{.tensor_name = "chars",
                                         .tensor = embed.embeddings().value().to(gd::cpu),
                                         .metadata_header = {"char", "count"},
                                         .metadata_rows = rows}});
  std::printf("projector: %lld characters in %s (tensorboard --logdir %s, tab Projector)\n",
              static_cast<long long>(vocab), logdir.c_str(), logdir.c_str());

  // Validation: the same 32-stream layout over the held-out text, carrying the state throughout.
  gd::no_grad guard;
  lstm.reset_states();
  const int64_t valid_len = int64_t(valid.size()) / kBatch, valid_windows = (valid_len - 1) / kSteps;
  double nll = 0;
  for (int64_t w = 0; w < valid_windows; ++w) {
    window(valid, valid_len, w, x, y);
    nll += double(gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits(x)).item());
  }
  const double ppl = std::exp(nll / double(valid_windows));

  std::printf("training: %lld steps in %.1f s (%.1f steps/s)\n", static_cast<long long>(train_steps), seconds,
              double(train_steps) / seconds);
  std::printf("validation perplexity %.3f  unigram baseline %.3f  ratio %.3f\n", ppl, unigram_ppl, ppl / unigram_ppl);

  // A sampled continuation (temperature 0.7) of a prompt, one character at a time.
  std::string out = "This program is free software";
  lstm.reset_states();
  Ids prompt({1, int64_t(out.size())});
  for (size_t i = 0; i < out.size(); ++i) prompt.data()[i] = id_of[static_cast<unsigned char>(out[i])];
  gd::Tensor<float> z = logits(prompt).value().to(gd::cpu);
  for (int i = 0; i < 200; ++i) {
    const float* last = z.data() + (z.dim(0) - 1) * vocab;
    const float top = *std::max_element(last, last + vocab);
    std::vector<double> p(static_cast<size_t>(vocab));
    double total = 0;
    for (int64_t c = 0; c < vocab; ++c) total += p[size_t(c)] = std::exp((last[c] - top) / 0.7);
    double u = rng.uniform() * total;
    int64_t c = 0;
    while (c + 1 < vocab && (u -= p[size_t(c)]) > 0) ++c;
    out.push_back(char(byte_of[size_t(c)]));
    z = logits(Ids::from({c}, {1, 1})).value().to(gd::cpu);
  }
  std::printf("sample:\n%s\n", out.c_str());
  if (train_steps < kTrainSteps) return EXIT_SUCCESS;  // a short run: no bar
  return ppl < 0.6 * unigram_ppl ? EXIT_SUCCESS : EXIT_FAILURE;
}

// A gd::error that escapes prints its message and exits with status 1.
int main(int argc, char** argv) {
  return gd::guard_main([&] { return run(argc, argv); });
}
