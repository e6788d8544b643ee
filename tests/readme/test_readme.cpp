// The examples of the README and of every page of docs/ compile as written, and every page is
// linked from the README. A ```cpp block right after the line
// "<!-- compile -->" is a complete program, compiled as it stands; one after
// "<!-- compile: snippet -->" is statements (and local classes) as a reader writes them in main:
// its #include lines go first, the rest into `int main() { ... }`. Each is compiled with
// -fsyntax-only against include/ (GRADUS_README_COMPILE, set by tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>

namespace fs = std::filesystem;

namespace {

struct MarkedBlock {
  int line = 0;          // of the opening ```cpp, 1-based
  bool snippet = false;  // "<!-- compile: snippet -->"
  std::string code;      // the lines between the fences, each ending in '\n'
};

// Every block of `markdown` marked for compiling, in order. A marker not followed on the next
// line by a ```cpp fence, or a block without its closing fence, is an error naming the line.
std::vector<MarkedBlock> marked_blocks(std::istream& markdown) {
  std::vector<MarkedBlock> out;
  std::string text;
  int line = 0;
  enum class Mark { none, program, snippet } mark = Mark::none;
  int mark_line = 0;
  MarkedBlock* open = nullptr;
  while (std::getline(markdown, text)) {
    ++line;
    if (open) {
      if (text == "```")
        open = nullptr;
      else
        open->code += text + '\n';
      continue;
    }
    if (mark != Mark::none) {
      if (text != "```cpp")
        throw std::runtime_error("README line " + std::to_string(mark_line) +
                                 ": a compile marker must be followed by a ```cpp block");
      out.push_back({line, mark == Mark::snippet, ""});
      open = &out.back();
      mark = Mark::none;
      continue;
    }
    if (text == "<!-- compile -->") mark = Mark::program;
    if (text == "<!-- compile: snippet -->") mark = Mark::snippet;
    if (mark != Mark::none) mark_line = line;
  }
  if (open) throw std::runtime_error("README line " + std::to_string(open->line) + ": the ```cpp block is not closed");
  if (mark != Mark::none)
    throw std::runtime_error("README line " + std::to_string(mark_line) +
                             ": a compile marker must be followed by a ```cpp block");
  return out;
}

// The translation unit for `b`: a program as it is; a snippet with its #include lines first and
// every other line inside main.
std::string source_of(const MarkedBlock& b) {
  if (!b.snippet) return b.code;
  std::istringstream in(b.code);
  std::string includes, body, text;
  while (std::getline(in, text)) (text.rfind("#include", 0) == 0 ? includes : body) += text + '\n';
  return includes + "int main() {\n" + body + "}\n";
}

// Every block of `blocks` in one translation unit, so that the headers are parsed once: the
// #include lines of all of them first, then each block's other lines in a namespace of its own
// (readme_block_<k>; a snippet inside a function, `snippet`), so that their names cannot clash.
std::string combined_source(const std::vector<MarkedBlock>& blocks) {
  std::string includes, bodies, text;
  for (size_t k = 0; k < blocks.size(); ++k) {
    std::istringstream in(blocks[k].code);
    std::string body;
    while (std::getline(in, text)) {
      if (text.rfind("#include", 0) != 0)
        body += text + '\n';
      else if (includes.find(text + '\n') == std::string::npos)
        includes += text + '\n';
    }
    if (blocks[k].snippet) body = "void snippet() {\n" + body + "}\n";
    bodies += "namespace readme_block_" + std::to_string(k) + " {\n" + body + "}\n";
  }
  return includes + bodies;
}

// Compiles `source` (written to `file`) with GRADUS_README_COMPILE; the compiler's exit status.
int compile(const std::string& source, const fs::path& file, const std::string& flags = "") {
  std::ofstream(file) << source;
  const std::string command = std::string(GRADUS_README_COMPILE) + " " + flags + " -x c++ " + file.string();
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("readme: marked blocks are extracted, snippets wrapped in main", "[readme]") {
  std::istringstream md(
      "# Title\n"
      "```cpp\nnot marked\n```\n"
      "<!-- compile -->\n```cpp\nint main() { return 0; }\n```\n"
      "text\n"
      "<!-- compile: snippet -->\n```cpp\n#include <vector>\nstruct P { int x; };\nstd::vector<P> v{{1}};\n```\n");
  const std::vector<MarkedBlock> blocks = marked_blocks(md);
  REQUIRE(blocks.size() == 2);
  CHECK(blocks[0].line == 6);
  CHECK_FALSE(blocks[0].snippet);
  CHECK(source_of(blocks[0]) == "int main() { return 0; }\n");
  CHECK(blocks[1].line == 11);
  CHECK(blocks[1].snippet);
  CHECK(source_of(blocks[1]) == "#include <vector>\nint main() {\nstruct P { int x; };\nstd::vector<P> v{{1}};\n}\n");

  std::istringstream stray("<!-- compile -->\n\n```cpp\nint main() {}\n```\n");
  CHECK_THROWS_MATCHES(marked_blocks(stray), std::runtime_error,
                       Catch::Message("README line 1: a compile marker must be followed by a ```cpp block"));
  std::istringstream unclosed("<!-- compile: snippet -->\n```cpp\nint x;\n");
  CHECK_THROWS_MATCHES(marked_blocks(unclosed), std::runtime_error,
                       Catch::Message("README line 2: the ```cpp block is not closed"));
}

TEST_CASE("readme: the compile check fails on code that does not compile", "[readme]") {
  const fs::path dir = fs::current_path() / "readme_blocks";
  fs::create_directories(dir);
  CHECK(compile("int main() { return 0; }\n", dir / "good.cpp") == 0);
  CHECK(compile("int main() { return undeclared_name; }\n", dir / "bad.cpp") != 0);
}

namespace {

// README.md and every page of docs/, in that order (the pages by name).
std::vector<fs::path> documentation_pages() {
  const fs::path readme = GRADUS_README_PATH;
  std::vector<fs::path> pages;
  for (const auto& e : fs::directory_iterator(readme.parent_path() / "docs"))
    if (e.path().extension() == ".md") pages.push_back(e.path());
  std::sort(pages.begin(), pages.end());
  pages.insert(pages.begin(), readme);
  return pages;
}

}  // namespace

TEST_CASE("readme: blocks combine into one translation unit, each in a namespace of its own", "[readme]") {
  std::istringstream md(
      "<!-- compile -->\n```cpp\n#include <vector>\nint f() { return 1; }\n```\n"
      "<!-- compile: snippet -->\n```cpp\n#include <vector>\n#include <string>\nint x = 2;\n```\n");
  const std::vector<MarkedBlock> blocks = marked_blocks(md);
  CHECK(combined_source(blocks) ==
        "#include <vector>\n#include <string>\n"
        "namespace readme_block_0 {\nint f() { return 1; }\n}\n"
        "namespace readme_block_1 {\nvoid snippet() {\nint x = 2;\n}\n}\n");
}

TEST_CASE("readme: the marked examples of the README and of every docs/ page compile as written", "[readme]") {
  const std::vector<fs::path> pages = documentation_pages();
  REQUIRE(pages.size() >= 10);  // the README and its guides
  const fs::path dir = fs::current_path() / "readme_blocks";
  fs::create_directories(dir);
  struct Block {
    std::string what;
    std::string file;
    MarkedBlock block;
  };
  std::vector<Block> found;
  std::vector<MarkedBlock> blocks;
  for (const fs::path& page : pages) {
    std::ifstream in(page);
    REQUIRE(in);
    for (const MarkedBlock& b : marked_blocks(in)) {
      std::string what = page.filename().string() + " block at line " + std::to_string(b.line) +
                         (b.snippet ? " (snippet)" : " (program)");
      found.push_back({std::move(what), page.stem().string() + "_" + std::to_string(b.line) + ".cpp", b});
      blocks.push_back(b);
    }
  }
  CHECK(found.size() >= 10);
  // All of them in one compilation (the headers parsed once: a fifth of the time of one each);
  // only when that fails, each on its own, to name the blocks that do not compile.
  // (-Wno-return-type: a program's `int main` is no longer the main function in its namespace)
  if (compile(combined_source(blocks), dir / "all_blocks.cpp", "-Wno-return-type") == 0) return;
  struct Compiled {
    std::string what;
    std::future<int> status;
  };
  std::vector<Compiled> compiled;
  for (const Block& b : found) {
    // the compilations (seconds each) run two at a time; their results are checked in order
    if (compiled.size() >= 2) compiled[compiled.size() - 2].status.wait();
    compiled.push_back({b.what, std::async(std::launch::async, [&dir, &b] { return compile(source_of(b.block), dir / b.file); })});
  }
  bool each_compiles = true;
  for (Compiled& c : compiled) {
    INFO(c.what);
    const int status = c.status.get();
    CHECK(status == 0);
    each_compiles = each_compiles && status == 0;
  }
  INFO("every block compiles on its own, but not all of them in one translation unit (readme_blocks/all_blocks.cpp)");
  CHECK_FALSE(each_compiles);
}

TEST_CASE("readme: every docs/ page is reachable from the README's map", "[readme]") {
  std::ifstream in(GRADUS_README_PATH);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  for (const fs::path& page : documentation_pages()) {
    if (page.filename() == "README.md") continue;
    INFO("docs/" << page.filename().string() << " is not linked from README.md");
    CHECK(readme.find("(docs/" + page.filename().string() + ")") != std::string::npos);
  }
}
