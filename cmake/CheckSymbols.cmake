# What-a-program-compiles check, run as:
#   cmake -DCXX=<compiler> -DNM=<nm> -DSOURCE=<file.cpp> -DINCLUDE_DIRS=<dir|dir|...> -DOBJECT=<file.o>
#         -P CheckSymbols.cmake
#
# Compiles SOURCE header-only (-std=c++20 -O0 -fopenmp: at -O0 every function the program reaches
# is emitted, none inlined away) and lists the object's symbols (nm -C). Succeeds only if
#  - no symbol contains the text of a line "// absent: <text>" in SOURCE, and
#  - some symbol contains the text of every line "// present: <text>" (at least one is required,
#    so that a file whose code compiled to nothing does not pass).
# It guards the code that a program compiles only where it makes the value that leads to it
# (docs/architecture.md): a change that reaches such code from everywhere again fails here.

foreach(var CXX NM SOURCE INCLUDE_DIRS OBJECT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CheckSymbols.cmake: ${var} is not set")
  endif()
endforeach()

include(${CMAKE_CURRENT_LIST_DIR}/SourceDirectives.cmake)
gradus_read_masked(content "${SOURCE}")
gradus_directives(absent "${content}" absent)
gradus_directives(present "${content}" present)
if(present STREQUAL "")
  message(FATAL_ERROR "${SOURCE}: no '// present: <text>' line; name a symbol the program must compile")
endif()

gradus_compiler_flags(include_flags "${INCLUDE_DIRS}")
set(command "${CXX}" -std=c++20 -O0 -fopenmp -fdiagnostics-color=never ${include_flags} -c "${SOURCE}"
  -o "${OBJECT}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
list(JOIN command " " command_line)
if(NOT rc EQUAL 0)
  message("command: ${command_line}\n${out}")
  message(FATAL_ERROR "${SOURCE} did not compile")
endif()
execute_process(COMMAND "${NM}" -C "${OBJECT}" RESULT_VARIABLE rc OUTPUT_VARIABLE symbols ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -C ${OBJECT} failed: ${err}")
endif()
gradus_mask(symbols)  # searched for the masked texts

set(problems "")
foreach(text IN LISTS absent)
  string(FIND "${symbols}" "${text}" pos)
  if(NOT pos EQUAL -1)
    # the whole line of the first symbol that holds it
    string(SUBSTRING "${symbols}" ${pos} -1 rest)
    string(REGEX MATCH "^[^\n]*" line "${rest}")
    string(APPEND problems "  compiled, but must not be: ${text} (in: ${line})\n")
  endif()
endforeach()
foreach(text IN LISTS present)
  string(FIND "${symbols}" "${text}" pos)
  if(pos EQUAL -1)
    string(APPEND problems "  not compiled, but must be: ${text}\n")
  endif()
endforeach()
if(NOT problems STREQUAL "")
  gradus_unmask(problems)
  message("command: ${command_line}\n${SOURCE}:\n${problems}")
  message(FATAL_ERROR "symbol check failed for ${SOURCE}")
endif()
list(LENGTH absent n_absent)
list(LENGTH present n_present)
message(STATUS "${SOURCE}: ${n_absent} absent and ${n_present} present as expected")
