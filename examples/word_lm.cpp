// examples/word_lm.cpp — a word-level LSTM language model in the style of the PTB tutorial
// (Zaremba et al. 2014, "small" configuration scaled to the corpus) on the fortune cookies of
// Debian's `fortunes` package (/usr/share/games/fortunes).
//
//   corpus:  every plain-text fortune file; one fortune = the text between "%" lines. Lower-cased,
//            words are runs of letters, digits and apostrophes, numbers become "N", other
//            punctuation is dropped, and <eos> ends each fortune (as PTB's preprocessing).
//            Fortune i goes to validation when i % 20 == 18, to test when i % 20 == 19.
//   files:   the vocabulary (one word per line, the 10,000 most frequent training words with
//            <unk> and <eos>) and train/valid/test id files (one fortune's ids per line) are
//            written to --dir, then read back, and training uses what was read.
//   model:   Embedding(V, H) -> dropout -> LSTM(H) -> dropout -> LSTM(H) -> dropout -> logits
//            h · Eᵀ + b with the embedding table tied to the output projection (Press & Wolf 2017).
//   train:   truncated BPTT over 35 steps on 20 streams (gd::data::ptb_batches' layout), the LSTM
//            state carried (detached) from window to window, SGD with lr 1 halved every epoch
//            after the second, gradients clipped to global norm 5, per-token cross-entropy
//            (gd::losses::sequence_loss with unit weights).
//   report:  validation perplexity after each epoch; test perplexity against the add-one
//            smoothed unigram model of the training words. Exits 1 unless the model's test
//            perplexity is below --bar × the unigram's (default 0.6).
//   export:  at the end of training the tied word embedding goes to --dir for TensorBoard's
//            projector: words/tensors.tsv (one row per vocabulary word), words/metadata.tsv
//            (header "word<TAB>count", then each word and its count in the training words;
//            <unk> counts the words left out) and projector_config.pbtxt. See them with
//            `tensorboard --logdir runs/word_lm`, tab Projector.
//
//   build/examples/word_lm                                      # 3 epochs, V 10000, H 200
//   build/examples/word_lm --vocab 2000 --hidden 64 --epochs 1 --max-steps 150 --bar 0.8
//   build/examples/word_lm --device cuda ...   # on the first CUDA GPU
//   --print-every K   also print every K steps' mean per-token training loss ("step N  train loss L")
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gradus/data.hpp>
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

namespace {

constexpr int64_t kBatch = 20, kSteps = 35, kEvalBatch = 10;
constexpr double kClip = 5.0;

// The words of one fortune, PTB-style.
std::vector<std::string> tokenize(const std::string& text) {
  std::vector<std::string> words;
  std::string w;
  auto flush = [&] {
    if (w.empty()) return;
    const bool number = std::all_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '\''; });
    words.push_back(number ? "N" : w);
    w.clear();
  };
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '\'')
      w.push_back(char(std::tolower(c)));
    else
      flush();
  }
  flush();
  return words;
}

// Every fortune of the plain-text files in `dir` (sorted by name, so the split is reproducible).
std::vector<std::string> read_fortunes(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto ext = e.path().extension();
    if (e.is_regular_file() && !e.is_symlink() && ext != ".dat" && ext != ".u8") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> fortunes;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::string line, current;
    while (std::getline(in, line)) {
      if (line == "%") {
        if (!current.empty()) fortunes.push_back(current);
        current.clear();
      } else {
        current += line + '\n';
      }
    }
    if (!current.empty()) fortunes.push_back(current);
  }
  return fortunes;
}

// One fortune's ids per line, space-separated.
void write_ids(const fs::path& path, const std::vector<std::vector<int64_t>>& lines) {
  std::ofstream out(path);
  for (const auto& l : lines) {
    for (size_t i = 0; i < l.size(); ++i) out << (i ? " " : "") << l[i];
    out << '\n';
  }
  if (!out) throw gd::io_error("word_lm: cannot write " + path.string());
}

std::vector<int64_t> read_ids(const fs::path& path, int64_t vocab) {
  std::ifstream in(path);
  if (!in) throw gd::io_error("word_lm: cannot read " + path.string());
  std::vector<int64_t> ids;
  for (int64_t id; in >> id;) {
    if (id < 0 || id >= vocab) throw gd::io_error("word_lm: " + path.string() + ": id " + std::to_string(id) + " out of range");
    ids.push_back(id);
  }
  return ids;
}

// Inputs and next-word targets [streams, kSteps] of window `w`, laid out as ptb_batches does.
void window(const std::vector<int64_t>& ids, int64_t streams, int64_t w, Ids& x, Ids& y) {
  const int64_t len = int64_t(ids.size()) / streams;
  for (int64_t s = 0; s < streams; ++s)
    for (int64_t t = 0; t < kSteps; ++t) {
      const int64_t at = s * len + w * kSteps + t;
      x.data()[s * kSteps + t] = ids[size_t(at)];
      y.data()[s * kSteps + t] = ids[size_t(at + 1)];
    }
}
int64_t windows(const std::vector<int64_t>& ids, int64_t streams) {
  return (int64_t(ids.size()) / streams - 1) / kSteps;
}

