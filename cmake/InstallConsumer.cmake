# Install test, run as:
#   cmake -DPROJECT_DIR=<gradus source> -DSOURCE_DIR=<consumer source> -DWORK_DIR=<scratch>
#         -DGENERATOR=<generator> -DCXX=<compiler> -DWITH_XTENSOR=<ON|OFF> -P InstallConsumer.cmake
# Installs gradus with the very commands of the README's install block (the ```sh block after the
# line "<!-- install -->"), their build folder and prefix moved into WORK_DIR, then configures,
# builds and runs the consumer project against that prefix with find_package(gradus CONFIG REQUIRED):
#   1. with xtensor hidden (CMAKE_DISABLE_FIND_PACKAGE_xtensor): gradus is found all the same;
#   2. when gradus was built with xtensor interop: with COMPONENTS xtensor, using gradus::xtensor;
#      and with the component required but xtensor hidden, configuring fails and says why;
#   3. configured without a build type, the package config warns and compiles the consumer at -O2.

# Optional: -DLIBRARY_FLAGS=<flags> replaces the Release flags of the library's build, and
# -DLAUNCHER=<program> gives it a compiler launcher. tests/ passes either -O0 (what this test checks
# is the install and the package, not the library's speed, and an -O3 libgradus costs four minutes
# of CPU more) or, where ccache is installed, its own build's flags and a ccache launcher, so that
# the library's compiles are read back from its cache; the test says how many were.
foreach(var PROJECT_DIR SOURCE_DIR WORK_DIR GENERATOR CXX WITH_XTENSOR)
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

