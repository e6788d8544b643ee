// Checkpoints: a module + Adam + Rng checkpoint restored into a freshly built model continues
// training bit for bit; mismatched checkpoints are rejected before anything changes; the Saver's
// files, state file, max_to_keep and latest_checkpoint; atomic writes (a write that fails halfway
// leaves the previous checkpoint intact; a stray partial temporary file is ignored).
#include <catch2/catch.hpp>
#include <algorithm>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gradus/gradus.hpp>
#include <gradus/io.hpp>
#include <gradus/nn.hpp>
#include <gradus/optim.hpp>

#include "../support/short_names.hpp"

using Catch::Contains;
using Td = gd::Tensor<double>;
using V = gd::Var<double>;

namespace {

/// Dense -> [BatchNorm] -> Dropout -> Dense [-> an unused extra Dense]: parameters, buffers and a
/// random layer whose Rng is part of the checkpoint.
struct Net : nn::Module<double> {
  nn::Dense<double> d1, d2;
  nn::Dropout<double> drop;
  nn::BatchNorm<double>* bn = nullptr;
  Net(gd::Rng& init, gd::Rng& noise, int64_t hidden = 4, bool with_bn = true, bool extra = false)
      : d1({.in = 3, .out = hidden, .activation = nn::relu}, init), d2({.in = hidden, .out = 2}, init),
        drop({.rate = 0.25}, noise) {
    register_module("d1", d1);
    if (with_bn) bn = &register_module("bn", std::make_unique<nn::BatchNorm<double>>(nn::BatchNormOptions{.features = hidden}));
    register_module("drop", drop);
    register_module("d2", d2);
    if (extra) register_module("d3", std::make_unique<nn::Dense<double>>(nn::DenseOptions{.in = 2, .out = 2}, init));
  }
  V forward(const Td& x) {
    V h = d1.forward(x);
    if (bn) h = bn->forward(h);
    return d2.forward(drop.forward(h));
  }
};

void train(Net& net, gd::optim::Optimizer<double>& opt, int64_t first, int64_t steps) {
  for (int64_t s = first; s < first + steps; ++s) {
    gd::Rng data(1000 + uint64_t(s));
    const Td x = Td::random_normal({8, 3}, data), y = Td::random_normal({8, 2}, data);
    opt.minimize(gd::mean(gd::square(net.forward(x) - y)));
  }
}

/// Every bit of the model's parameters and buffers (and the optimizer's state when given).
std::string state_bytes(const Net& net, const gd::optim::Optimizer<double>* opt = nullptr) {
  io::TensorList t;
  io::add_module(t, net);
  if (opt) io::add_optimizer(t, *opt);
  return io::encode_safetensors(t);
}

fs::path fresh_dir(const std::string& name) {
  fs::remove_all(name);
  return fs::path(name);
}

io::TensorList tiny(double v) { return {{"x", Td::scalar(v)}}; }

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("io: a restored checkpoint continues training bit for bit", "[io][checkpoint]") {
  const fs::path dir = fresh_dir("ckpt_continue");
  gd::Rng init_a(1), noise_a(2);
  Net a(init_a, noise_a);
  gd::optim::Adam<double> opt_a(a.parameters(), {.lr = 0.05});
  train(a, opt_a, 0, 3);

  io::Saver saver(dir);
  io::TensorList c;
  io::add_module(c, a);
  io::add_optimizer(c, opt_a);
  io::add_rng(c, noise_a);
  CHECK(saver.save(3, c) == dir / "model.ckpt-3.safetensors");
  const std::string at_save = state_bytes(a, &opt_a);
  train(a, opt_a, 3, 4);
  const std::string after = state_bytes(a, &opt_a);

  gd::Rng init_b(77), noise_b(78);
  Net b(init_b, noise_b);
  gd::optim::Adam<double> opt_b(b.parameters(), {.lr = 0.05});
  CHECK(state_bytes(b, &opt_b) != at_save);
  const auto latest = io::latest_checkpoint(dir);
  REQUIRE(latest);
  const io::Safetensors ckpt = io::load_safetensors(*latest);
  CHECK(io::checkpoint_step(ckpt) == 3);
  CHECK(ckpt.find("model/bn.moving_mean") != nullptr);  // buffers are saved
  CHECK(ckpt.find("optimizer/param0/m") != nullptr);
  io::restore_module(ckpt, b);
  io::restore_optimizer(ckpt, opt_b);
  io::restore_rng(ckpt, noise_b);
  CHECK(state_bytes(b, &opt_b) == at_save);
  CHECK(opt_b.iterations() == 3);
  CHECK(noise_b.state() != noise_a.state());  // noise_a moved on while training
  train(b, opt_b, 3, 4);
  CHECK(state_bytes(b, &opt_b) == after);
  CHECK(noise_b.state() == noise_a.state());
}

TEST_CASE("io: mismatched checkpoints are rejected before anything changes", "[io][checkpoint]") {
  gd::Rng init(1), noise(2);
  Net a(init, noise);
  gd::optim::Adam<double> opt_a(a.parameters(), {.lr = 0.05});
  train(a, opt_a, 0, 1);
  io::TensorList list;
  io::add_module(list, a);
  io::add_optimizer(list, opt_a);
  io::add_rng(list, noise);
  io::Safetensors ckpt = io::decode_safetensors(io::encode_safetensors(list), "mine.safetensors");

  auto rejected_unchanged = [&](Net& net, const std::string& message) {
    const std::string before = state_bytes(net);
    CHECK_THROWS_AS(io::restore_module(ckpt, net), gd::io_error);
    CHECK_THROWS_WITH(io::restore_module(ckpt, net), Contains("'mine.safetensors'") && Contains(message));
    CHECK(state_bytes(net) == before);
  };
  Net wide(init, noise, 5);
  rejected_unchanged(wide, "'model/d1.kernel' has shape [3,4] in the checkpoint but [3,5] in the module");
  Net extra(init, noise, 4, true, true);
  rejected_unchanged(extra, "missing 'model/d3.kernel'; missing 'model/d3.bias'");
  Net no_bn(init, noise, 4, false);
  rejected_unchanged(no_bn, "unexpected 'model/bn.gamma'");
  CHECK_THROWS_WITH(io::restore_module(ckpt, no_bn), Contains("unexpected 'model/bn.moving_variance'"));

  // Another dtype under the same name.
  io::TensorList as_float = list;
  as_float[0].second = gd::Tensor<float>::zeros({3, 4});
  const io::Safetensors float_ckpt = io::decode_safetensors(io::encode_safetensors(as_float), "f.safetensors");
  Net b(init, noise);
  CHECK_THROWS_WITH(io::restore_module(float_ckpt, b),
                    Contains("'model/d1.kernel' is F32 in the checkpoint but F64 in the module"));
  // With another prefix nothing is found; with an empty one everything else is unexpected.
  CHECK_THROWS_WITH(io::restore_module(ckpt, b, "net/"), Contains("missing 'net/d1.kernel'"));
  CHECK_THROWS_WITH(io::restore_module(ckpt, b, ""), Contains("missing 'd1.kernel'") && Contains("unexpected 'model/d1.kernel'"));

  // Optimizers: another number of parameters, another prefix; nothing changes.
  std::vector<V> fewer = b.parameters();
  fewer.pop_back();
  gd::optim::Adam<double> opt_fewer(fewer, {.lr = 0.05});
  CHECK_THROWS_WITH(io::restore_optimizer(ckpt, opt_fewer), Contains("'mine.safetensors' does not fit the optimizer"));
  CHECK(opt_fewer.iterations() == 0);
  gd::optim::Adam<double> opt_b(b.parameters(), {.lr = 0.05});
  CHECK_THROWS_WITH(io::restore_optimizer(ckpt, opt_b, "opt/"), Contains("no entry under 'opt/'"));
  io::TensorList opt_float = list;
  for (auto& [name, t] : opt_float)
    if (name == "optimizer/step") t = gd::Tensor<float>::scalar(1.f);
  CHECK_THROWS_WITH(io::restore_optimizer(io::decode_safetensors(io::encode_safetensors(opt_float)), opt_b),
                    Contains("'optimizer/step' is F32 in the checkpoint but F64 in the optimizer"));
  io::restore_optimizer(ckpt, opt_b);
  CHECK(opt_b.iterations() == 1);

  // Rng: missing, or not I64 [4]; the generator keeps its state.
  gd::Rng r(5);
  const auto before = r.state();
  CHECK_THROWS_WITH(io::restore_rng(ckpt, r, "noise"), Contains("has no entry 'noise'"));
  CHECK_THROWS_WITH(io::restore_rng(ckpt, r, "model/d1.bias"), Contains("must be I64 [4], got F64 [4]"));
  CHECK(r.state() == before);

  // checkpoint_step validates the metadata.
  io::Safetensors meta = ckpt;
  CHECK_THROWS_WITH(io::checkpoint_step(meta), Contains("has no metadata 'global_step'"));
  for (const char* bad : {"", "-3", "12x", "1e3", "99999999999999999999"}) {
    meta.metadata["global_step"] = bad;
    CHECK_THROWS_WITH(io::checkpoint_step(meta), Contains("must be a non-negative integer"));
  }
  meta.metadata["global_step"] = "42";
  CHECK(io::checkpoint_step(meta) == 42);
}

TEST_CASE("io: Saver keeps max_to_keep checkpoints and a TF-like state file", "[io][saver]") {
  const fs::path dir = fresh_dir("saver_keep");
  CHECK_FALSE(io::latest_checkpoint(dir));  // no directory
  {
    io::Saver saver(dir, {.max_to_keep = 2});
    CHECK(saver.directory() == dir);
    CHECK_FALSE(saver.latest());
    CHECK_FALSE(io::latest_checkpoint(dir));  // no state file yet
    for (int64_t step : {100, 200, 300, 400}) saver.save(step, tiny(double(step)));
    CHECK(files_in(dir) == std::vector<std::string>{"checkpoint", "model.ckpt-300.safetensors", "model.ckpt-400.safetensors"});
    CHECK(saver.latest() == dir / "model.ckpt-400.safetensors");
  }
  CHECK(io::read_file(dir / "checkpoint") ==
        "model_checkpoint_path: \"model.ckpt-400.safetensors\"\n"
        "all_model_checkpoint_paths: \"model.ckpt-300.safetensors\"\n"
        "all_model_checkpoint_paths: \"model.ckpt-400.safetensors\"\n");
  CHECK(io::latest_checkpoint(dir) == dir / "model.ckpt-400.safetensors");
  CHECK(io::checkpoint_step(io::load_safetensors(*io::latest_checkpoint(dir))) == 400);

  // A new Saver continues the list: the next save drops 300.
  {
    io::Saver saver(dir, {.max_to_keep = 2});
    CHECK(saver.checkpoints() == std::vector<std::string>{"model.ckpt-300.safetensors", "model.ckpt-400.safetensors"});
    saver.save(500, tiny(5), {{"note", "x"}});
    CHECK(files_in(dir) == std::vector<std::string>{"checkpoint", "model.ckpt-400.safetensors", "model.ckpt-500.safetensors"});
    const io::Safetensors c = io::load_safetensors(dir / "model.ckpt-500.safetensors");
    CHECK(c.metadata == io::Metadata{{"global_step", "500"}, {"note", "x"}});
  }

  // Saving a step again makes it the newest; max_to_keep <= 0 keeps everything.
  {
    const fs::path all = fresh_dir("saver_all");
    io::Saver saver(all, {.max_to_keep = 0, .prefix = "net"});
    for (int64_t step : {1, 2, 3, 4, 5, 6, 2}) saver.save(step, tiny(double(step)));
    CHECK(saver.checkpoints() == std::vector<std::string>{"net-1.safetensors", "net-3.safetensors", "net-4.safetensors",
                                                          "net-5.safetensors", "net-6.safetensors", "net-2.safetensors"});
    CHECK(io::latest_checkpoint(all) == all / "net-2.safetensors");
    CHECK(files_in(all).size() == 7);
  }

  // A missing latest file falls back to the newest kept file that exists, then to nothing.
  fs::remove(dir / "model.ckpt-500.safetensors");
  CHECK(io::latest_checkpoint(dir) == dir / "model.ckpt-400.safetensors");
  fs::remove(dir / "model.ckpt-400.safetensors");
  CHECK_FALSE(io::latest_checkpoint(dir));

  // Bad options and steps.
  CHECK_THROWS_AS(io::Saver(dir, {.prefix = "a/b"}), gd::value_error);
  CHECK_THROWS_AS(io::Saver(dir, {.prefix = ""}), gd::value_error);
  CHECK_THROWS_WITH(io::Saver(dir).save(-1, tiny(0)), Contains("step must be >= 0"));
  std::ofstream("not_a_dir") << "x";
  CHECK_THROWS_AS(io::Saver("not_a_dir"), gd::io_error);
}

TEST_CASE("io: checkpoint state files are parsed strictly", "[io][saver]") {
  const io::CheckpointState tf = io::decode_checkpoint_state(
      "# comment\n"
      "model_checkpoint_path: \"b.safetensors\"\r\n"
      "all_model_checkpoint_paths: \"a.safetensors\"\n"
      "all_model_checkpoint_timestamps: 1700000000.5\n"
      "\n"
      "  all_model_checkpoint_paths:\"q\\\"uote.safetensors\"  \n");
  CHECK(tf.latest == "b.safetensors");
  CHECK(tf.kept == std::vector<std::string>{"a.safetensors", "q\"uote.safetensors", "b.safetensors"});
  CHECK(io::decode_checkpoint_state(io::encode_checkpoint_state(tf)).kept == tf.kept);

  auto rejects = [](const std::string& text, const std::string& message) {
    CHECK_THROWS_WITH(io::decode_checkpoint_state(text, "ck"), Contains("'ck'") && Contains(message));
  };
  rejects("", "has no model_checkpoint_path");
  rejects("model_checkpoint_path \"a\"\n", "line 1: expected 'key: \"value\"'");
  rejects("model_checkpoint_path: a\n", "must be a quoted string");
  rejects("model_checkpoint_path: \"a\n", "is not closed");
  rejects("model_checkpoint_path: \"a\" x\n", "unexpected text after the string");
  rejects("model_checkpoint_path: \"a\\q\"\n", "unknown escape");
  rejects("model_checkpoint_path: \"a\"\nmodel_checkpoint_path: \"b\"\n", "line 2: model_checkpoint_path appears twice");
  rejects("model_checkpoint_path: \"/etc/passwd\"\n", "is not a plain file name");
  rejects("model_checkpoint_path: \"a\"\nall_model_checkpoint_paths: \"../x\"\n", "is not a plain file name");
  rejects("model_checkpoint_path: \"..\"\n", "is not a plain file name");

  const fs::path dir = fresh_dir("saver_corrupt");
  fs::create_directories(dir);
  std::ofstream(dir / "checkpoint") << "garbage\n";
  CHECK_THROWS_WITH(io::latest_checkpoint(dir), Contains("saver_corrupt/checkpoint") && Contains("line 1"));
  CHECK_THROWS_AS(io::Saver(dir), gd::io_error);
}

namespace {

/// Lowers the soft file-size limit (RLIMIT_FSIZE) so that writes past `bytes` fail with EFBIG
/// (SIGXFSZ ignored); restores both on destruction. Works for root too.
struct FileSizeLimit {
  rlimit old{};
  void (*old_handler)(int) = nullptr;
  bool active = false;
  explicit FileSizeLimit(rlim_t bytes) {
    if (getrlimit(RLIMIT_FSIZE, &old) != 0) return;
    rlimit lower = old;
    lower.rlim_cur = bytes;
    old_handler = std::signal(SIGXFSZ, SIG_IGN);
    active = setrlimit(RLIMIT_FSIZE, &lower) == 0;
  }
  ~FileSizeLimit() {
    if (active) setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
};

}  // namespace

TEST_CASE("io: a write that fails halfway leaves the previous checkpoint intact", "[io][atomic]") {
  const fs::path dir = fresh_dir("atomic_fail");
  io::Saver saver(dir);
  saver.save(1, tiny(1));
  const fs::path first = dir / "model.ckpt-1.safetensors";
  const std::string first_bytes = io::read_file(first), state = io::read_file(dir / "checkpoint");
  const io::TensorList big = {{"w", Td::zeros({20000})}};  // 160 kB: fails after the first 4 kB
  {
    FileSizeLimit limit(4096);
    if (!limit.active) {
      WARN("setrlimit(RLIMIT_FSIZE) failed: skipping the interrupted-write checks");
      return;
    }
    CHECK_THROWS_AS(saver.save(2, big), gd::io_error);
    CHECK_THROWS_WITH(io::write_file_atomic(first, io::encode_safetensors(big)),
                      Contains("model.ckpt-1.safetensors") && Contains("the previous file is unchanged"));
    CHECK_THROWS_WITH(io::save_safetensors(dir / "checkpoint", big), Contains("File too large"));
  }
  CHECK(io::read_file(first) == first_bytes);
  CHECK(io::read_file(dir / "checkpoint") == state);
  CHECK(files_in(dir) == std::vector<std::string>{"checkpoint", "model.ckpt-1.safetensors"});  // no temporary left
  CHECK(io::latest_checkpoint(dir) == first);
  CHECK(saver.checkpoints() == std::vector<std::string>{"model.ckpt-1.safetensors"});
  CHECK(io::load_safetensors(first).get<double>("x").item() == 1.0);

  // An exception while encoding (before any byte is written) changes nothing either.
  CHECK_THROWS_AS(saver.save(3, {{"x", Td()}}), gd::value_error);
  CHECK(files_in(dir) == std::vector<std::string>{"checkpoint", "model.ckpt-1.safetensors"});
  // Unwritable and unreadable paths name the path.
  CHECK_THROWS_WITH(io::write_file_atomic("no_such_dir/f.bin", "x"), Contains("no_such_dir") && Contains("f.bin"));
  CHECK_THROWS_WITH(io::write_file_atomic(dir, "x"), Contains("atomic_fail"));
  CHECK_THROWS_WITH(io::read_file(dir), Contains("is a directory"));
  CHECK_THROWS_WITH(io::read_file("no_such_file.bin"), Contains("no_such_file.bin") && Contains("No such file"));
  CHECK(files_in(dir) == std::vector<std::string>{"checkpoint", "model.ckpt-1.safetensors"});
}

TEST_CASE("io: a stray partial temporary file is ignored", "[io][atomic]") {
  const fs::path dir = fresh_dir("atomic_stray");
  {
    io::Saver saver(dir);
    saver.save(1, tiny(1));
  }
  // What a crash in the middle of writing checkpoint 2 leaves behind.
  const std::string full = io::encode_safetensors(tiny(2), {{"global_step", "2"}});
  const fs::path stray = dir / ".model.ckpt-2.safetensors.tmp-12345-0-678";
  std::ofstream(stray, std::ios::binary) << full.substr(0, full.size() / 2);

  CHECK(io::latest_checkpoint(dir) == dir / "model.ckpt-1.safetensors");
  CHECK(io::load_safetensors(*io::latest_checkpoint(dir)).get<double>("x").item() == 1.0);
  CHECK_THROWS_AS(io::load_safetensors(stray), gd::io_error);  // a partial file is rejected, never misread
  io::Saver again(dir);
  CHECK(again.checkpoints() == std::vector<std::string>{"model.ckpt-1.safetensors"});
  again.save(2, tiny(2));
  CHECK(io::load_safetensors(*io::latest_checkpoint(dir)).get<double>("x").item() == 2.0);
}

TEST_CASE("io: a successful save collects the debris of interrupted runs", "[io][atomic][saver]") {
  const fs::path dir = fresh_dir("debris");
  io::Saver first(dir, {.max_to_keep = 3});
  for (int64_t s = 1; s <= 3; ++s) first.save(s, tiny(double(s)));
  // A process that no longer exists: what a run killed mid-write leaves carries its pid.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  const std::string dead = std::to_string(child), alive = std::to_string(::getpid());
  const auto touch = [&](const std::string& name) { std::ofstream(dir / name, std::ios::binary) << "partial"; };
  // Debris: checkpoints written but never listed (killed before the state file was replaced),
  // and temporaries of checkpoints and of the state file whose writer is gone.
  for (const char* name : {"model.ckpt-4.safetensors", "model.ckpt-17.safetensors", "model.ckpt-0.safetensors"})
    std::ofstream(dir / name, std::ios::binary) << io::encode_safetensors(tiny(9));
  touch(".model.ckpt-5.safetensors.tmp-" + dead + "-0-12345");
  touch(".model.ckpt-6.safetensors.tmp-" + dead + "-3-7");
  touch(".checkpoint.tmp-" + dead + "-4-99");
  // Not debris: another prefix, other files, a temporary being written by a live process, names
  // that only look alike.
  const std::vector<std::string> others = {"other.ckpt-3.safetensors", "notes.txt", "model.ckpt-x.safetensors",
                                           ".model.ckpt-7.safetensors.tmp-" + alive + "-0-1",
                                           ".other.ckpt-7.safetensors.tmp-" + dead + "-0-1",
                                           ".model.ckpt-8.safetensors.tmp-" + dead + "-x-1", "model.ckpt-4.safetensors.bak"};
  for (const std::string& name : others) touch(name);

  io::Saver again(dir, {.max_to_keep = 3});
  again.save(4, tiny(4));
  std::vector<std::string> expected = {"checkpoint", "model.ckpt-2.safetensors", "model.ckpt-3.safetensors",
                                       "model.ckpt-4.safetensors"};
  expected.insert(expected.end(), others.begin(), others.end());
  std::sort(expected.begin(), expected.end());
  CHECK(files_in(dir) == expected);
  CHECK(io::load_safetensors(dir / "model.ckpt-4.safetensors").get<double>("x").item() == 4.0);
  CHECK(again.checkpoints() == std::vector<std::string>{"model.ckpt-2.safetensors", "model.ckpt-3.safetensors",
                                                        "model.ckpt-4.safetensors"});
}

TEST_CASE("io: save removes the temporary files that killed saves of the same file left", "[io][atomic][save]") {
  const fs::path dir = fresh_dir("save_debris");
  fs::create_directories(dir);
  const pid_t child = ::fork();  // a process that no longer exists, as a save killed mid-write
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  const std::string dead = std::to_string(child), alive = std::to_string(::getpid());
  const auto touch = [&](const std::string& name) { std::ofstream(dir / name, std::ios::binary) << "partial"; };
  for (int k = 0; k < 5; ++k) touch(".model.safetensors.tmp-" + dead + "-" + std::to_string(k) + "-77");
  // kept: a live writer's, another file's, and a name that only looks alike
  const std::vector<std::string> kept = {".model.safetensors.tmp-" + alive + "-9-1", ".model.bin.tmp-" + dead + "-0-1",
                                         ".model.safetensors.tmp-" + dead + "-x-1"};
  for (const std::string& name : kept) touch(name);
  io::write_file_atomic(dir / "model.safetensors", io::encode_safetensors(tiny(3)));
  std::vector<std::string> expected = kept;
  expected.push_back("model.safetensors");
  std::sort(expected.begin(), expected.end());
  CHECK(files_in(dir) == expected);
  CHECK(io::load_safetensors(dir / "model.safetensors").get<double>("x").item() == 3.0);
}

TEST_CASE("io: temporary file names of write_file_atomic are recognised exactly", "[io][atomic]") {
  const auto t = io::detail::parse_temp_file_name(".model.ckpt-5.safetensors.tmp-4242-3-1234567");
  REQUIRE(t);
  CHECK(t->target == "model.ckpt-5.safetensors");
  CHECK(t->pid == 4242);
  CHECK(io::detail::parse_temp_file_name(".checkpoint.tmp-1-2-3")->target == "checkpoint");
  for (const char* bad : {"model.ckpt-5.safetensors.tmp-1-2-3", ".x.tmp-1-2", ".x.tmp-1-2-", ".x.tmp--2-3", ".x.tmp-a-2-3",
                          ".x.tmp-1-2-3-4", ".tmp-1-2-3", "checkpoint", ".x.tmp-1-2-3x"})
    CHECK_FALSE(io::detail::parse_temp_file_name(bad));
  CHECK_FALSE(io::detail::temp_writer_gone(::getpid()));
  CHECK_FALSE(io::detail::temp_writer_gone(1));  // init (or the container's first process) is alive
}

TEST_CASE("io: save/load in one call, optimizer state keyed by parameter name", "[io][checkpoint][save]") {
  const fs::path dir = fresh_dir("one_call");
  fs::create_directories(dir);
  const fs::path file = dir / "net.safetensors";
  gd::Rng init_a(1), noise_a(2);
  Net a(init_a, noise_a);
  gd::optim::Adam<double> opt_a(a.parameters(), {.lr = 0.05});
  train(a, opt_a, 0, 3);
  io::save(file, a, opt_a, 3);
  const gd::Rng::State noise_at_save = noise_a.state();  // io::save keeps no Rng
  const std::string at_save = state_bytes(a, &opt_a);
  const std::string model_at_save = state_bytes(a);
  train(a, opt_a, 3, 2);
  const std::string model_after = state_bytes(a);

  // the file: model/<path>, optimizer/<path>/<slot>, optimizer/step, global_step
  const io::Safetensors ckpt = io::load_safetensors(file);
  CHECK(io::checkpoint_step(ckpt) == 3);
  CHECK(ckpt.find("model/d1.kernel") != nullptr);
  CHECK(ckpt.find("optimizer/d1.kernel/m") != nullptr);
  CHECK(ckpt.find("optimizer/bn.gamma/v") != nullptr);
  CHECK(ckpt.find("optimizer/param0/m") == nullptr);
  CHECK(ckpt.get<double>("optimizer/step").item() == 3.0);

  // into a fresh model and optimizer: the same bytes, and training continues bit for bit
  gd::Rng init_b(77), noise_b(78);
  Net b(init_b, noise_b);
  gd::optim::Adam<double> opt_b(b.parameters(), {.lr = 0.05});
  CHECK(io::load(file, b, opt_b) == 3);
  CHECK(state_bytes(b, &opt_b) == at_save);
  CHECK(opt_b.iterations() == 3);

  // an optimizer over the same parameters in another order gets each one's own state
  gd::Rng init_c(7), noise_c(8);
  Net c(init_c, noise_c);
  std::vector<V> reversed = c.parameters();
  std::reverse(reversed.begin(), reversed.end());
  gd::optim::Adam<double> opt_c(reversed, {.lr = 0.05});
  CHECK(io::load(file, c, opt_c) == 3);
  CHECK(state_bytes(c) == model_at_save);
  // d1.kernel's first moment sits in another position of opt_c: by name it equals a's
  io::TensorList named_c;
  io::add_optimizer(named_c, opt_c, c);
  const io::Safetensors reread = io::decode_safetensors(io::encode_safetensors(named_c));
  CHECK(reread.get<double>("optimizer/d1.kernel/m").shape() == gd::Shape{3, 4});
  CHECK(io::encode_safetensors({{"m", reread.get<double>("optimizer/d1.kernel/m")}}) ==
        io::encode_safetensors({{"m", ckpt.get<double>("optimizer/d1.kernel/m")}}));
  noise_c.set_state(noise_at_save);
  train(c, opt_c, 3, 2);
  CHECK(state_bytes(c) == model_after);  // per-parameter Adam updates: the order does not matter

  // model alone: save(path, model[, step]) / load(path, model); optimizer entries are left unread
  io::save(dir / "model_only.safetensors", a);
  Net d(init_b, noise_b);
  CHECK(io::load(dir / "model_only.safetensors", d) == 0);
  CHECK(state_bytes(d) == model_after);
  CHECK(io::load_safetensors(dir / "model_only.safetensors").find("optimizer/step") == nullptr);
  CHECK(io::load(file, d) == 3);
  CHECK(state_bytes(d) == model_at_save);
  CHECK_THROWS_WITH(io::save(file, a, -1), "save: step must be >= 0, got -1");
}

TEST_CASE("io: load reads optimizer state keyed by position (files written before names)", "[io][checkpoint][save]") {
  const fs::path dir = fresh_dir("positional");
  fs::create_directories(dir);
  gd::Rng init_a(1), noise_a(2);
  Net a(init_a, noise_a);
  gd::optim::Adam<double> opt_a(a.parameters(), {.lr = 0.05});
  train(a, opt_a, 0, 2);
  // the earlier layout: add_optimizer without the model, "optimizer/param<i>/<slot>"
  io::TensorList old;
  io::add_module(old, a);
  io::add_optimizer(old, opt_a);
  io::save_safetensors(dir / "old.safetensors", old, {{"global_step", "2"}});
  REQUIRE(io::load_safetensors(dir / "old.safetensors").find("optimizer/param0/m") != nullptr);

  gd::Rng init_b(5), noise_b(6);
  Net b(init_b, noise_b);
  gd::optim::Adam<double> opt_b(b.parameters(), {.lr = 0.05});
  CHECK(io::load(dir / "old.safetensors", b, opt_b) == 2);
  CHECK(state_bytes(b, &opt_b) == state_bytes(a, &opt_a));
  // a file with no global_step loads as step 0
  io::save_safetensors(dir / "nostep.safetensors", old);
  CHECK(io::load(dir / "nostep.safetensors", b, opt_b) == 0);
}

TEST_CASE("io: load refuses a file that does not fit and changes nothing", "[io][checkpoint][save]") {
  const fs::path dir = fresh_dir("load_mismatch");
  fs::create_directories(dir);
  const fs::path file = dir / "net.safetensors";
  gd::Rng init(1), noise(2);
  Net a(init, noise);
  gd::optim::Adam<double> opt_a(a.parameters(), {.lr = 0.05});
  train(a, opt_a, 0, 1);
  io::save(file, a, opt_a, 1);

  // another architecture: the model check fails first
  Net wide(init, noise, 5);
  gd::optim::Adam<double> opt_wide(wide.parameters(), {.lr = 0.05});
  const std::string wide_before = state_bytes(wide, &opt_wide);
  CHECK_THROWS_AS(io::load(file, wide, opt_wide), gd::io_error);
  CHECK_THROWS_WITH(io::load(file, wide, opt_wide),
                    Contains("net.safetensors") && Contains("'model/d1.kernel' has shape [3,4] in the checkpoint but [3,5]"));
  CHECK(state_bytes(wide, &opt_wide) == wide_before);

  // the model fits but the optimizer does not (it lacks d2.bias): the model is put back as it was
  Net b(init, noise);
  std::vector<V> fewer = b.parameters();
  fewer.pop_back();
  gd::optim::Adam<double> opt_fewer(fewer, {.lr = 0.05});
  const std::string b_before = state_bytes(b);
  CHECK_THROWS_WITH(io::load(file, b, opt_fewer),
                    Contains("does not fit Adam") && Contains("unexpected 'optimizer/d2.bias/m'"));
  CHECK(state_bytes(b) == b_before);
  CHECK(opt_fewer.iterations() == 0);

  // another kind of optimizer: its slots are missing
  gd::optim::SGD<double> sgd(b.parameters(), {.lr = 0.1, .momentum = 0.9});
  CHECK_THROWS_WITH(io::load(file, b, sgd), Contains("missing 'optimizer/d1.kernel/"));
  CHECK(state_bytes(b) == b_before);
  CHECK_THROWS_WITH(io::load(dir / "absent.safetensors", b), Contains("absent.safetensors"));
}

TEST_CASE("io: save is atomic: a failed save leaves the previous file intact", "[io][atomic][save]") {
  const fs::path dir = fresh_dir("save_atomic");
  fs::create_directories(dir);
  const fs::path file = dir / "net.safetensors";
  gd::Rng init(1), noise(2);
  Net small(init, noise);
  io::save(file, small, 1);
  const std::string bytes = io::read_file(file);
  Net big(init, noise, 2000);  // 3*2000 + 2000*2 doubles: far beyond 4 kB
  {
    FileSizeLimit limit(4096);
    if (!limit.active) {
      WARN("setrlimit(RLIMIT_FSIZE) failed: skipping the interrupted-save check");
      return;
    }
    CHECK_THROWS_AS(io::save(file, big, 2), gd::io_error);
  }
  CHECK(io::read_file(file) == bytes);
  CHECK(files_in(dir) == std::vector<std::string>{"net.safetensors"});
}
