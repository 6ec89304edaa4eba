# Installs ember into a scratch prefix, then configures, builds and runs docs/example with it.
set(work ${BINARY_DIR}/consumer-test)
file(REMOVE_RECURSE ${work})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${work}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/docs/example -B ${work}/build -G Ninja
                        -DCMAKE_PREFIX_PATH=${work}/prefix
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the example failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${work}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the example failed: ${rc}")
endif()
execute_process(COMMAND ${work}/build/example RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "${out}")
if(rc OR NOT out MATCHES "matches eager")
  message(FATAL_ERROR "the example failed (${rc}): ${out}")
endif()
