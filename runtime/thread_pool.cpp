#include "runtime/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/config.h"

namespace ember {

namespace {

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
  return std::max(1u, std::thread::hardware_concurrency());
}

// One loop at a time: its body, its chunks and how many of them are still running.
class Pool {
 public:
  explicit Pool(int threads) {
    pthread_atfork(nullptr, nullptr, [] { forked_child = true; });
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }

  // A forked child has the pool's memory but none of its threads: it runs loops serially.
  bool usable() const { return !forked_child; }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs the loop on the pool, or returns false when the pool is busy.
  bool try_run(int64_t n, int64_t chunk, const LoopBody& body) {
    if (in_loop_) return false;  // a loop inside a loop (busy_ may be this thread's)
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      body_ = &body;
      n_ = n;
      chunk_ = chunk;
      next_.store(0);
      pending_ = workers_.size();
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    in_loop_ = true;
    run_chunks();
    in_loop_ = false;
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return pending_ == 0; });
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void run_chunks() {
    for (int64_t begin; (begin = next_.fetch_add(chunk_)) < n_;) {
      try {
        (*body_)(begin, std::min(n_, begin + chunk_));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      in_loop_ = true;
      run_chunks();
      in_loop_ = false;
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  static inline std::atomic<bool> forked_child{false};
  std::vector<std::thread> workers_;
  std::mutex busy_;  // held by the thread whose loop is on the pool
  std::mutex mu_;
  std::condition_variable wake_, done_;
  bool stopping_ = false;
  uint64_t generation_ = 0;
  const LoopBody* body_ = nullptr;
  int64_t n_ = 0, chunk_ = 1;
  std::atomic<int64_t> next_{0};
  size_t pending_ = 0;
  std::exception_ptr error_;
  static thread_local bool in_loop_;
};

thread_local bool Pool::in_loop_ = false;

Pool& pool() {
  static Pool p(configured_threads());
  return p;
}

}  // namespace

int num_threads() { return pool().usable() ? pool().size() : 1; }

void parallel_for(int64_t n, int64_t grain, const LoopBody& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = num_threads();
  if (threads == 1 || n < 2 * grain) return body(0, n);
  // A few chunks per thread balance uneven work without many claims.
  int64_t chunk = std::max(grain, (n + 4 * threads - 1) / (4 * threads));
  if (!pool().usable() || !pool().try_run(n, chunk, body)) body(0, n);
}

}  // namespace ember
