// FileWriter: files on disk, the background thread, error reporting, and protoc's view.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "gradus/core/rng.hpp"
#include "gradus/summary.hpp"
#include "../support/files.hpp"
#include "../support/short_names.hpp"

namespace sm = gradus::summary;

namespace {

fs::path fresh_dir(const std::string& name) { return gradus_test::fresh_dir("summary_tmp", name); }

using gradus_test::slurp;
using gradus_test::spit;

// Output of `protoc <how> < message` (how: "--decode_raw" or a --decode with its schema).
std::string protoc_decode(std::string_view message, const std::string& how) {
  spit("summary_tmp/rec.bin", message);
  std::string out;
  if (std::FILE* p = popen(("protoc " + how + " < summary_tmp/rec.bin 2>&1").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// Writes one event of every kind; returns the event file's path.
fs::path write_all_kinds(const fs::path& dir) {
  gd::Rng rng(1);
  sm::FileWriter w(dir, {.max_queue = 2});
  w.scalar("loss", 1.5, 1);
  w.histogram("weights", gd::Tensor<double>::random_normal({1000}, rng), 2);
  w.histogram("ints", gd::Tensor<int64_t>::from({1, 2, 2, 3}), 2);
  auto rgb = gd::Tensor<float>::random_uniform({2, 4, 5, 3}, rng);
  w.image("sample", rgb, 3);                            // sample/image/0, sample/image/1
  w.image("single", gd::Tensor<float>::ones({4, 5, 1}), 3, 1);  // single/image
  w.labelled_images("pred", gd::Tensor<float>::zeros({3, 28, 28, 1}), {"7", "2", "1"}, 4, 2);
  w.text("notes", "**bold** text", 5);
  return w.path();  // the destructor writes everything
}

}  // namespace

TEST_CASE("FileWriter: file name, first event, every kind read back", "[summary]") {
  const fs::path dir = fresh_dir("kinds");
  const fs::path path = write_all_kinds(dir);
  CHECK(path.parent_path() == dir);
  CHECK(std::regex_match(path.filename().string(), std::regex(R"(events\.out\.tfevents\.\d{10}\..+)")));
  const auto ev = sm::read_events(path);
  REQUIRE(ev.size() == 8);
  CHECK(ev[0].file_version == "brain.Event:2");
  CHECK(ev[0].wall_time > 1.6e9);
  for (size_t i = 1; i < ev.size(); ++i) CHECK(ev[i].wall_time >= ev[i - 1].wall_time);

  CHECK((ev[1].step == 1 && ev[1].values.at(0).tag == "loss" && ev[1].values[0].simple_value == 1.5f));
  const auto& h = ev[2].values.at(0);
  REQUIRE(h.histo);
  CHECK((h.tag == "weights" && ev[2].step == 2 && h.histo->num == 1000));
  CHECK(ev[3].values.at(0).histo->sum == 8);

  REQUIRE(ev[4].values.size() == 2);
  CHECK(ev[4].values[0].tag == "sample/image/0");
  CHECK(ev[4].values[1].tag == "sample/image/1");
  const auto& im = *ev[4].values[1].image;
  CHECK((im.height == 4 && im.width == 5 && im.colorspace == 3));
  const auto png = gd::image::decode_png(im.encoded);
  REQUIRE(png.shape() == gd::Shape{4, 5, 3});
  gd::Rng rng(1);  // replays write_all_kinds' draws
  (void)gd::Tensor<double>::random_normal({1000}, rng);
  const auto original = gd::Tensor<float>::random_uniform({2, 4, 5, 3}, rng);
  for (int64_t i = 0; i < png.size(); ++i)
    REQUIRE(png.data()[i] == Approx(original.data()[60 + i]).margin(0.5 / 255 + 1e-6));

  REQUIRE(ev[5].values.size() == 1);
  CHECK(ev[5].values[0].tag == "single/image");
  CHECK(ev[5].values[0].image->colorspace == 1);

  // Labelled: 28x28 gray -> 112x112 RGB, black image, label drawn in white at the top-left only.
  REQUIRE(ev[6].values.size() == 2);
  CHECK(ev[6].values[1].tag == "pred/image/1");
  const auto lab = gd::image::decode_png(ev[6].values[1].image->encoded);
  REQUIRE(lab.shape() == gd::Shape{112, 112, 3});
  int white = 0;
  for (int64_t y = 0; y < 112; ++y)
    for (int64_t x = 0; x < 112; ++x)
      if (lab(y, x, 0) > 0.5f) {
        ++white;
        REQUIRE((x < 8 && y < 10));
      }
  CHECK(white > 5);

  const auto& t = ev[7].values.at(0);
  CHECK((t.tag == "notes" && t.text == "**bold** text" && t.plugin_name == "text"));
}

TEST_CASE("FileWriter: a corrupted event file is rejected", "[summary]") {
  const fs::path path = write_all_kinds(fresh_dir("corrupt"));
  const std::string good = slurp(path);
  std::string bad = good;
  bad[bad.size() / 2] ^= 0x10;
  spit(path, bad);
  CHECK_THROWS_AS(sm::read_events(path), gd::io_error);
  spit(path, std::string_view(good).substr(0, good.size() - 3));
  CHECK_THROWS_WITH(gradus::io::read_tfrecords(path), Catch::Contains(path.string()) && Catch::Contains("truncated"));
  CHECK_THROWS_AS(gradus::io::read_tfrecords(path.string() + ".missing"), gd::io_error);
}

TEST_CASE("read_events: a file cut inside its last record gives the complete events and reports the tear",
          "[summary]") {
  const fs::path path = write_all_kinds(fresh_dir("torn"));
  const std::string good = slurp(path);
  std::string tear = "not reset";
  const auto all = sm::read_events(path, &tear);
  CHECK(tear.empty());
  REQUIRE(all.size() >= 3);
  // the byte offset where each record starts: the TFRecord framing is 12 + length + 4 bytes
  std::vector<size_t> starts;
  for (size_t at = 0; at < good.size();) {
    starts.push_back(at);
    uint64_t length = 0;
    std::memcpy(&length, good.data() + at, 8);
    at += 16 + size_t(length);
  }
  REQUIRE(starts.size() == all.size());
  // cut at every byte of the last record, and inside the one before it (a disk that filled
  // mid-flush): the events before the cut record are returned, and the tear is named
  const size_t last = starts.back();
  std::vector<size_t> cuts;
  for (size_t c = last + 1; c < good.size(); ++c) cuts.push_back(c);
  cuts.push_back(starts[starts.size() - 2] + 5);
  for (const size_t cut : cuts) {
    INFO("cut at byte " << cut << " of " << good.size());
    spit(path, std::string_view(good).substr(0, cut));
    const size_t complete = size_t(std::upper_bound(starts.begin(), starts.end(), cut) - starts.begin()) - 1;
    const auto ev = sm::read_events(path, &tear);
    REQUIRE(ev.size() == complete);
    for (size_t i = 0; i < ev.size(); ++i) CHECK(ev[i].wall_time == all[i].wall_time);
    CHECK_THAT(tear, Catch::Contains(path.string()) && Catch::Contains("truncated") &&
                         Catch::Contains("record " + std::to_string(complete)));
  }
  // cut exactly between records: a whole file, no tear
  spit(path, std::string_view(good).substr(0, last));
  CHECK(sm::read_events(path, &tear).size() == all.size() - 1);
  CHECK(tear.empty());
  // without the out-parameter the complete events still come back (the tear goes to std::cerr)
  spit(path, std::string_view(good).substr(0, good.size() - 1));
  CHECK(sm::read_events(path).size() == all.size() - 1);
  // corruption is not a tear: a flipped byte in the last record's data is an io_error
  std::string bad = good;
  bad[last + 14] ^= 0x01;
  spit(path, bad);
  CHECK_THROWS_WITH(sm::read_events(path, &tear), Catch::Contains("checksum"));
}

TEST_CASE("FileWriter: two threads, nothing lost; flush, max_queue and flush_secs write to disk", "[summary]") {
  const fs::path dir = fresh_dir("threads");
  sm::FileWriter w(dir, {.max_queue = 7, .flush_secs = 1000});
  constexpr int n = 400;
  auto produce = [&](int id) {
    for (int i = 0; i < n; ++i) {
      w.scalar(id == 0 ? "a" : "b", i, i);
      if (i % 97 == 0) w.flush();
    }
  };
  std::thread t0(produce, 0), t1(produce, 1);
  t0.join();
  t1.join();
  w.flush();
  auto ev = sm::read_events(w.path());  // still open: flush() made it all visible
  REQUIRE(ev.size() == 1 + 2 * n);
  int next[2] = {0, 0};
  for (size_t i = 1; i < ev.size(); ++i) {
    const int id = ev[i].values.at(0).tag == "b";
    CHECK(ev[i].step == next[id]);
    CHECK(ev[i].values[0].simple_value == float(next[id]++));
  }
  CHECK((next[0] == n && next[1] == n));
  w.close();
  w.close();  // idempotent
  CHECK_THROWS_AS(w.scalar("late", 1, 1), gd::value_error);

  // max_queue pending events are written without any flush() call.
  sm::FileWriter q(fresh_dir("queue"), {.max_queue = 3, .flush_secs = 1000});
  for (int i = 0; i < 3; ++i) q.scalar("x", i, i);
  size_t seen = 0;
  for (int tries = 0; tries < 200 && seen < 4; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    seen = sm::read_events(q.path()).size();
  }
  CHECK(seen == 4);

  // flush_secs alone writes a single pending event.
  sm::FileWriter p(fresh_dir("periodic"), {.max_queue = 1000, .flush_secs = 0.05});
  p.text("t", "x", 0);
  seen = 0;
  for (int tries = 0; tries < 200 && seen < 2; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    seen = sm::read_events(p.path()).size();
  }
  CHECK(seen == 2);

  // Two writers in the same directory and second get two files.
  sm::FileWriter a(dir), b(dir);
  CHECK(a.path() != b.path());
  CHECK_THROWS_AS(sm::FileWriter(dir, {.max_queue = 0}), gd::value_error);
  CHECK_THROWS_AS(w.image("bad", gd::Tensor<float>::zeros({2, 3}), 0), gd::shape_error);
  CHECK_THROWS_AS(a.histogram("nan", gd::Tensor<float>::from({NAN}), 0), gd::value_error);
  CHECK_THROWS_AS(a.labelled_images("l", gd::Tensor<float>::zeros({2, 4, 4, 1}), {"one"}, 0), gd::value_error);
}

TEST_CASE("FileWriter: a write error on the background thread surfaces at the next call", "[summary]") {
  sm::FileWriter w(fresh_dir("error"), {.max_queue = 100});
  w.flush();
  // Cap the size of files this process may write just above the event file's current size.
  const auto size = fs::file_size(w.path());
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit cap = old;
  cap.rlim_cur = rlim_t(size + 64);
  REQUIRE(setrlimit(RLIMIT_FSIZE, &cap) == 0);
  w.text("big", std::string(10000, 'x'), 1);
  bool threw = false;
  try {
    w.flush();
  } catch (const gd::io_error& e) {
    threw = true;
    CHECK_THAT(e.what(), Catch::Contains("cannot write") && Catch::Contains(w.path().string()));
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  CHECK(threw);
  CHECK_THROWS_AS(w.scalar("after", 1, 2), gd::io_error);  // the error stays
  CHECK_NOTHROW(w.close());                                  // already reported
}

TEST_CASE("protoc decodes every record, raw and with TensorFlow's schema", "[summary]") {
  if (std::system("protoc --version > /dev/null 2>&1") != 0) {
    WARN("protoc not found: skipping the protoc --decode_raw check");
    return;
  }
  const auto recs = gradus::io::read_tfrecords(write_all_kinds(fresh_dir("protoc")));
  REQUIRE(recs.size() == 8);
  const std::vector<std::vector<std::string>> raw = {
      {"3: \"brain.Event:2\""},
      {"2: 1", "1: \"loss\"", "2: 0x3fc00000"},
      {"1: \"weights\"", "3: 0x408f400000000000"},  // num = 1000.0
      {"1: \"ints\"", "4: 0x4020000000000000"},     // sum = 8.0
      {"1: \"sample/image/0\"", "1: \"sample/image/1\"", "1: 4", "2: 5", "3: 3", "4: \"\\211PNG"},
      {"1: \"single/image\"", "3: 1"},
      {"1: \"pred/image/0\"", "1: 112"},
      {"1: \"notes\"", "8: \"**bold** text\"", "1: \"text\"", "1: 7"},
  };
  // tests/fixtures/summary/event_subset.proto: TF's field numbers and types.
  const std::vector<std::vector<std::string>> typed = {
      {"file_version: \"brain.Event:2\""},
      {"step: 1", "tag: \"loss\"", "simple_value: 1.5"},
      {"step: 2", "tag: \"weights\"", "num: 1000", "bucket_limit: ", "bucket: "},
      {"tag: \"ints\"", "min: 1", "max: 3", "sum: 8", "sum_squares: 18", "bucket: 2"},
      {"tag: \"sample/image/1\"", "height: 4", "width: 5", "colorspace: 3", "encoded_image_string: \"\\211PNG"},
      {"tag: \"single/image\"", "colorspace: 1"},
      {"tag: \"pred/image/1\"", "height: 112", "width: 112", "colorspace: 3"},
      {"tag: \"notes\"", "dtype: DT_STRING", "tensor_shape {", "string_val: \"**bold** text\"",
       "plugin_name: \"text\""},
  };
  const std::string schema =
      "--decode=tensorflow.Event -I " GRADUS_TEST_DATA_DIR "/summary " GRADUS_TEST_DATA_DIR "/summary/event_subset.proto";
  for (size_t i = 0; i < recs.size(); ++i) {
    const std::string out = protoc_decode(recs[i], "--decode_raw");
    INFO("record " << i << ":\n" << out);
    CHECK(out.find("1: 0x41") != std::string::npos);  // wall_time, a double near 1.7e9
    for (const auto& s : raw[i]) CHECK(out.find(s) != std::string::npos);
    const std::string text = protoc_decode(recs[i], schema);
    INFO("decoded with the schema:\n" << text);
    CHECK(text.find("wall_time: 1") != std::string::npos);
    for (const auto& s : typed[i]) CHECK(text.find(s) != std::string::npos);
  }
}
