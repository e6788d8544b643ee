# Install test, run as:
#   cmake -DBUILD_DIR=<gradus build> -DSOURCE_DIR=<consumer source> -DWORK_DIR=<scratch>
#         -DGENERATOR=<generator> -DCXX=<compiler> -DWITH_XTENSOR=<ON|OFF> -P InstallConsumer.cmake
# Installs gradus from BUILD_DIR into WORK_DIR/prefix, then configures, builds and runs the
# consumer project against that prefix with find_package(gradus CONFIG REQUIRED):
#   1. with xtensor hidden (CMAKE_DISABLE_FIND_PACKAGE_xtensor): gradus is found all the same;
#   2. when gradus was built with xtensor interop: with COMPONENTS xtensor, using gradus::xtensor;
#      and with the component required but xtensor hidden, configuring fails and says why.

foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX WITH_XTENSOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "InstallConsumer.cmake: ${var} is not set")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: ${what} failed (${rc})")
  endif()
endfunction()

# configure(<binary dir> <extra cache arguments>...) with the common arguments.
set(configure_args -S ${SOURCE_DIR} -G ${GENERATOR}
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_CXX_COMPILER=${CXX}
  -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)

run_step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

set(binary ${WORK_DIR}/build)
run_step("configure without xtensor" ${CMAKE_COMMAND} ${configure_args} -B ${binary}
  -DCMAKE_DISABLE_FIND_PACKAGE_xtensor=ON)
run_step("build" ${CMAKE_COMMAND} --build ${binary})
run_step("run" ${binary}/consumer)
run_step("run with the precompiled umbrella (gradus::pch)" ${binary}/consumer_pch)

if(WITH_XTENSOR)
  set(binary ${WORK_DIR}/build-xtensor)
  run_step("configure with COMPONENTS xtensor" ${CMAKE_COMMAND} ${configure_args} -B ${binary}
    -DGRADUS_CONSUMER_XTENSOR=ON)
  run_step("build with xtensor" ${CMAKE_COMMAND} --build ${binary} --target consumer_xtensor)
  run_step("run with xtensor" ${binary}/consumer_xtensor)

  execute_process(COMMAND ${CMAKE_COMMAND} ${configure_args} -B ${WORK_DIR}/build-missing
      -DGRADUS_CONSUMER_XTENSOR=ON -DCMAKE_DISABLE_FIND_PACKAGE_xtensor=ON
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(expected "gradus: component xtensor: xtensor (libxtensor-dev) was not found")
  string(FIND "${out}${err}" "${expected}" at)
  if(rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "install_consumer: requiring the xtensor component with xtensor hidden should fail "
                        "with \"${expected}\"; got (${rc}):\n${out}${err}")
  endif()
endif()
