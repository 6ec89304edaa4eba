#include "runtime/thread_pool.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "ir/symbolic.h"
#include "runtime/config.h"

namespace ember {

namespace {

// [Note: one team of threads]
// Loops run on an OpenMP team: the one oneDNN's primitives run on (the system's libgomp). After
// a region, libgomp's threads spin for a while before they sleep, waiting for the next one; a
// pool of ember's own beside them found those CPUs taken, and on two cores the kernel or the
// attention that followed a oneDNN GEMM ran at half speed (a transformer block: 64 ms, and 55 ms
// with libgomp's spinning turned off). On one team, the spinning threads are the ones that run
// the next loop. OpenBLAS runs single-threaded inside these loops for the same reason. In a
// Python process PyTorch has loaded its own libgomp.so.1 first, and oneDNN and ember bind to it:
// PyTorch's eager ops, oneDNN and ember's loops then share one team.

// EMBER_NUM_THREADS, when it is set to a positive integer.
int threads_from_environment() {
  std::string v = config::get("EMBER_NUM_THREADS");
  if (v.empty()) return 0;
  try {
    int n = std::stoi(v);
    if (n >= 1) return n;
  } catch (const std::exception&) {
  }
  config::warn("EMBER_NUM_THREADS=" + v + " is not a positive integer; using the default");
  return 0;
}

int configured_threads(int from_environment) {
  if (from_environment) return from_environment;
  cpu_set_t cpus;  // the CPUs this process may run on (a container or taskset may allow fewer)
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) return std::max(1, CPU_COUNT(&cpus));
  return std::max(1u, std::thread::hardware_concurrency());
}

thread_local int threads_for_call = 0;  // ThreadCountForCall's, 0 when none
thread_local int thread_limit = 0;      // set_thread_limit's, 0 when none

// The caller's floating-point control and status register (x86's MXCSR), for the team.
unsigned floating_point_control() {
#if defined(__x86_64__) || defined(__i386__)
  return _mm_getcsr();
#else
  return 0;
#endif
}
void set_floating_point_control(unsigned control) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(control);
#else
  (void)control;
#endif
}

std::atomic<bool> forked_child{false};

struct Team {
  Team() : from_environment(threads_from_environment()), threads(configured_threads(from_environment)) {
    // libgomp's threads do not exist in a forked child, and a region there could wait for them
    // forever: the child runs loops serially, and oneDNN's regions on one thread.
    pthread_atfork(nullptr, nullptr, [] {
      forked_child = true;
      omp_set_num_threads(1);
    });
  }
  const int from_environment;  // EMBER_NUM_THREADS, or 0
  const int threads;
  std::mutex busy;  // held by the thread whose loop is on the team
};

Team& team() {
  static Team t;
  return t;
}

// Runs the loop on the team, or returns false when it is busy: a loop inside a loop, or another
// thread's loop (which would start a second team and oversubscribe the cores).
bool try_run(int64_t n, int64_t chunk, int threads, const LoopBody& body) {
  if (omp_in_parallel()) return false;
  std::unique_lock<std::mutex> busy(team().busy, std::try_to_lock);
  if (!busy.owns_lock()) return false;
  std::atomic<int64_t> next{0};
  std::mutex error_mu;
  std::exception_ptr error;
  const unsigned control = floating_point_control();
#pragma omp parallel num_threads(threads)
  {
    const unsigned own = floating_point_control();
    set_floating_point_control(control);
    // Chunks claimed in turn: uneven work balances without a schedule per loop.
    for (int64_t begin; (begin = next.fetch_add(chunk)) < n;) {
      try {
        body(begin, std::min(n, begin + chunk));
      } catch (...) {  // an exception must not leave the region
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
    set_floating_point_control(own);
  }
  if (error) std::rethrow_exception(error);
  return true;
}

}  // namespace

int num_threads() {
  if (forked_child) return 1;
  const Team& t = team();
  int n = threads_for_call > 0 && !t.from_environment ? threads_for_call : t.threads;
  return thread_limit > 0 ? std::min(n, thread_limit) : n;
}

int set_thread_limit(int n) {
  int previous = thread_limit;
  thread_limit = std::max(n, 0);
  return previous;
}

ThreadCountForCall::ThreadCountForCall(int n) : previous_(threads_for_call) { threads_for_call = std::max(n, 1); }
ThreadCountForCall::~ThreadCountForCall() { threads_for_call = previous_; }

OpenMPThreads::OpenMPThreads() {
  if (omp_in_parallel() || omp_get_max_threads() == num_threads()) return;
  restore_ = omp_get_max_threads();
  omp_set_num_threads(num_threads());
}

OpenMPThreads::~OpenMPThreads() {
  if (restore_) omp_set_num_threads(restore_);
}

void parallel_for(int64_t n, int64_t grain, const LoopBody& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = num_threads();
  if (threads == 1 || n < 2 * grain) return body(0, n);
  // A few chunks per thread balance uneven work without many claims.
  int64_t chunk = std::max(grain, ceil_div(n, 4 * int64_t{threads}));
  if (!try_run(n, chunk, threads, body)) body(0, n);
}

}  // namespace ember
