// Tests of the CSV reader and gd::data::csv: typed columns, defaults, quoting, and errors that
// name the file and the line.
#include <catch2/catch.hpp>
#include <sstream>

#include "data_support.hpp"
#include "gradus/data/csv.hpp"

namespace gd = gradus;
using gd::data::CsvColumn;
using gd::data::Dtype;
using gd::data::Example;
using Catch::Matchers::Contains;
using data_test::TempDir;
using Rows = std::vector<std::vector<std::string>>;

namespace {

Rows records(const std::string& text, char delim = ',') {
  std::istringstream in(text);
  gd::data::CsvReader r(in, "mem.csv", delim);
  Rows out;
  std::vector<std::string> f;
  while (r.next(f)) out.push_back(f);
  return out;
}

std::vector<Example> read(const TempDir& dir, const std::string& text, gd::data::CsvOptions o) {
  data_test::write_file(dir / "t.csv", text);
  return gd::data::csv({dir / "t.csv"}, std::move(o)).collect();
}

}  // namespace

TEST_CASE("CsvReader: fields, quotes, embedded delimiters, quotes and newlines", "[data][csv]") {
  CHECK(records("a,b,c\n1,2,3\n") == Rows{{"a", "b", "c"}, {"1", "2", "3"}});
  CHECK(records("a,,c") == Rows{{"a", "", "c"}});                 // no final newline
  CHECK(records("x\r\ny\r\n") == Rows{{"x"}, {"y"}});              // CRLF
  CHECK(records("\n\na\n\n") == Rows{{"a"}});                       // blank lines skipped
  CHECK(records("\"\"\n") == Rows{{""}});                          // a quoted empty field is a record
  CHECK(records("\"a,b\",\"say \"\"hi\"\"\"\n") == Rows{{"a,b", "say \"hi\""}});
  CHECK(records("1,\"two\nlines\",3\n4,5,6\n") == Rows{{"1", "two\nlines", "3"}, {"4", "5", "6"}});
  CHECK(records("\"a\r\nb\"\n") == Rows{{"a\r\nb"}});
  CHECK(records("a;b;\"c;d\"", ';') == Rows{{"a", "b", "c;d"}});
  CHECK(records(",\n") == Rows{{"", ""}});

  std::istringstream in("h1,h2\n\"multi\nline\",x\n\nlast,y\n");
  gd::data::CsvReader r(in, "mem.csv");
  std::vector<std::string> f;
  REQUIRE(r.next(f));
  CHECK(r.line() == 1);
  REQUIRE(r.next(f));
  CHECK(r.line() == 2);
  REQUIRE(r.next(f));
  CHECK(r.line() == 5);  // after the two-line field and a blank line
  CHECK_FALSE(r.next(f));
}

TEST_CASE("CsvReader: malformed quoting is an io_error with the line", "[data][csv]") {
  CHECK_THROWS_WITH(records("a,b\nc,d\"e\n"), Contains("'mem.csv' line 2") && Contains("quote inside unquoted field 2"));
  CHECK_THROWS_WITH(records("a\n\"open\nstill open"),
                    Contains("line 2") && Contains("quoted field opened on line 2 is not closed"));
  CHECK_THROWS_WITH(records("\"ab\"c,d\n"), Contains("line 1") && Contains("unexpected 'c' after the closing quote"));
  std::istringstream empty;
  CHECK_THROWS_AS(gd::data::CsvReader(empty, "x", '"'), gd::value_error);
}

TEST_CASE("csv: typed columns with a header and named fields", "[data][csv]") {
  TempDir dir;
  auto rows = read(dir, "age,income,city\n31,1200.5,Oslo\n45,-3e2,\"Rio, RJ\"\n",
                   {.columns = {{.type = Dtype::int64}, {.type = Dtype::float64}, {.type = Dtype::string}},
                    .header = true});
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].name(0) == "age");
  CHECK(rows[0].tensor<int64_t>("age").item() == 31);
  CHECK(rows[0].tensor<double>("income").item() == 1200.5);
  CHECK(rows[1].tensor<double>("income").item() == -300.0);
  CHECK(rows[1].string("city") == "Rio, RJ");
  CHECK(rows[0].tensor<int64_t>("age").rank() == 0);

  // Given names win over the header's; no columns given: float32 columns from the first record.
  auto renamed = read(dir, "a,b\n1,2\n", {.columns = {{.name = "x"}, {}}, .header = true});
  CHECK(renamed[0].name(0) == "x");
  CHECK(renamed[0].name(1) == "b");
  auto inferred = read(dir, " 1.5 ,2\n3,4\n", {});
  REQUIRE(inferred.size() == 2);
  CHECK(inferred[0].tensor<float>(0).item() == 1.5f);
  CHECK(inferred[1].tensor<float>(1).item() == 4.f);
  auto signs = read(dir, "+5,+.5,-2.5e-1\n", {.columns = {{.type = Dtype::int64}, {}, {.type = Dtype::float64}}});
  CHECK(signs[0].tensor<int64_t>(0).item() == 5);
  CHECK(signs[0].tensor<float>(1).item() == 0.5f);
  CHECK(signs[0].tensor<double>(2).item() == -0.25);

  // Batched: scalars become [n] tensors, strings a list.
  data_test::write_file(dir / "b.csv", "1,a\n2,b\n3,c\n");
  auto b = gd::data::csv({dir / "b.csv"}, {.columns = {{.type = Dtype::int64}, {.type = Dtype::string}}}).batch(2).collect();
  CHECK(data_test::values(b[0].tensor<int64_t>(0)) == std::vector<int64_t>{1, 2});
  CHECK(b[1].strings(1) == gd::data::Strings{"c"});
}

