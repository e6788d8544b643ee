// gradus/summary/wav.hpp — 16-bit PCM WAV encoding, the audio of TensorBoard audio summaries.
//
// The file is RIFF/WAVE, little-endian: "RIFF" <36 + data bytes> "WAVE", a 16-byte "fmt " chunk
// (format 1 = PCM, channels, sample rate, byte rate, block align, 16 bits per sample) and a
// "data" chunk of interleaved int16 samples, each round(clamp(x, -1, 1) * 32767).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::summary {

/// The WAV bytes of `audio` ([frames] or [frames, channels], values in [-1, 1], clamped) at
/// `sample_rate` Hz (rounded to an integer, >= 1):
///   std::string wav = gd::summary::encode_wav(gd::Tensor<float>::from({0.f, 0.5f, -1.f}, {3}), 8000);
/// shape_error for another rank or no channels; value_error for NaN/inf samples or a bad rate.
std::string encode_wav(const Tensor<float>& audio, double sample_rate);

}  // namespace gradus::summary

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::summary {
GRADUS_INLINE std::string encode_wav(const Tensor<float>& audio, double sample_rate) {
  const Shape& s = audio.shape();
  GRADUS_CHECK(shape_error, s.rank() == 1 || s.rank() == 2,
               "encode_wav: expected audio [frames] or [frames, channels], got shape ", s);
  const int64_t frames = s[0], channels = s.rank() == 2 ? s[1] : 1;
  GRADUS_CHECK(shape_error, channels >= 1 && channels <= 65535, "encode_wav: expected 1 to 65535 channels, got shape ",
               s);
  GRADUS_CHECK(value_error, std::isfinite(sample_rate) && sample_rate >= 0.5 && sample_rate <= 1e9,
               "encode_wav: sample_rate must be a finite number of Hz in [0.5, 1e9], got ", sample_rate);
  GRADUS_CHECK(value_error, std::round(sample_rate) * double(channels) * 2 <= 4294967295.0, "encode_wav: ", channels,
               " channels at ", sample_rate, " Hz exceed WAV's byte rate field");
  const uint64_t data_bytes = uint64_t(frames) * uint64_t(channels) * 2;
  GRADUS_CHECK(value_error, data_bytes <= 0xFFFFFFFFull - 36, "encode_wav: ", frames, " frames of ", channels,
               " channels do not fit a WAV file (4 GiB)");
  const uint32_t rate = uint32_t(std::lround(sample_rate));
  std::string out;
  out.reserve(44 + size_t(data_bytes));
  auto u32 = [&](uint32_t v) { for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xFF)); };
  auto u16 = [&](uint32_t v) { for (int i = 0; i < 2; ++i) out.push_back(char((v >> (8 * i)) & 0xFF)); };
  out += "RIFF";
  u32(uint32_t(36 + data_bytes));
  out += "WAVEfmt ";
  u32(16);
  u16(1);                                      // PCM
  u16(uint32_t(channels));
  u32(rate);
  u32(uint32_t(rate * channels * 2));          // byte rate
  u16(uint32_t(channels * 2));                 // block align
  u16(16);                                     // bits per sample
  out += "data";
  u32(uint32_t(data_bytes));
  const float* p = audio.data();
  for (int64_t i = 0; i < frames * channels; ++i) {
    GRADUS_CHECK(value_error, std::isfinite(p[i]), "encode_wav: sample ", i, " is not finite: ", p[i]);
    const long q = std::lround(double(std::clamp(p[i], -1.f, 1.f)) * 32767.0);
    u16(uint32_t(uint16_t(int16_t(q))));
  }
  return out;
}
}  // namespace gradus::summary
#endif  // GRADUS_DEFINE_COMPILED
