// Subcommands of the normkit CLI. Each takes the arguments after its name
// and returns the process exit status.
#pragma once

namespace normkit::cli {

int lab_main(int argc, char** argv);    // lab.cc: verify the normalization contracts
int bench_main(int argc, char** argv);  // bench.cc: kernels against the bandwidth ceiling
int train_main(int argc, char** argv);  // train.cc: train the model of model/ on a text
int profile_main(int argc, char** argv);  // profile.cc: where a model step's time goes
int study_main(int argc, char** argv);  // study.cc: the texts' claims about placement, measured

}  // namespace normkit::cli