TEST_CASE("csv: per-column defaults for empty fields", "[data][csv]") {
  TempDir dir;
  gd::data::CsvOptions o{.columns = {{.name = "a", .type = Dtype::int64, .default_value = "-1"},
                                     {.name = "b", .type = Dtype::float32, .default_value = "0.5"},
                                     {.name = "c", .type = Dtype::string, .default_value = "none"},
                                     {.name = "d", .type = Dtype::float32}}};
  auto rows = read(dir, ",,,1\n7, ,x,2\n", o);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].tensor<int64_t>("a").item() == -1);
  CHECK(rows[0].tensor<float>("b").item() == 0.5f);
  CHECK(rows[0].string("c") == "none");
  CHECK(rows[1].tensor<int64_t>("a").item() == 7);
  CHECK(rows[1].tensor<float>("b").item() == 0.5f);  // blank counts as empty for numbers
  CHECK(rows[1].string("c") == "x");
  CHECK_THROWS_WITH(read(dir, "1,2,x,3\n1,2,x,\n", o), Contains("line 2") && Contains("column 4 ('d') is empty and has no default"));
  gd::data::CsvOptions bad{.columns = {{.type = Dtype::int64, .default_value = "zero"}}};
  CHECK_THROWS_WITH(read(dir, "1\n", bad), Contains("default of column 1 ('zero') is not a int64"));
}

TEST_CASE("csv: a malformed row is an io_error naming the file and the line", "[data][csv]") {
  TempDir dir;
  const std::string path = dir / "t.csv";
  gd::data::CsvOptions o{.columns = {{.type = Dtype::int64}, {.type = Dtype::float32}, {.type = Dtype::string}},
                         .header = true};
  CHECK_THROWS_WITH(read(dir, "a,b,c\n1,2,x\n3,4\n", o), Contains("csv: '" + path + "' line 3: 2 fields, expected 3"));
  CHECK_THROWS_WITH(read(dir, "a,b,c\n1,2,\"x\ny\"\n1.5,2,z\n", o),
                    Contains("line 4") && Contains("column 1 ('a'): cannot parse '1.5' as int64"));
  CHECK_THROWS_WITH(read(dir, "a,b,c\n1,2e,x\n", o), Contains("line 2") && Contains("cannot parse '2e' as float32"));
  CHECK_THROWS_WITH(read(dir, "a,b,c\n+-5,1,x\n", o), Contains("cannot parse '+-5' as int64"));
  CHECK_THROWS_WITH(read(dir, "a,b,c\n1,1e39,x\n", o), Contains("cannot parse '1e39' as float32"));  // out of range
  CHECK_THROWS_WITH(read(dir, "a,b\n", o), Contains("line 1: the header has 2 names, expected 3 columns"));
  CHECK_THROWS_WITH(read(dir, "1,2\n3,4,5\n", {}), Contains("line 2: 3 fields, expected 2"));
  CHECK_THROWS_WITH(read(dir, "x,\"unterminated\n", {}), Contains("not closed"));
  CHECK(read(dir, "", o).empty());  // an empty file: no header, no rows
}

TEST_CASE("csv: several files; a missing file is an io_error", "[data][csv]") {
  TempDir dir;
  data_test::write_file(dir / "1.csv", "v\n1\n2\n");
  data_test::write_file(dir / "2.csv", "v\n3\n");
  gd::data::CsvOptions o{.columns = {{.type = Dtype::int64}}, .header = true};
  CHECK(data_test::ints(gd::data::csv(gd::data::list_files(dir / "*.csv"), o)) == std::vector<int64_t>{1, 2, 3});
  CHECK_THROWS_WITH(gd::data::csv({dir / "1.csv", dir / "missing.csv"}, o),
                    Contains("csv: cannot open '" + (dir / "missing.csv") + "': no such file"));
  auto ds = gd::data::csv({dir / "1.csv", dir / "2.csv"}, o);
  std::filesystem::remove(dir / "2.csv");
  CHECK_THROWS_WITH(ds.collect(), Contains("2.csv") && Contains("no such file"));
}
