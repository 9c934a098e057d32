# Keeps `normkit bench` from rotting: runs it in --smoke mode with --json and
# checks the output is a JSON list of records with the required fields, that
# every op of the bench's table was timed through normkit for every dtype,
# and that the byte counts of three ops are exact. No timing is
# asserted (benchmarks are not tests), only that times and rates are positive.
#
# Usage: cmake -DNORMKIT=<path to the normkit binary> -P bench_smoke.cmake

cmake_minimum_required(VERSION 3.25)
if(NOT NORMKIT)
  message(FATAL_ERROR "pass -DNORMKIT=<path to normkit>")
endif()

execute_process(COMMAND "${NORMKIT}" bench --smoke --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "normkit bench --smoke --json exited with ${rc}:\n${log}")
endif()

string(JSON type ERROR_VARIABLE err TYPE "${json}")
if(err OR NOT type STREQUAL "ARRAY")
  message(FATAL_ERROR "output is not a JSON list (${err}):\n${json}")
endif()
string(JSON n LENGTH "${json}")
if(n EQUAL 0)
  message(FATAL_ERROR "no records")
endif()

set(string_fields impl simd op dtype)
set(number_fields rows D threads median_ms gbps ceiling_gbps pct_of_ceiling bytes_read bytes_written clock_ghz
                  clock_ghz_after)
# The bench writes one record per line; parsing each line alone is linear,
# where string(JSON GET) on the whole list for each record is quadratic.
string(REGEX MATCHALL "\n  {[^\n]*}" lines "${json}")
list(LENGTH lines nlines)
if(NOT nlines EQUAL n)
  message(FATAL_ERROR "expected one record per line: ${n} records, ${nlines} lines")
endif()
set(seen "")
set(i 0)
foreach(line IN LISTS lines)
  string(STRIP "${line}" rec)
  math(EXPR i "${i} + 1")
  foreach(f IN LISTS string_fields)
    string(JSON t ERROR_VARIABLE err TYPE "${rec}" ${f})
    if(err OR NOT t STREQUAL "STRING")
      message(FATAL_ERROR "record ${i}: field '${f}' missing or not a string: ${rec}")
    endif()
  endforeach()
  foreach(f IN LISTS number_fields)
    string(JSON t ERROR_VARIABLE err TYPE "${rec}" ${f})
    if(err OR NOT t STREQUAL "NUMBER")
      message(FATAL_ERROR "record ${i}: field '${f}' missing or not a number: ${rec}")
    endif()
    string(JSON ${f} GET "${rec}" ${f})
  endforeach()
  string(JSON impl GET "${rec}" impl)
  string(JSON op GET "${rec}" op)
  string(JSON dtype GET "${rec}" dtype)
  string(JSON simd GET "${rec}" simd)
  if(simd STREQUAL "")
    message(FATAL_ERROR "record ${i}: no SIMD target: ${rec}")
  endif()

  # Times and rates must be positive (if(GREATER) compares them as numbers).
  foreach(f median_ms gbps ceiling_gbps pct_of_ceiling)
    if(NOT ${f} GREATER 0)
      message(FATAL_ERROR "record ${i}: ${f} = ${${f}} is not positive: ${rec}")
    endif()
  endforeach()

  # The core clock from a chain of dependent adds (x86-64 and AArch64, where
  # this suite runs): a real core's, not a chain folded away or not run.
  foreach(f clock_ghz clock_ghz_after)
    if(${f} LESS 0.2 OR ${f} GREATER 10)
      message(FATAL_ERROR "record ${i}: ${f} = ${${f}} is not a core's clock: ${rec}")
    endif()
  endforeach()

  if(impl STREQUAL "normkit")
    list(APPEND seen "${op}/${dtype}")
    # Exact byte counts for three ops: each array read or written once.
    if(dtype STREQUAL "f32")
      set(size 4)
    else()
      set(size 2)
    endif()
    set(want_read "")
    if(op STREQUAL "layer_norm")
      # x and y (rows·D each), weight and bias (D each, same dtype), mean and rstd (rows f32 each).
      math(EXPR want_read "${rows} * ${D} * ${size} + 2 * ${D} * ${size}")
      math(EXPR want_written "${rows} * ${D} * ${size} + 2 * ${rows} * 4")
    elseif(op STREQUAL "layer_norm_backward_dx")
      # Reads dy and x (rows·D each), weight (D), mean and rstd (rows f32
      # each); writes dx (rows·D) alone: no parameter gradients.
      math(EXPR want_read "2 * ${rows} * ${D} * ${size} + ${D} * ${size} + 2 * ${rows} * 4")
      math(EXPR want_written "${rows} * ${D} * ${size}")
    elseif(op STREQUAL "add_rms_norm_backward")
      # Reads dy, h and dh_out (rows·D each), weight (D), rstd (rows f32);
      # writes dh (rows·D) and dweight (D).
      math(EXPR want_read "3 * ${rows} * ${D} * ${size} + ${D} * ${size} + ${rows} * 4")
      math(EXPR want_written "${rows} * ${D} * ${size} + ${D} * ${size}")
    endif()
    if(NOT want_read STREQUAL "" AND (NOT bytes_read EQUAL want_read OR NOT bytes_written EQUAL want_written))
      message(FATAL_ERROR "record ${i}: ${op} ${dtype} ${rows}x${D} moves "
                          "${bytes_read}+${bytes_written} bytes, expected "
                          "${want_read}+${want_written}: ${rec}")
    endif()
  endif()
endforeach()

foreach(op layer_norm rms_norm layer_norm_backward rms_norm_backward layer_norm_backward_dx rms_norm_backward_dx
           add_layer_norm add_rms_norm add_then_layer_norm add_then_rms_norm add_layer_norm_backward
           add_rms_norm_backward layer_norm_backward_then_add rms_norm_backward_then_add)
  foreach(dtype f32 bf16 f16)
    if(NOT "${op}/${dtype}" IN_LIST seen)
      message(FATAL_ERROR "no normkit record for ${op} ${dtype}")
    endif()
  endforeach()
endforeach()
message(STATUS "normkit bench --smoke --json: ${n} records, all fields present")

# --f32-params: 16-bit activations with f32 parameters. Every normkit record
# says so, and the naive baseline (one dtype for everything) is left out
# rather than timed with other parameters than normkit's.
execute_process(COMMAND "${NORMKIT}" bench --smoke --json --f32-params --dtypes bf16 --impls normkit,naive
                RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "normkit bench --smoke --json --f32-params exited with ${rc}:\n${log}")
endif()
string(REGEX MATCHALL "\n  {[^\n]*}" lines "${json}")
list(LENGTH lines n)
if(n EQUAL 0)
  message(FATAL_ERROR "--f32-params: no records")
endif()
foreach(line IN LISTS lines)
  string(STRIP "${line}" rec)
  string(JSON impl GET "${rec}" impl)
  string(JSON param GET "${rec}" param_dtype)
  if(impl STREQUAL "naive")
    message(FATAL_ERROR "--f32-params: a naive record: ${rec}")
  endif()
  if(impl STREQUAL "normkit" AND NOT param STREQUAL "f32")
    message(FATAL_ERROR "--f32-params: a normkit record with ${param} parameters: ${rec}")
  endif()
endforeach()
message(STATUS "normkit bench --smoke --json --f32-params: ${n} records, f32 parameters")
