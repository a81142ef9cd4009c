// A tensor-parallel worker rank: join the group, load the shard, run rank 0's commands.
#include "runtime/backend/tp/tp_worker.h"

#include <memory>
#include <optional>
#include <string>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/kv_dtype.h"
#include "runtime/backend/tp/channel_watch.h"
#include "runtime/backend/tp/rank_backend.h"
#include "runtime/backend/tp/step_channel.h"
#include "runtime/dist/tcp_socket.h"
#include "runtime/dist/tcp_store.h"

namespace ingot {
namespace {

using Clock = StepChannel::Clock;

/// The rank's options from the worker's.
StatusOr<RankOptions> rankOptions(const TpWorkerOptions& o) {
  RankOptions r;
  r.rank = o.rank;
  r.world_size = o.world_size;
  r.group = o.group;
  r.timeout = o.timeout;
  r.gpu = o.gpu;
  r.cpu.num_threads = o.num_threads;
  r.cpu.num_kv_blocks = o.num_kv_blocks;
  StatusOr<std::optional<KvDtype>> kv = parseKvDtypeFlag(o.kv_dtype);
  if (!kv.ok()) return kv.status();
  r.cpu.kv_dtype = *kv;
  r.chunk_floats = o.chunk_floats;
  r.nnodes = o.nnodes;
  r.gpu_memory_utilization = o.gpu_memory_utilization;
  r.max_model_len = o.max_model_len;
  r.wrap_communicator = o.wrap_communicator;
  return r;
}

/// Executes one command from rank 0 and returns what to answer.
Status execute(StepCommand command, const std::vector<uint8_t>& payload, int rank,
               RankBackend& self, std::vector<float>& logits) {
  Backend& backend = self.backend();
  switch (command) {
    case StepCommand::kStep: {
      ReceivedStep step;
      INGOT_RETURN_IF_ERROR(decodeStep(payload, &step));
      Status st = backend.step(step.inputs, &logits);
      // As TpCpuBackend: an input rejected before anything ran is rejected alike on every
      // rank and leaves the group usable; a failure after that leaves the others inside a
      // collective this rank will not join, so it must break the group.
      if (!st.ok() && self.stepStarted())
        self.communicator().abort(st.withPrefix("tp rank " + std::to_string(rank)));
      return st;
    }
    case StepCommand::kCopyKvBlocks: {
      int64_t src = 0, dst = 0;
      INGOT_RETURN_IF_ERROR(decodeKvBlockCopy(payload, &src, &dst));
      return backend.copyKvBlocks(src, dst);
    }
    case StepCommand::kCopyKvSlots: {
      std::vector<std::pair<int32_t, int32_t>> moves;
      INGOT_RETURN_IF_ERROR(decodeKvSlotMoves(payload, &moves));
      return backend.copyKvSlots(moves);
    }
    default:
      return dataLoss("tp rank " + std::to_string(rank) + ": unexpected command " +
                      std::to_string(static_cast<uint32_t>(command)) + " from rank 0");
  }
}

}  // namespace

std::vector<std::string> tpWorkerArguments(const TpWorkerOptions& o) {
  return {"tp-worker",
          "--artifact", o.artifact,
          "--rank", std::to_string(o.rank),
          "--world", std::to_string(o.world_size),
          "--master", o.master_addr + ":" + std::to_string(o.master_port),
          "--group", o.group,
          "--threads", std::to_string(o.num_threads),
          "--kv-blocks", std::to_string(o.num_kv_blocks),
          "--kv-dtype", o.kv_dtype.empty() ? "artifact" : o.kv_dtype,
          "--timeout-ms", std::to_string(o.timeout.count()),
          "--chunk-floats", std::to_string(o.chunk_floats),
          "--nnodes", std::to_string(o.nnodes),
          "--device", o.gpu < 0 ? std::string("cpu") : "cuda:" + std::to_string(o.gpu),
          "--gpu-memory-utilization", std::to_string(o.gpu_memory_utilization),
          "--max-model-len", std::to_string(o.max_model_len)};
}

Status runTpWorker(const TpWorkerOptions& o) {
  const std::string who = "tp rank " + std::to_string(o.rank);
  if (o.rank < 1 || o.rank >= o.world_size)
    return invalidArgument("tp-worker: --rank must be in [1, " + std::to_string(o.world_size) +
                           "), got " + std::to_string(o.rank) + " (rank 0 is the server)");
  if (o.nnodes < 1 || o.world_size % o.nnodes != 0)
    return invalidArgument("tp-worker: --nnodes " + std::to_string(o.nnodes) +
                           " does not divide the world of " + std::to_string(o.world_size) +
                           " ranks");
  StatusOr<std::unique_ptr<TcpStoreClient>> store =
      TcpStoreClient::connect(o.master_addr, o.master_port, o.timeout);
  if (!store.ok()) return store.status().withPrefix(who);
  StatusOr<RankOptions> options = rankOptions(o);
  if (!options.ok()) return options.status().withPrefix(who);
  StatusOr<std::unique_ptr<RankBackend>> self = RankBackend::join(**store, *options);
  if (!self.ok()) return self.status().withPrefix(who);

  // The backend's error, if any, goes to rank 0 in the hello (rank 0 reports it).
  StatusOr<Artifact> artifact = Artifact::open(o.artifact);
  Status loaded = artifact.ok() ? (*self)->load(*artifact) : artifact.status();
  WorkerHello hello;
  hello.rank = o.rank;
  if (artifact.ok()) hello.artifact_id = artifact->header().manifest_xxh64;
  if (loaded.ok()) {
    const Backend& backend = (*self)->backend();
    hello.num_kv_blocks = backend.numKvBlocks();
    hello.vocab_size = backend.vocabSize();
    hello.matrix_bytes = backend.matrixBytes();
    hello.num_threads = backend.numThreads();
  } else {
    hello.status = o.gpu < 0 ? loaded : loaded.withPrefix((*self)->deviceName());
  }

  StatusOr<std::vector<uint8_t>> port_text =
      (*store)->get(o.group + "/step_channel_port", o.timeout);
  if (!port_text.ok()) return port_text.status().withPrefix(who);
  const int port = std::atoi(std::string(port_text->begin(), port_text->end()).c_str());
  if (port <= 0 || port > 65535)
    return dataLoss(who + ": bad step channel port in the store");
  StatusOr<std::unique_ptr<StepChannel>> channel = connectStepChannel(
      o.master_addr, static_cast<uint16_t>(port), Clock::now() + o.timeout);
  if (!channel.ok()) return channel.status().withPrefix(who);
  // The channel idles between requests; a rank 0 host that vanishes without closing it
  // (another node's) ends this worker about a timeout (--dist-timeout) after it went
  // quiet instead of never.
  const tcp_socket::KeepAliveTimes keep_alive = tcp_socket::keepAliveWithin(o.timeout);
  INGOT_RETURN_IF_ERROR(tcp_socket::enableKeepAlive((*channel)->fd(), keep_alive.idle_s,
                                                    keep_alive.interval_s, keep_alive.count)
                            .withPrefix(who + ": step channel"));
  INGOT_RETURN_IF_ERROR((*channel)->send(StepCommand::kHello, encodeHello(hello),
                                         Clock::now() + o.timeout));
  if (!loaded.ok()) return hello.status.withPrefix(who);

  std::vector<float> logits;
  std::vector<uint8_t> payload;
  const bool watchRank0 = o.watch_rank0.value_or(o.gpu >= 0);
  // One watch thread for every command (a thread per command would cost more than a
  // decode step's host work).
  std::unique_ptr<ChannelWatcher> watcher;
  if (watchRank0) watcher = std::make_unique<ChannelWatcher>();
  for (;;) {
    StepCommand command{};
    Status got = (*channel)->receive(&command, &payload, Clock::time_point::max());
    if (!got.ok())
      return failedPrecondition(who + ": rank 0 went away (" + got.message() + ")");
    if (command == StepCommand::kShutdown) return okStatus();
    Status result;
    if (watchRank0) {
      // Rank 0 sends nothing while this rank runs a command, so its channel closing then
      // means rank 0 died: abort this rank's group at once (NCCL would otherwise keep this
      // rank inside a collective until the timeout).
      ChannelWatch watch(*watcher, {(*channel)->fd()}, POLLRDHUP, [&](size_t, short) {
        (*self)->communicator().abort(failedPrecondition(
            who + ": rank 0's step channel closed during a step (rank 0 exited?)"));
        return false;
      });
      result = execute(command, payload, o.rank, **self, logits);
    } else {
      result = execute(command, payload, o.rank, **self, logits);
    }
    // A failure that broke the group says so: rank 0 aborts its own communicator on it.
    const StepCommand answer = (*self)->communicator().groupStatus().ok()
                                   ? StepCommand::kResult
                                   : StepCommand::kGroupBroken;
    INGOT_RETURN_IF_ERROR((*channel)->send(answer, encodeStatus(result), Clock::now() + o.timeout));
  }
}

}  // namespace ingot
