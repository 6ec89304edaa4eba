// The threads for the outer loops of kernels: an OpenMP team ([Note: one team of threads]).
//
// parallel_for(n, grain, body) splits [0, n) into chunks of at least `grain` iterations and runs
// body(begin, end) on them, the caller taking chunks too. A loop smaller than two grains runs on
// the caller alone, so small tensors pay nothing. One loop runs on the pool at a time: a call
// made while the pool is busy (another thread's loop, or a loop inside a loop) runs serially on
// its caller, and so does every loop in a forked child (it has none of the pool's threads).
// EMBER_NUM_THREADS sets the pool's size, the caller included (default: the CPUs this process
// may run on); a ThreadCountForCall changes it for one thread's calls.
// Each thread of a loop runs with the caller's floating-point control (flush-to-zero and
// denormals-are-zero, which torch.set_flush_denormal sets on the calling thread only), so a
// result does not depend on which thread computed it.
#pragma once

#include <cstdint>
#include <functional>

namespace ember {

using LoopBody = std::function<void(int64_t begin, int64_t end)>;

void parallel_for(int64_t n, int64_t grain, const LoopBody& body);

// The threads a loop may use, the caller included.
int num_threads();

// While alive, the loops that this thread starts (and the OpenMP regions of OpenMPThreads) use
// `n` threads, unless EMBER_NUM_THREADS is set: what the user chose for ember wins. The PyTorch
// bridge holds one around each call with torch.get_num_threads(), which may change between
// calls, so that torch.set_num_threads(1) holds for compiled code as it does for eager.
// Caps the threads of the loops this thread starts at `n` (0: no cap), and returns the cap it
// replaces: a plan step that runs best on fewer threads (runtime/step_settings.h).
int set_thread_limit(int n);

class ThreadCountForCall {
 public:
  explicit ThreadCountForCall(int n);
  ~ThreadCountForCall();
  ThreadCountForCall(const ThreadCountForCall&) = delete;
  ThreadCountForCall& operator=(const ThreadCountForCall&) = delete;

 private:
  int previous_;
};

// While alive, the OpenMP regions that this thread starts itself (oneDNN's, outside ember's
// loops) use num_threads() threads, so that EMBER_NUM_THREADS holds for them; then the thread's
// own setting comes back. (In a Python process, PyTorch's libgomp is the one ember and oneDNN
// use, and torch.set_num_threads is that same setting.) Inside a loop it does nothing: regions
// nested there run on one thread.
class OpenMPThreads {
 public:
  OpenMPThreads();
  ~OpenMPThreads();
  OpenMPThreads(const OpenMPThreads&) = delete;
  OpenMPThreads& operator=(const OpenMPThreads&) = delete;

 private:
  int restore_ = 0;  // the setting to put back, 0 for none
};

}  // namespace ember
