// gradus/data/csv.hpp — CSV files as a Dataset (tf.data.experimental.CsvDataset): typed
// columns, per-column defaults for empty fields, an optional header, and RFC 4180 quoting
// (a quoted field may hold the delimiter, newlines and "" for a quote).
//
//   auto ds = gd::data::csv({"train.csv"}, {
//       .columns = {{.name = "age", .type = gd::data::Dtype::int64, .default_value = "0"},
//                   {.name = "income", .type = gd::data::Dtype::float32},
//                   {.name = "city", .type = gd::data::Dtype::string, .default_value = ""}},
//       .header = true});
//   // each element: {age: int64 [], income: float32 [], city: string}
//
// Every malformed input is an io_error naming the file and the line where its record begins:
// `csv: 'train.csv' line 7: 2 fields, expected 3`.
#pragma once
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/data/dataset.hpp"
#include "gradus/data/example.hpp"

namespace gradus::data {

/// The type of a CSV column: a scalar tensor of float, double or int64, or a string.
enum class Dtype { float32, float64, int64, string };

/// One CSV column. An empty field takes `default_value` (parsed as the column's type); with no
/// default an empty field is an error.
struct CsvColumn {
  std::string name = {};  ///< the field's name ("": the header's name, or unnamed without a header)
  Dtype type = Dtype::float32;
  std::optional<std::string> default_value = std::nullopt;
};

struct CsvOptions {
  /// The columns in file order; empty: as many float32 columns without defaults as the first
  /// record (or the header) has.
  std::vector<CsvColumn> columns = {};
  bool header = false;  ///< the first record of each file names the columns (and is skipped)
  char delimiter = ',';
};

/// Splits a character stream into CSV records. A record ends at a newline outside quotes
/// ("\r\n" counts as one); a field that starts with a quote ends at the next lone quote, and
/// "" inside it is one quote. Blank lines are skipped. A quote inside an unquoted field,
/// anything but a delimiter or the end of the record after a closing quote, and a quote left
/// open at the end of the input are io_errors naming `name` and the line.
///   gd::data::CsvReader r(in, "data.csv");
///   std::vector<std::string> fields;
///   while (r.next(fields)) { ... r.line() ... }
class CsvReader {
 public:
  CsvReader(std::istream& in, std::string name, char delimiter = ',');

  /// Reads the next record into `fields`; false at the end of the input.
  bool next(std::vector<std::string>& fields);
  /// The line on which the last record read begins (1-based).
  int64_t line() const { return start_; }
  const std::string& name() const { return name_; }

 private:
  int get() {
    const auto c = in_.sbumpc();
    return c == std::char_traits<char>::eof() ? EOF : int(static_cast<unsigned char>(c));
  }
  int peek() {
    const auto c = in_.sgetc();
    return c == std::char_traits<char>::eof() ? EOF : int(static_cast<unsigned char>(c));
  }
  static std::string printable(int c);
  std::streambuf& in_;
  std::string name_;
  char delim_;
  int64_t line_ = 1, start_ = 1, quote_line_ = 1;
};

namespace detail {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

const char* dtype_word(Dtype t);

/// Parses `text` as a value of `type` (numbers: surrounding blanks ignored, decimal or
/// scientific, "inf" and "nan" too); nullopt when it is not one or out of the type's range.
std::optional<Value> parse_csv_value(const std::string& text, Dtype type);

}  // namespace detail

/// Turns one record's fields into an Example of `columns` (names from `names`, one per column);
/// io_error naming `file` and `line` on a wrong field count, an empty field without default,
/// or a field that does not parse.
Example csv_row(const std::vector<std::string>& fields, const std::vector<CsvColumn>& columns,
                       const std::vector<std::string>& names, const std::string& file, int64_t line);

namespace detail {

class CsvSource final : public Source {
 public:
  CsvSource(std::vector<std::string> files, CsvOptions o);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t) const override;

 private:
  std::vector<std::string> files_;
  CsvOptions o_;
};

}  // namespace detail

