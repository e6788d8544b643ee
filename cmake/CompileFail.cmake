# Compile-fail check, run as:
#   cmake -DCXX=<compiler> -DSOURCE=<file.cpp> -DINCLUDE_DIRS=<dir|dir|...> -P CompileFail.cmake
#
# Succeeds only if SOURCE does NOT compile (-std=c++20 -fsyntax-only -fopenmp -DGRADUS_COMPILED: the
# headers as a program that links libgradus sees them, the default for CMake users; the checked
# diagnostics come from templates, the same header-only, and the check takes a quarter of the time:
# 5 s instead of 19 s for fit_loss_old_order), and
#  - the diagnostics contain the text of every line "// expect: <text>" in SOURCE
#    (at least one is required, so a file that fails for an unrelated reason does not pass);
#  - the diagnostics are at most N lines, N from a line "// max-lines: N" (default 40).
# Diagnostics are produced in the C locale (ASCII quotes) without colours.

foreach(var CXX SOURCE INCLUDE_DIRS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CompileFail.cmake: ${var} is not set")
  endif()
endforeach()

include(${CMAKE_CURRENT_LIST_DIR}/SourceDirectives.cmake)
gradus_read_masked(content "${SOURCE}")
gradus_directives(expects "${content}" expect)
if(expects STREQUAL "")
  message(FATAL_ERROR "${SOURCE}: no '// expect: <text>' line; say which diagnostic the misuse must produce")
endif()

set(max_lines 40)
if(content MATCHES "//[ \t]*max-lines:[ \t]*([0-9]+)")
  set(max_lines ${CMAKE_MATCH_1})
endif()

gradus_compiler_flags(include_flags "${INCLUDE_DIRS}")
set(command "${CXX}" -std=c++20 -fsyntax-only -fopenmp -DGRADUS_COMPILED -fdiagnostics-color=never
  ${include_flags} "${SOURCE}")
execute_process(COMMAND ${command}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)
list(JOIN command " " command_line)

if(rc EQUAL 0)
  message("command: ${command_line}\n${out}")
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()

string(REGEX REPLACE "[^\n]" "" newlines "${out}")
string(LENGTH "${newlines}" n_lines)
if(NOT out MATCHES "\n$" AND NOT out STREQUAL "")
  math(EXPR n_lines "${n_lines} + 1")
endif()

set(problems "")
foreach(text IN LISTS expects)
  gradus_unmask(text)
  string(FIND "${out}" "${text}" pos)
  if(pos EQUAL -1)
    string(APPEND problems "  missing expected text: ${text}\n")
  endif()
endforeach()
if(n_lines GREATER max_lines)
  string(APPEND problems "  ${n_lines} lines of diagnostics, at most ${max_lines} allowed\n")
endif()

if(NOT problems STREQUAL "")
  # Plain message() prints the diagnostics verbatim; FATAL_ERROR would re-wrap them.
  message("command: ${command_line}\n--- diagnostics (${n_lines} lines) ---\n${out}--- end of diagnostics ---\n"
    "${SOURCE} failed to compile, but:\n${problems}")
  message(FATAL_ERROR "compile-fail check failed for ${SOURCE}")
endif()
message(STATUS "${SOURCE}: rejected as expected (${n_lines} lines of diagnostics, limit ${max_lines})")
