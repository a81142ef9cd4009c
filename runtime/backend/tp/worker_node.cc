// A worker node: read rank 0's worker spec from the store, start the local ranks, wait for them.
#include "runtime/backend/tp/worker_node.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>

#include "runtime/backend/tp/step_channel.h"
#include "runtime/backend/tp/worker_process.h"
#include "runtime/base/duration_text.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

/// How long the other ranks of a node get to exit on their own after one failed.
constexpr std::chrono::milliseconds kStopGrace{2000};


/// How long the notice of a rank's exit may take to reach rank 0's step listener.
constexpr std::chrono::milliseconds kNoticeDeadline{1000};

/// Tells rank 0 that `rank` of this node ended (`ended`, from describeExit): a hello that
/// carries the error, on a step channel of its own. Rank 0 reads hellos while the group
/// forms and the ranks load; a rank of another node is not its child, so without this it
/// would learn of the exit only at its timeout. Best effort: once rank 0 serves, nobody
/// reads the listener, and the dead rank's closed step channel tells rank 0 instead.
void noticeExit(const WorkerNodeOptions& o, uint16_t step_port, int rank, pid_t pid,
                const std::string& ended) {
  if (step_port == 0) return;
  const auto deadline = std::chrono::steady_clock::now() + kNoticeDeadline;
  StatusOr<std::unique_ptr<StepChannel>> channel =
      connectStepChannel(o.master_addr, step_port, deadline);
  if (!channel.ok()) return;
  WorkerHello notice;
  notice.rank = rank;
  notice.status = failedPrecondition("its process (pid " + std::to_string(pid) + ") " + ended +
                                     "; reported by node " + std::to_string(o.node_rank) +
                                     " (its log has the rank's own error, if any)");
  (void)(*channel)->send(StepCommand::kHello, encodeHello(notice), deadline);
}

int exitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace

std::string workerSpecKey(const std::string& group) { return group + "/worker_spec"; }

std::vector<uint8_t> encodeWorkerSpec(const TpWorkerOptions& o) {
  std::ostringstream out;
  out.precision(17);
  out << "world_size " << o.world_size << "\n"
      << "nnodes " << o.nnodes << "\n"
      << "num_kv_blocks " << o.num_kv_blocks << "\n"
      << "kv_dtype " << (o.kv_dtype.empty() ? "artifact" : o.kv_dtype) << "\n"
      << "timeout_ms " << o.timeout.count() << "\n"
      << "chunk_floats " << o.chunk_floats << "\n"
      << "device " << (o.gpu < 0 ? "cpu" : "cuda") << "\n"
      << "gpu_memory_utilization " << o.gpu_memory_utilization << "\n"
      << "max_model_len " << o.max_model_len << "\n";
  const std::string text = out.str();
  return std::vector<uint8_t>(text.begin(), text.end());
}

Status decodeWorkerSpec(const std::vector<uint8_t>& spec, TpWorkerOptions* o) {
  std::map<std::string, std::string> fields;
  std::istringstream in(std::string(spec.begin(), spec.end()));
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) return dataLoss("worker spec: bad line '" + line + "'");
    fields[line.substr(0, space)] = line.substr(space + 1);
  }
  auto field = [&](const char* key) -> StatusOr<std::string> {
    auto it = fields.find(key);
    if (it == fields.end()) return dataLoss(std::string("worker spec: no '") + key + "'");
    return it->second;
  };
  auto integer = [&](const char* key, int64_t lo, int64_t* value) -> Status {
    INGOT_ASSIGN_OR_RETURN(std::string text, field(key));
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < lo)
      return dataLoss(std::string("worker spec: bad ") + key + " '" + text + "'");
    *value = v;
    return okStatus();
  };
  int64_t world = 0, nnodes = 0, blocks = 0, timeout = 0, chunk = 0, max_len = 0;
  INGOT_RETURN_IF_ERROR(integer("world_size", 1, &world));
  INGOT_RETURN_IF_ERROR(integer("nnodes", 1, &nnodes));
  INGOT_RETURN_IF_ERROR(integer("num_kv_blocks", 0, &blocks));
  INGOT_RETURN_IF_ERROR(integer("timeout_ms", 1, &timeout));
  INGOT_RETURN_IF_ERROR(integer("chunk_floats", 1, &chunk));
  INGOT_RETURN_IF_ERROR(integer("max_model_len", 0, &max_len));
  INGOT_ASSIGN_OR_RETURN(std::string kv, field("kv_dtype"));
  INGOT_ASSIGN_OR_RETURN(std::string device, field("device"));
  INGOT_ASSIGN_OR_RETURN(std::string utilization, field("gpu_memory_utilization"));
  if (device != "cpu" && device != "cuda")
    return dataLoss("worker spec: bad device '" + device + "'");
  o->world_size = static_cast<int32_t>(world);
  o->nnodes = static_cast<int32_t>(nnodes);
  o->num_kv_blocks = blocks;
  o->kv_dtype = kv == "artifact" ? "" : kv;
  o->timeout = std::chrono::milliseconds(timeout);
  o->chunk_floats = chunk;
  o->gpu = device == "cpu" ? -1 : std::max(o->gpu, 0);
  o->gpu_memory_utilization = std::strtod(utilization.c_str(), nullptr);
  o->max_model_len = max_len;
  return okStatus();
}

