# examples/check_projector.cmake — runs an example, then checks the projector export it wrote
# (gd::summary::write_projector): <LOGDIR>/projector_config.pbtxt names <NAME> with N rows,
# <LOGDIR>/<NAME>/tensors.tsv has N lines, <LOGDIR>/<NAME>/metadata.tsv has the header
# <HEADER> (columns separated by ',' here, by tabs in the file) and N lines after it, one of
# them starting with <LABEL> then a tab. N is the vocabulary size the example prints
# ("vocabulary N"). Fails (non-zero exit) when the example fails or any check does not hold.
#   cmake -DEXE=build/examples/char_lstm "-DARGS=--logdir;runs/x" -DLOGDIR=runs/x -DNAME=chars
#         -DHEADER=char,count "-DLABEL=<space>" -P examples/check_projector.cmake
foreach(v EXE LOGDIR NAME HEADER LABEL)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_projector: -D${v}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${LOGDIR}")
execute_process(COMMAND "${EXE}" ${ARGS} ECHO_OUTPUT_VARIABLE OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_projector: ${EXE} exited with ${rc}")
endif()
if(NOT out MATCHES "vocabulary ([0-9]+)")
  message(FATAL_ERROR "check_projector: ${EXE} printed no \"vocabulary N\"")
endif()
set(n ${CMAKE_MATCH_1})

# The number of lines of a file (each ends with a newline).
function(count_lines path result)
  if(NOT EXISTS "${path}")
    message(FATAL_ERROR "check_projector: ${path} was not written")
  endif()
  file(READ "${path}" text)
  string(REGEX MATCHALL "\n" newlines "${text}")
  list(LENGTH newlines count)
  set(${result} ${count} PARENT_SCOPE)
endfunction()

count_lines("${LOGDIR}/${NAME}/tensors.tsv" tensor_lines)
count_lines("${LOGDIR}/${NAME}/metadata.tsv" metadata_lines)
math(EXPR expected_metadata "${n} + 1")  # the header
if(NOT tensor_lines EQUAL n OR NOT metadata_lines EQUAL expected_metadata)
  message(FATAL_ERROR "check_projector: expected ${n} vectors and ${expected_metadata} metadata lines (header "
                      "included), got ${tensor_lines} and ${metadata_lines}")
endif()

file(READ "${LOGDIR}/${NAME}/metadata.tsv" metadata)
string(REPLACE "," "\t" header_line "${HEADER}")
string(FIND "${metadata}" "${header_line}\n" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "check_projector: metadata.tsv does not start with the header '${HEADER}' (tab-separated)")
endif()
string(FIND "${metadata}" "\n${LABEL}\t" at)
if(at EQUAL -1)
  message(FATAL_ERROR "check_projector: metadata.tsv has no row labelled '${LABEL}'")
endif()

count_lines("${LOGDIR}/projector_config.pbtxt" config_lines)
file(READ "${LOGDIR}/projector_config.pbtxt" config)
string(FIND "${config}" "tensor_name: \"${NAME}\"" at_name)
string(FIND "${config}" "tensor_shape: ${n}\n" at_shape)
if(at_name EQUAL -1 OR at_shape EQUAL -1)
  message(FATAL_ERROR "check_projector: projector_config.pbtxt does not list '${NAME}' with ${n} rows:\n${config}")
endif()
message(STATUS "check_projector: ${LOGDIR}: '${NAME}' with ${n} rows, metadata and config as expected")
