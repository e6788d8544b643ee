# Install test, run as:
#   cmake -DBUILD_DIR=<gradus build> -DSOURCE_DIR=<consumer source> -DWORK_DIR=<scratch>
#         -DGENERATOR=<generator> -DCXX=<compiler> -P InstallConsumer.cmake
# Installs gradus from BUILD_DIR into WORK_DIR/prefix, then configures, builds and runs
# the consumer project against that prefix with find_package(gradus CONFIG REQUIRED).

foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "InstallConsumer.cmake: ${var} is not set")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(binary ${WORK_DIR}/build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: ${what} failed (${rc})")
  endif()
endfunction()

run_step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
run_step("configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${binary} -G ${GENERATOR}
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_CXX_COMPILER=${CXX}
  -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run_step("build" ${CMAKE_COMMAND} --build ${binary})
run_step("run" ${binary}/consumer)