/// The records of `files` (one after the other) as Examples with one scalar field per column.
/// A missing file is an io_error now and when a pass reaches it.
Dataset csv(std::vector<std::string> files, CsvOptions options = {});

}  // namespace gradus::data

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data {
GRADUS_INLINE CsvReader::CsvReader(std::istream& in, std::string name, char delimiter)
    : in_(*in.rdbuf()), name_(std::move(name)), delim_(delimiter) {
  GRADUS_CHECK(value_error, delimiter != '"' && delimiter != '\n' && delimiter != '\r', "csv: delimiter ",
               int(delimiter), " cannot be a quote or a line break");
}

GRADUS_INLINE bool CsvReader::next(std::vector<std::string>& fields) {
  for (;;) {
    fields.clear();
    int c = get();
    if (c == EOF) return false;
    start_ = line_;
    std::string field;
    bool any_quoted = false;
    enum { start, plain, quoted, after_quote } st = start;
    for (;; c = get()) {
      if (st == quoted) {
        if (c == EOF)
          gradus::detail::throw_error<io_error>({"csv: '", name_, "' line ", start_, ": a quoted field opened on line ",
                                                 quote_line_, " is not closed before the end of the file"});
        if (c == '"')
          st = after_quote;
        else
          field += char(c);
        if (c == '\n') ++line_;
        continue;
      }
      if (c == '\r' && (peek() == '\n' || peek() == EOF)) continue;  // "\r\n" ends the record as "\n" does
      if (c == EOF || c == '\n') {
        if (c == '\n') ++line_;
        fields.push_back(std::move(field));
        break;
      }
      if (c == delim_) {
        fields.push_back(std::move(field));
        field.clear();
        st = start;
        continue;
      }
      if (st == after_quote) {
        if (c == '"') {
          field += '"';
          st = quoted;
          continue;
        }
        gradus::detail::throw_error<io_error>({"csv: '", name_, "' line ", line_, ": unexpected ", printable(c),
                                               " after the closing quote of field ", fields.size() + 1,
                                               " (a quote inside a quoted field is written \"\")"});
      }
      if (c == '"') {
        GRADUS_CHECK(io_error, st == start, "csv: '", name_, "' line ", line_, ": a quote inside unquoted field ",
                     fields.size() + 1, " (quote the whole field and write the quote as \"\")");
        st = quoted;
        any_quoted = true;
        quote_line_ = line_;
        continue;
      }
      field += char(c);
      st = plain;
    }
    if (fields.size() == 1 && fields[0].empty() && !any_quoted) continue;  // a blank line
    return true;
  }
}

GRADUS_INLINE std::string CsvReader::printable(int c) {
  if (c >= 32 && c < 127) return gradus::detail::str("'", char(c), "'");
  return gradus::detail::str("byte ", c);
}
}  // namespace gradus::data
namespace gradus::data::detail {
GRADUS_INLINE const char* dtype_word(Dtype t) {
  switch (t) {
    case Dtype::float32: return "float32";
    case Dtype::float64: return "float64";
    case Dtype::int64: return "int64";
    default: return "string";
  }
}

GRADUS_INLINE std::optional<Value> parse_csv_value(const std::string& text, Dtype type) {
  if (type == Dtype::string) return Value(text);
  const std::string_view t = trim(text);
  if (t.empty()) return std::nullopt;
  // from_chars: no locale, no allocation; it takes no '+', so one is skipped before a digit or '.'.
  const char* b = t.data();
  const char* e = t.data() + t.size();
  if (*b == '+' && t.size() > 1 && (std::isdigit(static_cast<unsigned char>(b[1])) || b[1] == '.')) ++b;
  auto parse = [&](auto v) -> std::optional<Value> {
    const auto [p, ec] = std::from_chars(b, e, v);
    if (ec != std::errc() || p != e) return std::nullopt;
    return Value(Tensor<decltype(v)>::scalar(v));
  };
  if (type == Dtype::int64) return parse(int64_t(0));
  if (type == Dtype::float64) return parse(0.0);
  return parse(0.f);
}
}  // namespace gradus::data::detail
namespace gradus::data {
GRADUS_INLINE Example csv_row(const std::vector<std::string>& fields, const std::vector<CsvColumn>& columns,
                              const std::vector<std::string>& names, const std::string& file, int64_t line) {
  GRADUS_CHECK(io_error, fields.size() == columns.size(), "csv: '", file, "' line ", line, ": ", fields.size(),
               " field", fields.size() == 1 ? "" : "s", ", expected ", columns.size());
  Example e;
  for (size_t i = 0; i < columns.size(); ++i) {
    const CsvColumn& c = columns[i];
    const std::string what = names[i].empty() ? gradus::detail::str("column ", i + 1)
                                              : gradus::detail::str("column ", i + 1, " ('", names[i], "')");
    const bool empty = c.type == Dtype::string ? fields[i].empty() : detail::trim(fields[i]).empty();
    const std::string* text = &fields[i];
    if (empty && c.type != Dtype::string) {
      GRADUS_CHECK(io_error, c.default_value.has_value(), "csv: '", file, "' line ", line, ": ", what,
                   " is empty and has no default");
      text = &*c.default_value;
    } else if (empty && c.default_value) {
      text = &*c.default_value;
    }
    std::optional<Value> v = detail::parse_csv_value(*text, c.type);
    GRADUS_CHECK(io_error, v.has_value(), "csv: '", file, "' line ", line, ": ", what, ": cannot parse '", *text,
                 "' as ", detail::dtype_word(c.type), text != &fields[i] ? " (the column's default)" : "");
    e.fields().push_back({names[i], std::move(*v)});
  }
  return e;
}
}  // namespace gradus::data
namespace gradus::data::detail {
GRADUS_INLINE CsvSource::CsvSource(std::vector<std::string> files, CsvOptions o)
    : files_(std::move(files)), o_(std::move(o)) {
  GRADUS_CHECK(value_error, !files_.empty(), "csv: no files");
  for (const auto& f : files_) check_readable(f, "csv");
  for (size_t i = 0; i < o_.columns.size(); ++i) {
    const CsvColumn& c = o_.columns[i];
    GRADUS_CHECK(value_error, !c.default_value || c.type == Dtype::string || parse_csv_value(*c.default_value, c.type),
                 "csv: the default of column ", i + 1, " ('", c.default_value.value_or(""), "') is not a ",
                 dtype_word(c.type));
  }
}

GRADUS_INLINE std::unique_ptr<Stream> CsvSource::open(uint64_t) const {
  struct S final : Stream {
    const CsvSource& self;
    size_t f = 0;
    std::unique_ptr<std::ifstream> in;
    std::unique_ptr<CsvReader> reader;
    std::vector<CsvColumn> columns;
    std::vector<std::string> names, fields;
    explicit S(const CsvSource& s) : self(s) {}
    std::optional<Example> next() override {
      for (;;) {
        if (!reader) {
          if (f >= self.files_.size()) return std::nullopt;
          const std::string& path = self.files_[f];
          check_readable(path, "csv");
          in = std::make_unique<std::ifstream>(path, std::ios::binary);
          GRADUS_CHECK(io_error, in->is_open(), "csv: cannot open '", path, "': ", std::strerror(errno));
          reader = std::make_unique<CsvReader>(*in, path, self.o_.delimiter);
          columns = self.o_.columns;
          names.clear();
          for (const auto& c : columns) names.push_back(c.name);
          if (self.o_.header) {
            if (!reader->next(fields)) {  // an empty file: no header, no rows
              reader.reset();
              ++f;
              continue;
            }
            if (columns.empty()) columns.assign(fields.size(), CsvColumn{});
            GRADUS_CHECK(io_error, fields.size() == columns.size(), "csv: '", path, "' line ", reader->line(),
                         ": the header has ", fields.size(), " names, expected ", columns.size(), " columns");
            names.resize(columns.size());
            for (size_t i = 0; i < columns.size(); ++i)
              if (columns[i].name.empty()) names[i] = fields[i];
          }
        }
        if (!reader->next(fields)) {
          GRADUS_CHECK(io_error, !in->bad(), "csv: read error in '", self.files_[f], "'");
          reader.reset();
          in.reset();
          ++f;
          continue;
        }
        if (columns.empty()) {
          columns.assign(fields.size(), CsvColumn{});
          names.assign(fields.size(), std::string());
        }
        return csv_row(fields, columns, names, reader->name(), reader->line());
      }
    }
  };
  return std::make_unique<S>(*this);
}
}  // namespace gradus::data::detail
namespace gradus::data {
GRADUS_INLINE Dataset csv(std::vector<std::string> files, CsvOptions options) {
  return Dataset(std::make_shared<detail::CsvSource>(std::move(files), std::move(options)));
}
}  // namespace gradus::data
#endif  // GRADUS_DEFINE_COMPILED
