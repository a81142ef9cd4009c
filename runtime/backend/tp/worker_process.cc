// fork + exec of a worker rank with the parent-death signal set, and wait-status wording.
#include "runtime/backend/tp/worker_process.h"

#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ingot {

std::string describeExit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  return "ended (wait status " + std::to_string(status) + ")";
}

StatusOr<pid_t> forkExecWorker(const std::string& executable, const std::vector<std::string>& args) {
  std::string path = executable;
  char resolved[PATH_MAX];
  const ssize_t n = ::readlink(executable.c_str(), resolved, sizeof(resolved) - 1);
  if (n > 0) path.assign(resolved, static_cast<size_t>(n));
  // Everything the child touches is prepared before fork: after it, only async-signal-safe
  // calls (the parent has threads).
  std::vector<std::string> full = {path};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string exec_failed = "ingot: tp worker: exec of " + path + " failed\n";
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return ioError(std::string("tp: fork of a worker failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the owner is already gone
    ::execv(path.c_str(), argv.data());
    ssize_t ignored = ::write(2, exec_failed.data(), exec_failed.size());
    (void)ignored;
    ::_exit(127);
  }
  return pid;
}

}  // namespace ingot
