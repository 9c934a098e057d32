# Installs the already-built normkit into a scratch prefix, then configures,
# builds and runs tests/consumer against it with find_package — the way a
# project outside this tree uses normkit.
set(prefix "${WORK_DIR}/prefix")
set(consumer "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${consumer}" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${consumer}")
run("${consumer}/consumer")
