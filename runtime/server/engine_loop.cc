// EngineLoop: the one thread that steps the Engine and hands each request its outputs.
#include "runtime/server/engine_loop.h"

#include <map>

namespace ingot::server {

EngineLoop::EngineLoop(Engine& engine, ServerMetrics& metrics) : engine_(engine), metrics_(metrics) {}

EngineLoop::~EngineLoop() { stopAfterDrain(); }

void EngineLoop::start() { thread_ = std::thread([this] { run(); }); }

StatusOr<RequestId> EngineLoop::submit(std::vector<int32_t> prompt, const SamplingParams& params,
                                       int32_t n, std::shared_ptr<OutputSink> sink) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_) return internalError("the engine has failed");
  if (stopping_) return internalError("the server is shutting down");
  // Registered under the same lock dispatch() takes, so no output can miss its sink.
  StatusOr<RequestId> id = engine_.addRequest(std::move(prompt), params, /*priority=*/0, n);
  if (!id.ok()) return id;
  auto tracked = std::make_shared<Tracked>();
  tracked->sink = std::move(sink);
  tracked->first = *id;
  tracked->n = n;
  tracked->unfinished = n;
  tracked->arrival = Clock::now();
  tracked->last_token.resize(n);
  for (int32_t i = 0; i < n; ++i) by_id_[*id + i] = tracked;
  wake_ = true;
  cv_.notify_one();
  return id;
}

void EngineLoop::cancel(RequestId first, int32_t n) {
  for (int32_t i = 0; i < n; ++i) engine_.cancel(first + i);
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = true;
  cv_.notify_one();
}

void EngineLoop::stopAfterDrain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

bool EngineLoop::healthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !failed_;
}

void EngineLoop::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || wake_ || (!failed_ && engine_.hasWork()); });
      wake_ = false;
      if (failed_ || !engine_.hasWork()) {
        if (stopping_) return;
        continue;
      }
    }
    StatusOr<std::vector<RequestOutput>> outputs = engine_.step();
    if (!outputs.ok()) {
      failAll(outputs.status().message());
      continue;
    }
    metrics_.observeBatchSize(engine_.metrics().last_batch_size);
    dispatch(std::move(outputs).value());
  }
}

void EngineLoop::dispatch(std::vector<RequestOutput> outputs) {
  Clock::time_point now = Clock::now();
  std::map<Tracked*, std::pair<std::shared_ptr<Tracked>, std::vector<RequestOutput>>> groups;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (RequestOutput& out : outputs) {
      auto it = by_id_.find(out.id);
      if (it == by_id_.end()) continue;
      std::shared_ptr<Tracked> t = it->second;
      int32_t choice = static_cast<int32_t>(out.id - t->first);
      if (!out.token_ids.empty()) {
        if (!t->first_token_seen) {
          t->first_token_seen = true;
          metrics_.observeTimeToFirstToken(std::chrono::duration<double>(now - t->arrival).count());
        } else if (t->last_token[choice] != Clock::time_point()) {
          metrics_.observeInterTokenLatency(
              std::chrono::duration<double>(now - t->last_token[choice]).count());
        }
        t->last_token[choice] = now;
      }
      if (out.finished()) {
        by_id_.erase(it);
        metrics_.countRequest(out.cancelled ? "abort" : finishReasonName(out.finish_reason));
        if (--t->unfinished == 0)
          metrics_.observeEndToEndLatency(std::chrono::duration<double>(now - t->arrival).count());
      }
      auto& group = groups[t.get()];
      group.first = t;
      group.second.push_back(std::move(out));
    }
  }
  for (auto& [key, group] : groups) group.first->sink->onOutputs(std::move(group.second));
}

void EngineLoop::failAll(const std::string& message) {
  std::unordered_map<RequestId, std::shared_ptr<Tracked>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = true;
    all.swap(by_id_);
  }
  std::map<Tracked*, std::shared_ptr<Tracked>> unique;
  for (auto& [id, t] : all) unique[t.get()] = t;
  for (auto& [key, t] : unique) t->sink->onEngineError(message);
}

}  // namespace ingot::server