struct Model {
  Model(int64_t vocab, int64_t hidden, double dropout, gd::Rng& rng)
      : hidden(hidden),
        embed({.vocab = vocab, .dim = hidden, .initializer = gd::init::random_uniform{-0.1, 0.1}}, rng),
        lstm1({.in = hidden, .units = hidden, .return_sequences = true, .stateful = true}, rng),
        lstm2({.in = hidden, .units = hidden, .return_sequences = true, .stateful = true}, rng),
        drop({.rate = dropout}, rng),
        out(embed) {}

  // x [N, T] -> logits [N, T, vocab]
  gd::Var<float> logits(const Ids& x) {
    gd::Var<float> h = drop.forward(embed.forward(x));
    h = drop.forward(lstm1.forward(h));
    h = drop.forward(lstm2.forward(h));
    return out.forward(h);
  }
  std::vector<gd::Var<float>> parameters() const {
    std::vector<gd::Var<float>> p = embed.parameters();
    for (auto& v : lstm1.parameters()) p.push_back(v);
    for (auto& v : lstm2.parameters()) p.push_back(v);
    for (auto& v : out.parameters()) p.push_back(v);  // the bias: the table is the embedding's
    return p;
  }
  void train(bool on) { drop.train(on); }
  void to(gd::Device device) {
    embed.to(device), lstm1.to(device), lstm2.to(device), out.to(device);  // out's table is embed's
  }
  void reset_states() {
    lstm1.reset_states();
    lstm2.reset_states();
  }

  int64_t hidden;
  nn::Embedding<float> embed;
  nn::LSTM<float> lstm1, lstm2;
  nn::Dropout<float> drop;
  nn::TiedOutput<float> out;
};

// Mean per-token cross-entropy over every window of `ids` laid out in kEvalBatch streams.
double mean_nll(Model& m, const std::vector<int64_t>& ids) {
  gd::no_grad guard;
  m.train(false);
  m.reset_states();
  Ids x({kEvalBatch, kSteps}), y({kEvalBatch, kSteps});
  const gd::Tensor<float> ones = gd::Tensor<float>::ones({kEvalBatch, kSteps}).to(m.embed.device());
  double nll = 0;
  const int64_t n = windows(ids, kEvalBatch);
  for (int64_t w = 0; w < n; ++w) {
    window(ids, kEvalBatch, w, x, y);
    nll += double(gd::losses::sequence_loss(y, m.logits(x), ones).item());  // mean over the tokens
  }
  m.train(true);
  m.reset_states();
  return nll / double(n);
}

