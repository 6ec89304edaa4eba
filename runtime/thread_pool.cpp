#include "runtime/thread_pool.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

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

int configured_threads() {
  std::string v = config::get("EMBER_NUM_THREADS");
  if (!v.empty()) {
    try {
      int n = std::stoi(v);
      if (n >= 1) return n;
    } catch (const std::exception&) {
    }
    config::warn("EMBER_NUM_THREADS=" + v + " is not a positive integer; using the default");
  }
  cpu_set_t cpus;  // the CPUs this process may run on (a container or taskset may allow fewer)
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) return std::max(1, CPU_COUNT(&cpus));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::atomic<bool> forked_child{false};

struct Team {
  Team() : threads(configured_threads()) {
    // libgomp's threads do not exist in a forked child, and a region there could wait for them
    // forever: the child runs loops serially, and oneDNN's regions on one thread.
    pthread_atfork(nullptr, nullptr, [] {
      forked_child = true;
      omp_set_num_threads(1);
    });
  }
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
#pragma omp parallel num_threads(threads)
  {
    // Chunks claimed in turn: uneven work balances without a schedule per loop.
    for (int64_t begin; (begin = next.fetch_add(chunk)) < n;) {
      try {
        body(begin, std::min(n, begin + chunk));
      } catch (...) {  // an exception must not leave the region
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
  return true;
}

}  // namespace

int num_threads() { return forked_child ? 1 : team().threads; }

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
  int64_t chunk = std::max(grain, (n + 4 * threads - 1) / (4 * threads));
  if (!try_run(n, chunk, threads, body)) body(0, n);
}

}  // namespace ember
