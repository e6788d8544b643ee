// Audio summaries: the WAV encoder against hand-built bytes, and the Audio value read back by
// decode_event and by `protoc --decode_raw`.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "gradus/summary.hpp"

namespace gd = gradus;
namespace sm = gradus::summary;
namespace fs = std::filesystem;

namespace {

std::string protoc_raw(std::string_view message) {
  fs::create_directories("summary_tmp");
  {
    std::ofstream f("summary_tmp/audio_rec.bin", std::ios::binary | std::ios::trunc);
    f.write(message.data(), std::streamsize(message.size()));
  }
  std::string out;
  if (std::FILE* p = popen("protoc --decode_raw < summary_tmp/audio_rec.bin 2>&1", "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// 16-bit little-endian sample at byte offset `at`.
int sample_at(const std::string& wav, size_t at) {
  return int16_t(uint16_t(uint8_t(wav[at])) | uint16_t(uint8_t(wav[at + 1]) << 8));
}

}  // namespace

TEST_CASE("encode_wav: the bytes of a tiny mono signal, built by hand", "[summary][audio]") {
  // 0 -> 0; 0.5 * 32767 = 16383.5 -> 16384 (0x4000); -1 -> -32767 (0x8001); 1.5 clamps to 32767 (0x7fff).
  const std::string wav = sm::encode_wav(gd::Tensor<float>::from({0.f, 0.5f, -1.f, 1.5f}, {4}), 8000);
  const std::string expected = std::string("RIFF") + std::string("\x2c\x00\x00\x00", 4) + "WAVE" + "fmt " +
                               std::string("\x10\x00\x00\x00", 4) +      // fmt chunk size 16
                               std::string("\x01\x00\x01\x00", 4) +      // PCM, 1 channel
                               std::string("\x40\x1f\x00\x00", 4) +      // 8000 Hz
                               std::string("\x80\x3e\x00\x00", 4) +      // 16000 bytes/s
                               std::string("\x02\x00\x10\x00", 4) +      // block align 2, 16 bits
                               "data" + std::string("\x08\x00\x00\x00", 4) +
                               std::string("\x00\x00\x00\x40\x01\x80\xff\x7f", 8);
  CHECK(wav.size() == 52);
  CHECK(wav == expected);
}

TEST_CASE("encode_wav: stereo interleaving, rounding and header fields", "[summary][audio]") {
  // frames x channels = 3 x 2; samples stay interleaved as stored (row-major).
  const std::vector<float> x = {0.25f, -0.25f, 1e-5f, -2.f, -0.5f, 0.75f};
  const std::string wav = sm::encode_wav(gd::Tensor<float>::from(x, {3, 2}), 44100.4);
  REQUIRE(wav.size() == 44 + 12);
  CHECK(sample_at(wav, 22) == 2);                         // channels
  CHECK((uint8_t(wav[24]) | uint8_t(wav[25]) << 8 | uint8_t(wav[26]) << 16) == 44100);
  CHECK((uint8_t(wav[28]) | uint8_t(wav[29]) << 8 | uint8_t(wav[30]) << 16) == 44100 * 4);
  CHECK(sample_at(wav, 32) == 4);                         // block align
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = std::min(1.0, std::max(-1.0, double(x[i]))) * 32767.0;
    CHECK(sample_at(wav, 44 + 2 * i) == int(std::lround(v)));
  }
  CHECK(sample_at(wav, 44) == 8192);    // 8191.75
  CHECK(sample_at(wav, 46) == -8192);
  CHECK(sample_at(wav, 48) == 0);       // 0.33
  CHECK(sample_at(wav, 50) == -32767);
}

TEST_CASE("FileWriter::audio: decoded by decode_event and by protoc", "[summary][audio]") {
  const fs::path dir = fs::path("summary_tmp") / "audio";
  fs::remove_all(dir);
  fs::path path;
  const auto clips = gd::Tensor<float>::from({0.f, 0.5f, -1.f, 0.25f, 0.25f, 0.25f, 1.f, 0.f, -0.5f}, {3, 3});
  {
    sm::FileWriter w(dir);
    w.audio("voice", clips, 8000, 7, 2);
    w.audio("one", gd::Tensor<float>::zeros({1, 5, 2}), 16000, 8, 1);
    path = w.path();
  }
  const auto ev = sm::read_events(path);
  REQUIRE(ev.size() == 3);
  CHECK(ev[1].step == 7);
  REQUIRE(ev[1].values.size() == 2);  // max_outputs = 2 of 3 clips
  for (int i = 0; i < 2; ++i) {
    const sm::Value& v = ev[1].values[size_t(i)];
    CHECK(v.tag == "voice/audio/" + std::to_string(i));
    REQUIRE(v.audio);
    CHECK(v.audio->sample_rate == 8000.f);
    CHECK(v.audio->num_channels == 1);
    CHECK(v.audio->length_frames == 3);
    CHECK(v.audio->content_type == "audio/wav");
    REQUIRE(v.audio->encoded.size() == 44 + 6);
    CHECK(v.audio->encoded.substr(0, 4) == "RIFF");
    for (int f = 0; f < 3; ++f)
      CHECK(sample_at(v.audio->encoded, 44 + 2 * size_t(f)) == int(std::lround(clips(i, f) * 32767.0)));
  }
  REQUIRE(ev[2].values.size() == 1);
  CHECK(ev[2].values[0].tag == "one/audio");
  REQUIRE(ev[2].values[0].audio);
  CHECK(ev[2].values[0].audio->num_channels == 2);
  CHECK(ev[2].values[0].audio->length_frames == 5);
  CHECK(ev[2].values[0].audio->encoded.size() == 44 + 20);

  const auto recs = gradus::io::read_tfrecords(path);
  const std::string raw = protoc_raw(recs.at(1));
  INFO(raw);
  CHECK(raw.find("2: 7") != std::string::npos);                 // step
  CHECK(raw.find("1: \"voice/audio/1\"") != std::string::npos);  // tag
  CHECK(raw.find("6 {") != std::string::npos);                   // Value.audio
  CHECK(raw.find("1: 0x45fa0000") != std::string::npos);         // sample_rate 8000.f as fixed32
  CHECK(raw.find("2: 1") != std::string::npos);                  // num_channels
  CHECK(raw.find("3: 3") != std::string::npos);                  // length_frames
  CHECK(raw.find("4: \"RIFF") != std::string::npos);             // encoded_audio_string
  // content_type "audio/wav": its bytes happen to parse as a message (0x61 = field 12, fixed64
  // "udio/wav"), so --decode_raw shows them as one
  CHECK((raw.find("5: \"audio/wav\"") != std::string::npos ||
         raw.find("12: 0x7661772f6f696475") != std::string::npos));
}

TEST_CASE("FileWriter::audio and encode_wav: bad input", "[summary][audio]") {
  const fs::path dir = fs::path("summary_tmp") / "audio_bad";
  fs::remove_all(dir);
  sm::FileWriter w(dir);
  using Catch::Matchers::Contains;
  CHECK_THROWS_AS(w.audio("a", gd::Tensor<float>::zeros({4}), 8000, 1), gd::shape_error);
  CHECK_THROWS_WITH(w.audio("a", gd::Tensor<float>::zeros({1, 2, 3, 4}), 8000, 1),
                    Contains("FileWriter::audio: expected audio [N, frames] or [N, frames, channels]"));
  CHECK_THROWS_WITH(w.audio("a", gd::Tensor<float>::zeros({1, 4}), 0, 1), Contains("sample_rate must be > 0"));
  CHECK_THROWS_AS(w.audio("a", gd::Tensor<float>::zeros({1, 4}), -8000, 1), gd::value_error);
  CHECK_THROWS_AS(w.audio("a", gd::Tensor<float>::zeros({1, 4}), std::nan(""), 1), gd::value_error);
  auto bad = gd::Tensor<float>::zeros({1, 4});
  bad.data()[2] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(w.audio("a", bad, 8000, 1), Contains("encode_wav: sample 2 is not finite"));
  bad.data()[2] = std::nanf("");
  CHECK_THROWS_WITH(sm::encode_wav(bad, 8000), Contains("encode_wav: sample 2 is not finite"));
  CHECK_THROWS_AS(w.audio("", gd::Tensor<float>::zeros({1, 4}), 8000, 1), gd::value_error);
  CHECK_THROWS_AS(sm::encode_wav(gd::Tensor<float>::zeros({2, 2, 2}), 8000), gd::shape_error);
  CHECK_THROWS_AS(sm::encode_wav(gd::Tensor<float>::zeros({4}), 0.2), gd::value_error);
  w.close();
  const auto ev = sm::read_events(w.path());
  CHECK(ev.size() == 1);  // nothing but the file_version event was written
}