int run(int argc, char** argv) {
  const fs::path corpus = flag(argc, argv, "--corpus", std::string("/usr/share/games/fortunes"));
  const fs::path dir = flag(argc, argv, "--dir", std::string("runs/word_lm"));
  const int64_t max_vocab = flag(argc, argv, "--vocab", int64_t(10000));
  const int64_t hidden = flag(argc, argv, "--hidden", int64_t(200));
  const int64_t epochs = flag(argc, argv, "--epochs", int64_t(3));
  const int64_t max_steps = flag(argc, argv, "--max-steps", int64_t(0));  // per epoch; 0: every window
  const double dropout = double(flag(argc, argv, "--dropout-percent", int64_t(25))) / 100;
  const double bar = std::atof(flag(argc, argv, "--bar", std::string("0.6")).c_str());
  const int64_t print_every = flag(argc, argv, "--print-every", int64_t(0));
  const std::string device_name = flag(argc, argv, "--device", std::string("cpu"));
  if (device_name != "cpu" && device_name != "cuda")
    throw gd::value_error("--device: expected cpu or cuda, got '" + device_name + "'");
  const gd::Device device = device_name == "cuda" ? gd::Device(gd::cuda(0)) : gd::cpu;

  const std::vector<std::string> fortunes = read_fortunes(corpus);
  if (fortunes.size() < 1000) {
    std::fprintf(stderr, "word_lm: need Debian's fortunes in %s (apt-get install fortunes), found %zu fortunes\n",
                 corpus.c_str(), fortunes.size());
    return EXIT_FAILURE;
  }
  std::vector<std::vector<std::string>> split[3];  // train, valid, test: the words of each fortune
  for (size_t i = 0; i < fortunes.size(); ++i) {
    std::vector<std::string> words = tokenize(fortunes[i]);
    if (words.empty()) continue;
    words.push_back("<eos>");
    split[i % 20 == 18 ? 1 : i % 20 == 19 ? 2 : 0].push_back(std::move(words));
  }
  std::vector<std::string> train_words;
  for (const auto& f : split[0]) train_words.insert(train_words.end(), f.begin(), f.end());

  // The vocabulary and the id files, written and read back.
  fs::create_directories(dir);
  const gd::data::VocabularyOptions vo{.max_size = max_vocab};
  gd::data::Vocabulary::build(train_words, vo).save((dir / "vocab.txt").string());
  const gd::data::Vocabulary vocab = gd::data::Vocabulary::load((dir / "vocab.txt").string(), vo);
  const char* names[3] = {"train", "valid", "test"};
  std::vector<int64_t> ids[3];
  for (int s = 0; s < 3; ++s) {
    std::vector<std::vector<int64_t>> lines;
    for (const auto& f : split[s]) lines.push_back(vocab.encode(f));
    write_ids(dir / (std::string(names[s]) + ".ids"), lines);
    ids[s] = read_ids(dir / (std::string(names[s]) + ".ids"), vocab.size());
  }
  const int64_t V = vocab.size();
  std::printf("corpus: %zu fortunes; vocabulary %lld (%s); train %zu, valid %zu, test %zu words\n", fortunes.size(),
              static_cast<long long>(V), (dir / "vocab.txt").c_str(), ids[0].size(), ids[1].size(), ids[2].size());

  // Unigram baseline: add-one smoothed training frequencies, scored on the test words.
  std::vector<double> freq(size_t(V), 1.0);
  for (const int64_t w : ids[0]) freq[size_t(w)] += 1;
  double unigram_nll = 0;
  for (const int64_t w : ids[2]) unigram_nll -= std::log(freq[size_t(w)] / double(ids[0].size() + size_t(V)));
  const double unigram_ppl = std::exp(unigram_nll / double(ids[2].size()));

  gd::Rng rng(7);
  Model model(V, hidden, dropout, rng);
  model.to(device);  // the batches go there in the ops that read them
  model.train(true);
  gd::optim::SGD<float> opt(model.parameters(), {.lr = 1.0});
  const int64_t per_epoch = max_steps > 0 ? std::min(max_steps, windows(ids[0], kBatch)) : windows(ids[0], kBatch);
  std::printf("model: embedding %lld (tied to the output), 2 x LSTM %lld, dropout %.2f; %lld steps per epoch\n",
              static_cast<long long>(hidden), static_cast<long long>(hidden), dropout,
              static_cast<long long>(per_epoch));

  Ids x({kBatch, kSteps}), y({kBatch, kSteps});
  const gd::Tensor<float> ones = gd::Tensor<float>::ones({kBatch, kSteps}).to(device);
  double print_sum = 0;
  const auto start = std::chrono::steady_clock::now();
  int64_t steps = 0;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    opt.set_lr(epoch < 2 ? 1.0 : std::pow(0.5, double(epoch - 1)));
    model.reset_states();
    double loss_sum = 0;
    for (int64_t w = 0; w < per_epoch; ++w, ++steps) {
      window(ids[0], kBatch, w, x, y);
      // as the PTB tutorial: the per-step losses averaged over the batch ([35]), summed over the steps
      gd::Var<float> loss =
          gd::sum(gd::losses::sequence_loss(y, model.logits(x), ones, {.average_across_timesteps = false}));
      opt.zero_grad();
      gd::backward(loss);
      gd::optim::clip_by_global_norm(opt.params(), kClip);
      opt.step();
      const double per_token = double(loss.item()) / double(kSteps);
      loss_sum += per_token, print_sum += per_token;
      if (print_every > 0 && (steps + 1) % print_every == 0) {
        std::printf("step %5lld  train loss %.6f\n", static_cast<long long>(steps + 1), print_sum / double(print_every));
        print_sum = 0;
      }
    }
    std::printf("epoch %lld  lr %.3f  train perplexity %.1f  valid perplexity %.1f\n", static_cast<long long>(epoch + 1),
                opt.lr(), std::exp(loss_sum / double(per_epoch)), std::exp(mean_nll(model, ids[1])));
    std::fflush(stdout);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // The trained word embedding (the table tied to the output) for TensorBoard's projector.
  std::vector<int64_t> count(size_t(V), 0);
  for (const int64_t w : ids[0]) ++count[size_t(w)];
  std::vector<std::vector<std::string>> rows;
  for (int64_t w = 0; w < V; ++w) rows.push_back({vocab.word(w), std::to_string(count[size_t(w)])});
  gd::summary::write_projector(dir, {{.tensor_name = "words",
                                      .tensor = model.embed.embeddings().value().to(gd::cpu),
                                      .metadata_header = {"word", "count"},
                                      .metadata_rows = rows}});
  std::printf("projector: %lld words in %s (tensorboard --logdir %s, tab Projector)\n", static_cast<long long>(V),
              dir.c_str(), dir.c_str());

  const double test_ppl = std::exp(mean_nll(model, ids[2]));
  std::printf("training: %lld steps in %.1f s (%.0f words/s)\n", static_cast<long long>(steps), seconds,
              double(steps * kBatch * kSteps) / seconds);
  std::printf("test perplexity %.1f  unigram baseline %.1f  ratio %.3f\n", test_ppl, unigram_ppl,
              test_ppl / unigram_ppl);
  return test_ppl < bar * unigram_ppl ? EXIT_SUCCESS : EXIT_FAILURE;
}

}  // namespace

// A gd::error that escapes prints its message and exits with status 1.
int main(int argc, char** argv) {
  return gd::guard_main([&] { return run(argc, argv); });
}
