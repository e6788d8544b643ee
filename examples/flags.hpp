// examples/flags.hpp — the command-line flags of the examples: `--name value` pairs.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <string>

/// The integer after `name` on the command line, or `fallback` when it is absent.
inline int64_t flag(int argc, char** argv, const std::string& name, int64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return std::atoll(argv[i + 1]);
  return fallback;
}

/// The word after `name` on the command line, or `fallback` when it is absent.
inline std::string flag(int argc, char** argv, const std::string& name, std::string fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return argv[i + 1];
  return fallback;
}
