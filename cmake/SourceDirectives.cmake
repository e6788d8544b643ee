# Directives written as comments in a test's source, for the -P scripts that check it
# (CompileFail.cmake, CheckSymbols.cmake):
#   include(${CMAKE_CURRENT_LIST_DIR}/SourceDirectives.cmake)
#   gradus_read_masked(content "${SOURCE}")               # the file, ';' '[' ']' masked
#   gradus_directives(expects "${content}" expect)        # texts of the "// expect: <text>" lines
#   gradus_mask(out)  /  gradus_unmask(text)              # the same masking, either way
#   gradus_compiler_flags(flags "${INCLUDE_DIRS}")        # -I<dir>... from "dir|dir|..."; C locale
# CMake lists split at ';' and treat '[' ']' specially, so text that may hold them is kept masked
# (as the bytes 1, 2 and 3) while it is handled as a list, and unmasked to be printed or searched.

string(ASCII 1 GRADUS_SEMI)
string(ASCII 2 GRADUS_LBR)
string(ASCII 3 GRADUS_RBR)

macro(gradus_mask var)
  string(REPLACE ";" "${GRADUS_SEMI}" ${var} "${${var}}")
  string(REPLACE "[" "${GRADUS_LBR}" ${var} "${${var}}")
  string(REPLACE "]" "${GRADUS_RBR}" ${var} "${${var}}")
endmacro()

macro(gradus_unmask var)
  string(REPLACE "${GRADUS_SEMI}" ";" ${var} "${${var}}")
  string(REPLACE "${GRADUS_LBR}" "[" ${var} "${${var}}")
  string(REPLACE "${GRADUS_RBR}" "]" ${var} "${${var}}")
endmacro()

function(gradus_read_masked out file)
  file(READ "${file}" content)
  gradus_mask(content)
  set(${out} "${content}" PARENT_SCOPE)
endfunction()

# The texts (stripped, masked, empty ones left out) of the lines "// <keyword>: <text>".
function(gradus_directives out content keyword)
  string(REGEX MATCHALL "//[ \t]*${keyword}:[^\n]*" lines "${content}")
  set(texts "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^//[ \t]*${keyword}:" "" text "${line}")
    string(STRIP "${text}" text)
    if(NOT text STREQUAL "")
      list(APPEND texts "${text}")
    endif()
  endforeach()
  set(${out} "${texts}" PARENT_SCOPE)
endfunction()

# The -I flags of INCLUDE_DIRS ("dir|dir|...", '|' since ';' would split the -D argument), and the
# C locale for the compiler's messages (ASCII quotes).
function(gradus_compiler_flags out include_dirs)
  set(flags "")
  string(REPLACE "|" ";" dirs "${include_dirs}")
  foreach(dir IN LISTS dirs)
    list(APPEND flags "-I${dir}")
  endforeach()
  set(ENV{LC_ALL} C)
  set(ENV{LANG} C)
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()
