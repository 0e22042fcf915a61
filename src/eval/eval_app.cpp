#include "eval/eval_app.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/timer.h"
#include "eval/detokenizer.h"
#include "eval/evaluator.h"
#include "eval/lm_windows.h"
#include "infer/stage_runner.h"

namespace megaton::eval {

void EvalOptions::validate(int world) {
  model.validate(world, "eval");
  MEGATON_CHECK(task == "WIKITEXT103" || task == "LAMBADA", UsageError, "--task must be WIKITEXT103 or LAMBADA",
                task.empty() ? std::string(" (missing)") : ", got " + task);
  MEGATON_CHECK(valid_data.size() == 1, UsageError, "--valid-data takes exactly one file for --task ", task, ", got ",
                valid_data.size());
  MEGATON_CHECK(task != "WIKITEXT103" || overlapping_eval > 0, UsageError, "--overlapping-eval must be > 0, got ",
                overlapping_eval);
  if (overlapping_eval > model.model.seq_length) overlapping_eval = model.model.seq_length;
}

int run_eval_app(const EvalOptions& f, const dist::LaunchEnv& env, std::ostream& out) {
  Logger log(env.rank, env.size, parse_log_level(f.model.log_level));
  auto m = infer::build_inference_model(f.model, env, log);
  infer::StageRunner runner(*m->stage, m->groups);
  data::Tokenizer& tok = *m->tokenizer;
  const std::string& path = f.valid_data.front();
  const int64_t seq = f.model.model.seq_length, mb = f.model.micro_batch_size;
  nlohmann::json result = {{"task", f.task}, {"valid_data", path}, {"seq_length", seq}};
  std::string line;
  Timer timer;
  timer.start();
  if (f.task == "WIKITEXT103") {
    RawText raw = read_raw_text(path);
    std::string detok_name;
    const std::string text = detokenizer_for_path(path, &detok_name)(raw.text);
    std::vector<int32_t> ids = tok.encode(text);
    const int64_t num_tokenized = static_cast<int64_t>(ids.size());
    LmWindows windows(std::move(ids), seq, tok.eod(), f.overlapping_eval);
    log.info0(path, ": ", raw.num_original_tokens, " original words, ", num_tokenized, " tokens (detokenizer ",
              detok_name, "), ", windows.size(), " windows of ", seq, " stride ", windows.stride());
    LossTotals t = evaluate_loss(
        runner, windows.size(), [&](int64_t i) { return windows.window(i); }, mb, &log);
    MEGATON_CHECK(t.scored == num_tokenized - 1, InternalError, "scored ", t.scored, " targets, expected ",
                  num_tokenized - 1);
    PerplexityReport r = perplexity_report(t.loss_sum, num_tokenized, raw.num_original_tokens);
    line = format_perplexity(f.task, r);
    result.update({{"avg_loss", r.avg_loss},
                   {"ppl", r.ppl},
                   {"adjusted_ppl", r.adjusted_ppl},
                   {"token_ratio", r.token_ratio},
                   {"num_tokenized_tokens", num_tokenized},
                   {"num_original_tokens", raw.num_original_tokens},
                   {"overlapping_eval", windows.stride()}});
  } else {
    LambadaSet set = read_lambada(path, tok, f.strict_lambada, seq, tok.eod());
    log.info0(path, ": ", set.examples.size(), " examples", f.strict_lambada ? " (strict)" : "");
    AccuracyTotals t = evaluate_accuracy(
        runner, static_cast<int64_t>(set.examples.size()), [&](int64_t i) { return set.examples[i]; }, mb, &log);
    line = format_accuracy(f.task, t);
    result.update({{"correct", t.correct},
                   {"total", t.total},
                   {"accuracy", t.total ? double(t.correct) / double(t.total) : 0.0},
                   {"strict", f.strict_lambada}});
  }
  timer.stop();
  result["seconds"] = timer.elapsed();
  if (m->groups.rank == 0) {
    out << line << std::endl;
    if (!f.results_file.empty()) {
      std::ofstream rf(f.results_file, std::ios::trunc);
      MEGATON_CHECK(rf.good(), UsageError, "--results-file ", f.results_file, ": cannot open for writing");
      rf << result.dump(2) << "\n";
    }
  }
  log.info0("done in ", result["seconds"].get<double>(), " s");
  return 0;
}

}  // namespace megaton::eval
