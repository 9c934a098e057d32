// normkit — how many threads the CPU kernels may use.
//
// Kernels split rows among threads; no row's reduction ever crosses threads,
// and parameter gradients are summed over a fixed partition of rows, so every
// result is bitwise identical for any thread count.
#pragma once

namespace normkit {

// Maximum number of threads the CPU kernels use. n <= 0 restores the default
// (the OpenMP default: OMP_NUM_THREADS or the number of cores). The setting is
// process-wide and safe to change between calls from any thread.
void set_num_threads(int n) noexcept;

// The current maximum (>= 1). In a child process forked after the kernels
// have run threaded, always 1: GNU OpenMP cannot start threads there (its
// next parallel region would wait forever), so such a child (a data-loader
// worker, say) runs every kernel on its calling thread.
int num_threads() noexcept;

}  // namespace normkit
