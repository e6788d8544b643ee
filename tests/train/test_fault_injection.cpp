// Fault injection into checkpointed training: a full disk in the middle of fit, and a training
// process killed (SIGKILL) at random points, again and again. Whatever happens, the directory
// keeps a loadable latest checkpoint, its debris stays bounded, and the run resumes to the same
// model as an uninterrupted one.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

namespace gd = gradus;
namespace fs = std::filesystem;
using gd::Tensor;

namespace {

struct Mlp : gd::nn::Module<double> {
  gd::nn::Dense<double> d1, d2;
  explicit Mlp(gd::Rng& init) : d1({.in = 4, .out = 8, .activation = gd::nn::relu}, init), d2({.in = 8, .out = 3}, init) {
    register_module("d1", d1);
    register_module("d2", d2);
  }
  gd::Var<double> forward(const Tensor<double>& x) { return d2.forward(d1.forward(x)); }
};

constexpr int kMaxToKeep = 3;
constexpr int64_t kEpochs = 40;  // of 8 steps: long enough for about 20 kills

/// Sleeps after every step (after the step's checkpoint), so that a run lasts long enough to be
/// killed several times on a machine of any speed: 320 steps take at least 640 ms, more than
/// three kills at most 150 ms apart (the loop below) can leave undone.
struct Pace : gd::train::Hook {
  void after_step(gd::train::Session&, const gd::train::StepResult&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
};

/// `epochs` epochs of 8 steps with a checkpoint after every step into `dir` (resuming from it), so a
/// kill at any moment is likely to land inside a checkpoint write (or, `paced`, in the sleep after
/// it). Returns the final model.
gd::io::TensorList train(const fs::path& dir, int64_t epochs = kEpochs, bool paced = false) {
  gd::Rng init(1), data_rng(2);
  Mlp net(init);
  gd::optim::Adam<double> opt(net.parameters(), {.lr = 0.01});
  Tensor<double> x = Tensor<double>::random_normal({32, 4}, data_rng);
  Tensor<int64_t> y({32});
  for (int64_t i = 0; i < 32; ++i) y.data()[i] = int64_t(x(i, 0) > 0) + int64_t(x(i, 1) > 0);
  const auto xent = [](const Tensor<int64_t>& labels, const gd::Var<double>& logits) {
    return gd::losses::sparse_softmax_cross_entropy_with_logits(labels, logits);
  };
  gd::train::CheckpointSaver saver({.every_steps = 1, .every_secs = 0, .max_to_keep = kMaxToKeep});
  Pace pace;
  std::vector<gd::train::Hook*> hooks{&saver};
  if (paced) hooks.push_back(&pace);
  gd::train::fit(net, opt, xent, gd::train::Data<double, int64_t>{x, y},
                 {.epochs = epochs, .batch_size = 4, .seed = 3, .hooks = hooks, .run_dir = dir});
  gd::io::TensorList model;
  gd::io::add_module(model, net);
  return model;
}

bool same(const gd::io::TensorList& a, const gd::io::TensorList& b) {
  return gd::io::encode_safetensors(a) == gd::io::encode_safetensors(b);
}

/// What a run directory holds at any moment: a loadable latest checkpoint (once the first save
/// is done) and bounded debris.
void check_directory(const fs::path& dir) {
  if (!fs::exists(dir / "checkpoint")) return;
  const auto latest = gd::io::latest_checkpoint(dir);
  REQUIRE(latest);
  CHECK_NOTHROW(gd::io::load_safetensors(*latest));
  int checkpoints = 0, temporaries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (gd::io::detail::parse_temp_file_name(f))
      ++temporaries;
    else if (f != "checkpoint")
      ++checkpoints;
  }
  INFO(checkpoints << " checkpoints, " << temporaries << " temporary files");
  CHECK(checkpoints <= kMaxToKeep + 1);  // the kept ones, and one written but not yet listed
  CHECK(temporaries <= 2);               // of the last killed writer, collected by the next save
}

/// This test executable again, running only the hidden child test case below in `dir`.
pid_t spawn_child(const fs::path& dir) {
  ::setenv("GRADUS_FAULT_RUN_DIR", dir.c_str(), 1);
  std::string exe = fs::read_symlink("/proc/self/exe").string(), tag = "[.fault_child]";
  char* argv[] = {exe.data(), tag.data(), nullptr};
  pid_t pid = -1;
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  const int rc = ::posix_spawn(&pid, exe.c_str(), &quiet, nullptr, argv, ::environ);  // <unistd.h> declares environ (g++ defines _GNU_SOURCE)
  posix_spawn_file_actions_destroy(&quiet);
  ::unsetenv("GRADUS_FAULT_RUN_DIR");
  REQUIRE(rc == 0);
  return pid;
}

}  // namespace