StatusOr<int> runWorkerNode(const WorkerNodeOptions& o, std::ostream& log) {
  const std::string node = "node " + std::to_string(o.node_rank);
  if (o.nnodes < 2 || o.node_rank < 1 || o.node_rank >= o.nnodes)
    return invalidArgument("worker node: --node-rank must be in [1, " + std::to_string(o.nnodes) +
                           ") with --nnodes " + std::to_string(o.nnodes) + ", got " +
                           std::to_string(o.node_rank));
  if (o.world_size < o.nnodes || o.world_size % o.nnodes != 0)
    return invalidArgument("--nnodes " + std::to_string(o.nnodes) + " does not divide the " +
                           std::to_string(o.world_size) + " tensor-parallel ranks of " +
                           o.artifact + " (every node runs the same number of ranks)");
  if (o.master_addr.empty() || o.master_port == 0)
    return invalidArgument(node + ": --master-addr and --master-port must name node 0's store");
  const int local = o.world_size / o.nnodes;
  const int first = o.node_rank * local;
  const std::string ranks = local == 1 ? "rank " + std::to_string(first) + " runs"
                                        : "ranks " + std::to_string(first) + ".." +
                                              std::to_string(first + local - 1) + " run";
  log << "ingot: " << node << " of " << o.nnodes << ": tensor-parallel " << ranks << " (of "
      << o.world_size << ") here as workers of rank 0 at "
      << o.master_addr << ":" << o.master_port
      << "; no engine and no HTTP server on this node (node 0 serves)\n"
      << std::flush;

  StatusOr<std::unique_ptr<TcpStoreClient>> store =
      TcpStoreClient::connect(o.master_addr, o.master_port, o.timeout);
  if (!store.ok())
    return store.status().withPrefix(node + ": node 0's store did not answer within " +
                                     durationText(o.timeout) + " (is node 0 started, with the same "
                                     "--master-addr and --master-port?)");
  StatusOr<std::vector<uint8_t>> spec = (*store)->get(workerSpecKey(o.group), o.timeout);
  if (!spec.ok()) return spec.status().withPrefix(node + ": reading rank 0's worker spec");
  TpWorkerOptions shared;
  INGOT_RETURN_IF_ERROR(decodeWorkerSpec(*spec, &shared).withPrefix(node));
  if (shared.world_size != o.world_size || shared.nnodes != o.nnodes)
    return invalidArgument(node + ": rank 0 runs " + std::to_string(shared.world_size) +
                           " ranks on " + std::to_string(shared.nnodes) + " nodes, this node " +
                           std::to_string(o.world_size) + " ranks (" + o.artifact + ") on " +
                           std::to_string(o.nnodes) + " (same artifact and --nnodes everywhere)");
  if ((shared.gpu >= 0) != (o.first_gpu >= 0))
    return invalidArgument(node + ": rank 0 runs " + (shared.gpu >= 0 ? "CUDA" : "CPU") +
                           " ranks, this node was given --device " +
                           (o.first_gpu >= 0 ? "cuda" : "cpu") +
                           " (same --device kind everywhere)");
  // Rank 0 published its step listener's port before the spec.
  uint16_t step_port = 0;
  StatusOr<std::vector<uint8_t>> port_text = (*store)->get(o.group + "/step_channel_port", o.timeout);
  if (port_text.ok()) {
    const long port = std::strtol(std::string(port_text->begin(), port_text->end()).c_str(), nullptr, 10);
    if (port > 0 && port <= 65535) step_port = static_cast<uint16_t>(port);
  }
  store->reset();  // the workers connect on their own

  int threads = o.num_threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<pid_t> pids;
  auto stopAll = [&] {
    for (pid_t p : pids) ::kill(p, SIGKILL);
    for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  };
  for (int i = 0; i < local; ++i) {
    TpWorkerOptions w = shared;
    w.artifact = o.artifact;
    w.rank = first + i;
    w.master_addr = o.master_addr;
    w.master_port = o.master_port;
    w.group = o.group;
    w.num_threads = std::max(1, threads / local + (i < threads % local ? 1 : 0));
    w.gpu = o.first_gpu < 0 ? -1 : o.first_gpu + i;
    StatusOr<pid_t> pid = o.launch_worker
                              ? o.launch_worker(w)
                              : forkExecWorker(o.worker_executable, tpWorkerArguments(w));
    if (!pid.ok()) {
      stopAll();
      return pid.status().withPrefix(node + ": tp rank " + std::to_string(w.rank));
    }
    pids.push_back(*pid);
  }

  // Wait for every rank (only these children: the caller may have others); the first
  // failure stops the rest, since the group is broken for good.
  int code = 0;
  size_t running = pids.size();
  std::vector<bool> done(pids.size(), false);
  auto give_up = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    bool reaped = false;
    for (size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (done[i] || ::waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      done[i] = reaped = true;
      --running;
      if (exitCodeOf(status) == 0 || code != 0) continue;
      code = exitCodeOf(status);
      log << "ingot: " << node << ": tp rank " << first + static_cast<int>(i) << " (pid "
          << pids[i] << ") " << describeExit(status)
          << (running > 0 ? "; stopping this node's other ranks" : "") << "\n"
          << std::flush;
      give_up = std::chrono::steady_clock::now() + kStopGrace;
      for (size_t j = 0; j < pids.size(); ++j)
        if (!done[j]) ::kill(pids[j], SIGTERM);
      // After the stop: the notice may take up to kNoticeDeadline (rank 0's host gone).
      noticeExit(o, step_port, first + static_cast<int>(i), pids[i], describeExit(status));
    }
    if (std::chrono::steady_clock::now() >= give_up)
      for (size_t j = 0; j < pids.size(); ++j)
        if (!done[j]) ::kill(pids[j], SIGKILL);
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (code == 0) log << "ingot: " << node << ": every rank ended (rank 0 shut the group down)\n";
  return code;
}

}  // namespace ingot
