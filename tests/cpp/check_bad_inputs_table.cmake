# Fails unless docs/reliability.md contains, verbatim, the table that the
# bad_inputs program prints (and that program succeeded: every bad input
# raised normkit::Error without writing an output).
execute_process(COMMAND "${PROGRAM}" OUTPUT_VARIABLE table RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bad_inputs failed (exit ${rc})")
endif()
file(READ "${DOC}" doc)
string(FIND "${doc}" "${table}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${DOC} does not contain the output of bad_inputs verbatim; paste it in:\n${table}")
endif()
