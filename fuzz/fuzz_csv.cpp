// libFuzzer harness: the CSV reader and the typed row parser on arbitrary bytes. The first
// byte picks the delimiter; every record is then read as (int64 with a default, float32 with a
// default, string) and as plain strings.
#include <gradus/data/csv.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(csv) {
  namespace gdd = gradus::data;
  if (size == 0) return 0;
  static const char delims[4] = {',', ';', '\t', '|'};
  const char delim = delims[data[0] & 3];
  static const std::vector<gdd::CsvColumn> typed = {
      {.name = "i", .type = gdd::Dtype::int64, .default_value = "0"},
      {.name = "f", .type = gdd::Dtype::float32, .default_value = "1.5"},
      {.name = "s", .type = gdd::Dtype::string}};
  static const std::vector<std::string> names = {"i", "f", "s"};
  std::istringstream in(std::string(gradus::fuzz::bytes(data + 1, size - 1)));
  try {
    gdd::CsvReader reader(in, "fuzz.csv", delim);
    std::vector<std::string> fields;
    int64_t last_line = 0;
    size_t total = 0;
    while (reader.next(fields)) {
      if (fields.empty() || reader.line() <= last_line) __builtin_trap();
      last_line = reader.line();
      for (const auto& f : fields) total += f.size();
      if (total > size) __builtin_trap();  // a field's bytes all come from the input
      try {
        const gdd::Example e = gdd::csv_row(fields, typed, names, reader.name(), reader.line());
        if (e.size() != 3 || e.tensor<int64_t>(0).rank() != 0 || e.string(2) != fields[2]) __builtin_trap();
      } catch (const gradus::io_error&) {
      }
    }
  } catch (const gradus::io_error&) {
  }
  return 0;
}