TEST_CASE("fault injection child: checkpointed training in $GRADUS_FAULT_RUN_DIR", "[.fault_child]") {
  if (const char* dir = std::getenv("GRADUS_FAULT_RUN_DIR")) train(dir, kEpochs, /*paced=*/true);
}

TEST_CASE("fault injection: a training process killed at random points always resumes to the same model",
          "[train][fault]") {
  const fs::path ref = "fault_reference", dir = "fault_killed";
  fs::remove_all(ref);
  fs::remove_all(dir);
  const gd::io::TensorList expected = train(ref);

  gd::Rng rng(42);
  int kills = 0;
  for (int i = 0; i < 20; ++i) {
    const pid_t child = spawn_child(dir);
    // Process start-up takes some milliseconds; a paced step (Pace) at least two.
    std::this_thread::sleep_for(std::chrono::microseconds(20'000 + int64_t(rng.uniform(0, 1) * 130'000)));
    const bool killed = ::kill(child, SIGKILL) == 0;
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    if (WIFEXITED(status)) {
      REQUIRE(WEXITSTATUS(status) == 0);
      break;  // it finished before the kill
    }
    CHECK((killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
    ++kills;
    check_directory(dir);
  }
  INFO(kills << " kills");
  CHECK(kills >= 3);
  // A last, uninterrupted run finishes from whatever was left, to the model of the reference run.
  const pid_t child = spawn_child(dir);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  check_directory(dir);
  const auto latest = gd::io::latest_checkpoint(dir);
  REQUIRE(latest);
  CHECK(gd::io::checkpoint_step(gd::io::load_safetensors(*latest)) == 8 * kEpochs);
  CHECK(same(train(dir), expected));  // restores the final checkpoint: nothing left to train
  fs::remove_all(ref);
  fs::remove_all(dir);
}

TEST_CASE("fault injection: a full disk during fit throws io_error and leaves the last checkpoint to resume from",
          "[train][fault]") {
  const fs::path ref = "fault_disk_reference", dir = "fault_disk_full";
  fs::remove_all(ref);
  fs::remove_all(dir);
  const gd::io::TensorList expected = train(ref, 2);
  train(dir, 1);
  const auto before = gd::io::latest_checkpoint(dir);
  REQUIRE(before);
  const std::string before_bytes = gd::io::read_file(*before);
  {
    // The file-size limit stands for a full disk: a checkpoint (a few kB) no longer fits.
    rlimit old{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    rlimit lower = old;
    lower.rlim_cur = 1024;
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lower) == 0);
    CHECK_THROWS_AS(train(dir, 2), gd::io_error);
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
  CHECK(gd::io::latest_checkpoint(dir) == before);
  CHECK(gd::io::read_file(*before) == before_bytes);
  for (const auto& e : fs::directory_iterator(dir))  // no temporary file left behind
    CHECK_FALSE(gd::io::detail::parse_temp_file_name(e.path().filename().string()));
  CHECK(same(train(dir, 2), expected));  // resumes from the last good checkpoint
  fs::remove_all(ref);
  fs::remove_all(dir);
}
