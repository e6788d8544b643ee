// benchmarks/safetensors_header.cpp — reading the header of a checkpoint with many tensors:
//   safetensors_decode   gd::io::decode_safetensors of a file of N empty-data-free entries (the
//                        header's JSON read by detail/json.hpp and checked against the schema,
//                        the entries' order and coverage checked, the tensors made)
//   json_read            detail::read_json alone over that header, counting events
//   nlohmann_sax         nlohmann-json's SAX parser over the same header, counting events (the
//                        parser the reader replaced; a peer, not used by gradus)
// The header names N tensors "model/block_i/kernel" of dtype F32 and shape [0] (no data, so that
// the time is the header's), about 100 bytes each.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include <gradus/gradus.hpp>
#include <gradus/io.hpp>

#include "gradus/detail/json.hpp"

namespace {

namespace gd = gradus;

std::string safetensors_header(int64_t n) {
  std::string h = "{\"__metadata__\":{\"format\":\"pt\"}";
  for (int64_t i = 0; i < n; ++i)
    h += ",\"model/block_" + std::to_string(i) + "/kernel\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
  return h + "}";
}

struct CountEvents {
  int64_t n = 0;
  void start_object() { ++n; }
  void end_object() { ++n; }
  void start_array() { ++n; }
  void end_array() { ++n; }
  void key(std::string&) { ++n; }
  void string(std::string&) { ++n; }
  void number_unsigned(uint64_t) { ++n; }
  void number_integer(int64_t) { ++n; }
  void number_float(double) { ++n; }
  void boolean(bool) { ++n; }
  void null() { ++n; }
};

struct CountNlohmannEvents {
  using json = nlohmann::json;
  int64_t n = 0;
  bool null() { return ++n; }
  bool boolean(bool) { return ++n; }
  bool number_integer(json::number_integer_t) { return ++n; }
  bool number_unsigned(json::number_unsigned_t) { return ++n; }
  bool number_float(json::number_float_t, const json::string_t&) { return ++n; }
  bool string(json::string_t&) { return ++n; }
  bool binary(json::binary_t&) { return ++n; }
  bool start_object(std::size_t) { return ++n; }
  bool key(json::string_t&) { return ++n; }
  bool end_object() { return ++n; }
  bool start_array(std::size_t) { return ++n; }
  bool end_array() { return ++n; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

void safetensors_decode(benchmark::State& state) {
  const std::string header = safetensors_header(state.range(0));
  std::string file;
  gd::io::detail::store_le<8>(file, header.size());
  file += header;
  for (auto _ : state) {
    gd::io::Safetensors st = gd::io::decode_safetensors(file, "bench");
    benchmark::DoNotOptimize(st.tensors.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(header.size()));
}

void json_read(benchmark::State& state) {
  const std::string header = safetensors_header(state.range(0));
  for (auto _ : state) {
    CountEvents c;
    if (!gd::detail::read_json(header, c).empty()) state.SkipWithError("not JSON");
    benchmark::DoNotOptimize(c.n);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(header.size()));
}

void nlohmann_sax(benchmark::State& state) {
  const std::string header = safetensors_header(state.range(0));
  for (auto _ : state) {
    CountNlohmannEvents c;
    auto input = nlohmann::detail::input_adapter(header.begin(), header.end());
    if (!nlohmann::detail::parser<nlohmann::json, decltype(input)>(std::move(input), nullptr, true, false).sax_parse(&c, true))
      state.SkipWithError("not JSON");
    benchmark::DoNotOptimize(c.n);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(header.size()));
}

}  // namespace

BENCHMARK(safetensors_decode)->Arg(100)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(json_read)->Arg(100)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(nlohmann_sax)->Arg(100)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
