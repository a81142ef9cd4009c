// Starting `ingot tp-worker` processes and describing how they ended (rank 0 and worker nodes).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/base/status.h"

namespace ingot {

/// fork + exec of `executable` (a /proc/self/exe link is resolved first) with `args`; the
/// child gets SIGKILL when the thread that started it exits (PR_SET_PDEATHSIG), so a worker
/// never outlives the process that owns it.
StatusOr<pid_t> forkExecWorker(const std::string& executable, const std::vector<std::string>& args);

/// "exited with status 2", "was killed by signal 9 (Killed)", from a waitpid status.
std::string describeExit(int wait_status);

}  // namespace ingot
