// Isolation: each program runs in a child process (unless EMBER_FUZZ_FORK=0), so that a crash
// (an out-of-bounds read in a kernel, say) is reported, minimised and counted like any other
// failure instead of ending the test. Without a child, a crash handler at least names the seed.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/fuzz_capture.h"

namespace ember::capture_fuzz {
namespace {

const std::string kCrashed = "crashed: ";
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

bool fork_enabled() {
  static const bool on = env_str("EMBER_FUZZ_FORK") != "0";
  return on;
}

// The child's side: runs `fn`, writes what it returned to `fd` and exits without running the
// parent's exit handlers.
[[noreturn]] void run_child(const std::function<std::string(int progress)>& fn, int fd) {
  for (int sig : kCrashSignals) std::signal(sig, SIG_DFL);  // die quietly
  if (env_str("EMBER_FUZZ_VERBOSE") != "1") {
    // ember's warnings (the recompile limit, ...) would drown the reports: the parent reports.
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
  }
  std::string out;
  try {
    out = fn(fd);
  } catch (const std::exception& e) {
    out = std::string("exception: ") + e.what();
  }
  write_all(fd, out);
  _exit(0);
}

std::string read_all(int fd) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// "" when the child exited normally, else kCrashed and how it ended.
std::string how_it_ended(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return "\n" + kCrashed + strsignal(WTERMSIG(status));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "\n" + kCrashed + "exit status " + std::to_string(WEXITSTATUS(status));
  return "";
}

}  // namespace

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string isolated(const std::function<std::string(int progress)>& fn) {
  if (!fork_enabled()) return fn(-1);
  std::cout.flush();  // or the child would print what the parent buffered, again
  std::cerr.flush();
  std::fflush(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return fn(-1);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return fn(-1);
  }
  if (pid == 0) {
    close(fds[0]);
    run_child(fn, fds[1]);
  }
  close(fds[1]);
  std::string out = read_all(fds[0]);
  close(fds[0]);
  return out + how_it_ended(pid);
}

bool crashed(const std::string& out) { return out.find(kCrashed) != std::string::npos; }
std::string crash_category(const std::string& out) { return out.substr(out.find(kCrashed)); }

std::string category_of(const Case& cs, std::optional<bool> dynamic) {
  std::string out = isolated([&](int) {
    auto f = check(cs, dynamic);
    return f ? f->mismatch.category : std::string();
  });
  return crashed(out) ? crash_category(out) : out;
}

std::string report_of(const Case& cs, std::optional<bool> dynamic, const std::string& category,
                      bool values) {
  std::string out = isolated([&](int) {
    auto f = check(cs, dynamic);
    return f ? case_str(cs, *f, values) : std::string();
  });
  if (!crashed(out) && !out.empty()) return out;
  Failure f{cs.seed, dynamic, cs.calls.size() - 1, {category, "the process died: run it in gdb"}, "-", "-"};
  return case_str(cs, f, values);
}

// ---------------------------------------------------------------------------------------------
// Naming the seed on a crash in this process (EMBER_FUZZ_FORK=0, or the parent itself).

namespace {

volatile std::sig_atomic_t g_running = 0;
char g_crash_message[160];
struct sigaction g_previous[32];

void on_crash(int sig) {
  if (g_running) {
    ssize_t ignored = write(2, g_crash_message, std::strlen(g_crash_message));
    (void)ignored;
  }
  sigaction(sig, &g_previous[sig], nullptr);
  raise(sig);
}

}  // namespace

void set_running(uint64_t seed, const char* phase) {
  std::snprintf(g_crash_message, sizeof g_crash_message,
                "\ncapture fuzz: crashed on seed %llu (%s); rerun with EMBER_FUZZ_SEED=%llu\n",
                static_cast<unsigned long long>(seed), phase, static_cast<unsigned long long>(seed));
  g_running = 1;
}

CrashReporter::CrashReporter() {
  struct sigaction sa {};
  sa.sa_handler = on_crash;
  sigemptyset(&sa.sa_mask);
  for (int sig : kCrashSignals) sigaction(sig, &sa, &g_previous[sig]);
}

CrashReporter::~CrashReporter() {
  g_running = 0;
  for (int sig : kCrashSignals) sigaction(sig, &g_previous[sig], nullptr);
}

}  // namespace ember::capture_fuzz
