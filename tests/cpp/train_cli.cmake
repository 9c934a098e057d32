# `normkit train` end to end: a short run writes one CSV row per step with
# the documented columns and exits 0; --save writes a checkpoint and
# --sample prints text; a run over its divergence bound exits 3 with a
# message that names the step; a bad configuration names the argument.
#   cmake -DNORMKIT=<path to normkit> -DWORK_DIR=<dir> -P train_cli.cmake
file(MAKE_DIRECTORY ${WORK_DIR})
set(csv ${WORK_DIR}/train.csv)
execute_process(COMMAND ${NORMKIT} train --steps 4 --width 16 --context 16 --eval-every 2 --csv ${csv}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "normkit train exited ${rc}: ${out}${err}")
endif()
if(NOT out MATCHES "4 steps in [0-9:]+: training loss [0-9.]+ -> [0-9.]+, validation loss [0-9.]+")
  message(FATAL_ERROR "unexpected summary: ${out}")
endif()
file(STRINGS ${csv} rows)
list(LENGTH rows n)
if(NOT n EQUAL 5)
  message(FATAL_ERROR "expected a header and 4 rows in ${csv}, got ${n} lines")
endif()
list(GET rows 0 header)
set(expected "step,lr,loss,val_loss,grad_norm,grad_norm_block0,grad_norm_block1,update_ratio,rms_in_block0.attn.norm,rms_in_block0.mlp.norm,rms_in_block1.attn.norm,rms_in_block1.mlp.norm,rms_in_final_norm")
if(NOT header STREQUAL expected)
  message(FATAL_ERROR "CSV header\n  ${header}\nexpected\n  ${expected}")
endif()
list(GET rows 1 first)
list(GET rows 2 second)
if(NOT first MATCHES "^0,[^,]+,[^,]+,,")
  message(FATAL_ERROR "step 0 should have no validation loss: ${first}")
endif()
if(NOT second MATCHES "^1,[^,]+,[^,]+,[0-9.]+,")
  message(FATAL_ERROR "step 1 should have a validation loss: ${second}")
endif()

execute_process(COMMAND ${NORMKIT} train --steps 4 --width 16 --context 16 --max-loss 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 3 OR NOT err MATCHES "diverged at step 0: training loss [0-9.]+ is above the bound 1")
  message(FATAL_ERROR "divergence: exit ${rc}, stderr: ${err}")
endif()

execute_process(COMMAND ${NORMKIT} train --steps 2 --width 16 --context 16 --save ${WORK_DIR}/model.bin
                        --sample 12
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(SIZE ${WORK_DIR}/model.bin size)
if(NOT rc EQUAL 0 OR NOT out MATCHES "checkpoint: .*model.bin\nsample \\(temperature 0.8; '\\|' marks where it starts\\):\n[^|]*\\|"
   OR size LESS 1000)
  message(FATAL_ERROR "--save/--sample: exit ${rc}, checkpoint ${size} bytes, stdout: ${out}${err}")
endif()

execute_process(COMMAND ${NORMKIT} train --heads 3 --width 16
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "heads = 3 does not divide width = 16")
  message(FATAL_ERROR "bad config: exit ${rc}, stderr: ${err}")
endif()