# A build of the consumer: it must succeed and the compiler must not warn. The consumer compiles
# gradus' headers with a first project's flags (CMake's Release: -O3, and a precompiled umbrella),
# where GCC inlines differently than in gradus' own builds; a warning there is every user's.
function(build_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: ${what} failed (${rc})")
  endif()
  if(out MATCHES ":[0-9]+:[0-9]+: warning: ")  # a compiler's (file:line:column), not make's
    message(FATAL_ERROR "install_consumer: ${what}: the compiler warned (above) on gradus' headers")
  endif()
endfunction()

# configure(<binary dir> <extra cache arguments>...) with the common arguments.
set(configure_args -S ${SOURCE_DIR} -G ${GENERATOR}
  -DCMAKE_CXX_COMPILER=${CXX}
  -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)

# The README's install commands, one shell line each, run from the project's folder.
file(READ ${PROJECT_DIR}/README.md readme)
string(FIND "${readme}" "\n<!-- install -->\n```sh\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "install_consumer: README.md has no \"<!-- install -->\" line followed by a ```sh block")
endif()
math(EXPR at "${at} + 24")
string(SUBSTRING "${readme}" ${at} -1 readme)
string(FIND "${readme}" "\n```\n" end)
string(SUBSTRING "${readme}" 0 ${end} commands)
string(REPLACE "build-install" "${WORK_DIR}/build-install" commands "${commands}")
string(REPLACE "/opt/gradus" "${prefix}" commands "${commands}")
if(LIBRARY_FLAGS)
  string(REGEX REPLACE "(cmake -S [^\n]*)" "\\1 \"-DCMAKE_CXX_FLAGS_RELEASE=${LIBRARY_FLAGS}\"" commands "${commands}")
endif()
if(LAUNCHER)
  string(REGEX REPLACE "(cmake -S [^\n]*)" "\\1 \"-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}\"" commands "${commands}")
  # ccache's count of compiles read back from its cache (direct and preprocessed hits)
  function(cache_hits out)
    execute_process(COMMAND ${LAUNCHER} --print-stats OUTPUT_VARIABLE stats RESULT_VARIABLE rc)
    set(hits 0)
    if(rc EQUAL 0)
      string(REGEX MATCHALL "(direct|preprocessed)_cache_hit\t[0-9]+" lines "${stats}")
      foreach(line IN LISTS lines)
        string(REGEX REPLACE ".*\t" "" n "${line}")
        math(EXPR hits "${hits} + ${n}")
      endforeach()
    endif()
    set(${out} ${hits} PARENT_SCOPE)
  endfunction()
  cache_hits(hits_before)
endif()
string(REPLACE "\n" ";" commands "${commands}")
list(LENGTH commands count)
if(count LESS 3)
  message(FATAL_ERROR "install_consumer: the README's install block should configure, build and install; got: ${commands}")
endif()
foreach(command IN LISTS commands)
  message(STATUS "install_consumer: ${command}")
  run_step("README install command '${command}'" sh -c "${command}" WORKING_DIRECTORY ${PROJECT_DIR})
endforeach()
if(LAUNCHER)
  cache_hits(hits_after)
  math(EXPR reused "${hits_after} - ${hits_before}")
  message(STATUS "install_consumer: ${reused} of the library's compiles were read back from the cache of "
                 "the build that runs this test (ccache); none means its flags differ from the README build's")
endif()
if(NOT EXISTS ${prefix}/include/gradus/gradus.hpp)
  message(FATAL_ERROR "install_consumer: the README's install commands put no gradus/gradus.hpp under ${prefix}/include")
endif()
# the GPU library's device code, which NVRTC reads from the installed include directory
if(NOT EXISTS ${prefix}/include/gradus/backend/cuda/library/common.cuh)
  message(FATAL_ERROR "install_consumer: the install put no gradus/backend/cuda/library/*.cuh under ${prefix}/include")
endif()

set(binary ${WORK_DIR}/build)
run_step("configure without xtensor" ${CMAKE_COMMAND} ${configure_args} -B ${binary}
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_xtensor=ON)
build_step("build" ${CMAKE_COMMAND} --build ${binary} --parallel 2)
run_step("run" ${binary}/consumer)
run_step("run header-only with the precompiled umbrella (gradus::pch)" ${binary}/consumer_pch)

# No build type: configuring succeeds and the package config says what it costs.
execute_process(COMMAND ${CMAKE_COMMAND} ${configure_args} -B ${WORK_DIR}/build-no-type
    -DCMAKE_DISABLE_FIND_PACKAGE_xtensor=ON
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(expected "gradus: CMAKE_BUILD_TYPE is not set")
string(FIND "${out}${err}" "${expected}" at)
if(NOT rc EQUAL 0 OR at EQUAL -1)
  message(FATAL_ERROR "install_consumer: configuring without a build type should succeed and warn "
                      "\"${expected}\"; got (${rc}):\n${out}${err}")
endif()
# ... and compiles the targets that link gradus::gradus at -O2 all the same (from gradus::header_only).
set(flags_file ${WORK_DIR}/build-no-type/CMakeFiles/consumer.dir/flags.make)
if(NOT EXISTS ${flags_file})
  set(flags_file ${WORK_DIR}/build-no-type/build.ninja)
endif()
file(READ ${flags_file} flags)
if(NOT flags MATCHES "-O2")
  message(FATAL_ERROR "install_consumer: without a build type, the consumer's compile flags should "
                      "contain -O2 from gradus::header_only; ${flags_file} has:\n${flags}")
endif()

if(WITH_XTENSOR)
  set(binary ${WORK_DIR}/build-xtensor)
  run_step("configure with COMPONENTS xtensor" ${CMAKE_COMMAND} ${configure_args} -B ${binary}
    -DCMAKE_BUILD_TYPE=Release -DGRADUS_CONSUMER_XTENSOR=ON)
  build_step("build with xtensor" ${CMAKE_COMMAND} --build ${binary} --target consumer_xtensor)
  run_step("run with xtensor" ${binary}/consumer_xtensor)

  execute_process(COMMAND ${CMAKE_COMMAND} ${configure_args} -B ${WORK_DIR}/build-missing
      -DCMAKE_BUILD_TYPE=Release -DGRADUS_CONSUMER_XTENSOR=ON -DCMAKE_DISABLE_FIND_PACKAGE_xtensor=ON
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(expected "gradus: component xtensor: xtensor (libxtensor-dev) was not found")
  string(FIND "${out}${err}" "${expected}" at)
  if(rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "install_consumer: requiring the xtensor component with xtensor hidden should fail "
                        "with \"${expected}\"; got (${rc}):\n${out}${err}")
  endif()
endif()
