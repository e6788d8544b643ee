# Runs the README's first example twice in one fresh folder, as a user who follows the README does:
#   cmake -DPROGRAM=<readme_first_model> -DWORK_DIR=<scratch> -P RunTwice.cmake
# The first run trains 2 epochs, checkpoints into runs/first and saves net.safetensors. The second
# must resume from that checkpoint (lazy layers included), find the 2 epochs done, and save the very
# same net.safetensors: model, optimizer state and step restored bit for bit.
foreach(var PROGRAM WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "RunTwice.cmake: ${var} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

foreach(run first second)
  execute_process(COMMAND ${PROGRAM} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readme.first_model: the ${run} run failed (${rc}):\n${out}${err}")
  endif()
  if(NOT EXISTS ${WORK_DIR}/net.safetensors OR NOT EXISTS ${WORK_DIR}/runs/first/checkpoint)
    message(FATAL_ERROR "readme.first_model: the ${run} run wrote no net.safetensors or runs/first/checkpoint")
  endif()
  file(SHA256 ${WORK_DIR}/net.safetensors saved_${run})
  file(GLOB checkpoints_${run} RELATIVE ${WORK_DIR}/runs/first ${WORK_DIR}/runs/first/*.safetensors)
  message(STATUS "${run} run: net.safetensors ${saved_${run}}; checkpoints ${checkpoints_${run}}")
endforeach()
if(NOT saved_first STREQUAL saved_second)
  message(FATAL_ERROR "readme.first_model: the second run saved another model than the first: it did not resume "
                      "the finished run")
endif()
if(NOT checkpoints_first STREQUAL checkpoints_second)
  message(FATAL_ERROR "readme.first_model: the second run changed the checkpoints (${checkpoints_first} -> "
                      "${checkpoints_second})")
endif()
