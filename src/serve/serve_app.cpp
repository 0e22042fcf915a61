#include "serve/serve_app.h"

#include "core/error.h"
#include "core/timer.h"
#include "infer/broadcast_text.h"
#include "infer/inference_model.h"
#include "serve/http_front.h"

namespace megaton::serve {

using json = nlohmann::json;

namespace {

json row_json(const RowSpec& r) {
  return {{"prompt", r.prompt},
          {"max_new", r.max_new},
          {"temperature", r.temperature},
          {"top_p", r.top_p},
          {"top_k", r.top_k},
          {"seed", r.seed},
          {"logprobs", r.logprobs},
          {"top_logprobs", r.top_logprobs},
          {"stop_at_eos", r.stop_at_eos},
          {"stop", r.stop}};
}

RowSpec row_spec(const json& j) {
  RowSpec r;
  r.prompt = j.at("prompt").get<std::vector<int32_t>>();
  r.max_new = j.at("max_new").get<int64_t>();
  r.temperature = j.at("temperature").get<double>();
  r.top_p = j.at("top_p").get<double>();
  r.top_k = j.at("top_k").get<int64_t>();
  r.seed = j.at("seed").get<uint64_t>();
  r.logprobs = j.at("logprobs").get<bool>();
  r.top_logprobs = j.at("top_logprobs").get<int64_t>();
  r.stop_at_eos = j.at("stop_at_eos").get<bool>();
  r.stop = j.at("stop").get<std::vector<std::string>>();
  return r;
}

}  // namespace

int run_serve_app(const ServeOptions& o, const dist::LaunchEnv& env, BlockedStopSignals& signals) {
  Logger log(env.rank, env.size, parse_log_level(o.model.log_level));
  auto m = build_inference_model(o.model, env, log);
  infer::StageRunner runner(*m->stage, m->groups);
  data::Tokenizer& tok = *m->tokenizer;
  dist::Communicator& world = *m->groups.world;
  const bool front_rank = world.rank() == 0;
  const int64_t seq = o.model.model.seq_length;

  JobQueue queue;
  std::unique_ptr<HttpFront> front;
  if (front_rank) {
    front = std::make_unique<HttpFront>(o, queue, tok, tok, log);
    const int port = front->start();
    log.info0("serving '", o.served_model_name, "' on http://", o.host, ":", port,
              " (POST /v1/completions, GET /v1/models, PUT /api); --max-batch-size ", o.max_batch_size, " rows");
  }
  // However the loop ends (a stop, or an error on its way to ending the job), the queued requests are answered (503)
  // before the front stops, since stopping waits for its handlers and they wait for their jobs.
  struct FrontShutdown {
    JobQueue& queue;
    std::unique_ptr<HttpFront>& front;
    ~FrontShutdown() {
      queue.close();
      if (front) front->stop();
    }
  } shutdown{queue, front};
  int64_t batches = 0, rows_done = 0, tokens_out = 0;
  Timer busy;
  for (;;) {
    std::string message;
    std::vector<std::shared_ptr<Job>> jobs;
    if (front_rank) {
      if (signals.received()) {
        message = R"({"op":"stop"})";
      } else {
        jobs =
            queue.take(o.max_batch_size, std::chrono::milliseconds(1000), std::chrono::milliseconds(o.batch_window_ms));
        json batch = {{"op", jobs.empty() ? "idle" : "batch"}, {"rows", json::array()}};
        for (const auto& j : jobs)
          for (const auto& r : j->rows) batch["rows"].push_back(row_json(r));
        message = batch.dump();
      }
    }
    const json cmd = json::parse(infer::broadcast_string(world, message, runner.device()));
    const std::string op = cmd.at("op").get<std::string>();
    if (op == "stop") break;
    if (op == "idle") continue;
    std::vector<RowSpec> rows;
    for (const auto& r : cmd.at("rows")) rows.push_back(row_spec(r));

    // Each job's rows: [offset[k], offset[k] + jobs[k]->rows.size()).
    std::vector<size_t> offset;
    size_t at = 0;
    for (const auto& j : jobs) offset.push_back(std::exchange(at, at + j->rows.size()));
    BatchStepCallback on_step;
    if (front_rank) {
      on_step = [&](const std::vector<RowResult>& res, const std::vector<bool>& done) {
        for (size_t k = 0; k < jobs.size(); ++k) {
          std::vector<const RowResult*> mine;
          std::vector<bool> mine_done;
          for (size_t i = 0; i < jobs[k]->rows.size(); ++i) {
            mine.push_back(&res[offset[k] + i]);
            mine_done.push_back(done[offset[k] + i]);
          }
          jobs[k]->on_step(mine, mine_done);
        }
      };
    }
    busy.start();
    std::vector<RowResult> results;
    try {
      results = decode_batch(runner, tok, rows, seq, on_step);
    } catch (const std::exception& e) {
      for (auto& j : jobs) j->fail(500, std::string("decoding failed: ") + e.what());
      throw;
    }
    busy.stop();
    ++batches;
    rows_done += static_cast<int64_t>(rows.size());
    for (const auto& r : results) tokens_out += r.generated();
    for (size_t k = 0; k < jobs.size(); ++k)
      jobs[k]->finish(
          std::vector<RowResult>(results.begin() + offset[k], results.begin() + offset[k] + jobs[k]->rows.size()));
    log.debug("batch ", batches, ": ", rows.size(), " rows");
  }
  queue.close();
  if (front) front->stop();
  log.info0("megaton serve stopped: ", batches, " batches, ", rows_done, " rows, ", tokens_out, " tokens generated in ",
            busy.elapsed(), " s of decoding");
  return 0;
}

}  // namespace megaton::serve
