# Fails unless README.md contains readme_example.cc verbatim.
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)
string(FIND "${readme}" "${example}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not contain ${EXAMPLE} verbatim; update one of them")
endif()
