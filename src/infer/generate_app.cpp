#include "infer/generate_app.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/timer.h"
#include "data/utf8.h"
#include "dist/mpi_session.h"
#include "infer/broadcast_text.h"

namespace megaton::infer {

void GenerateAppOptions::validate(int world) {
  model.validate(world, "generate");
  validate_sampling(SamplingOptions{greedy, temperature, top_k, top_p});
  MEGATON_CHECK(out_seq_length > 0, UsageError, "--out-seq-length must be > 0, got ", out_seq_length);
  MEGATON_CHECK(num_samples >= 0, UsageError, "--num-samples must be >= 0, got ", num_samples);
  MEGATON_CHECK(num_samples == 0 || !genfile.empty(), UsageError, "--num-samples ", num_samples,
                " (unconditional) needs --genfile FILE for the samples");
  MEGATON_CHECK(num_samples == 0 || sample_input_file.empty(), UsageError,
                "--num-samples > 0 (unconditional) and --sample-input-file (conditional) exclude each other");
  if (!sample_input_file.empty()) {
    std::error_code ec;
    MEGATON_CHECK(std::filesystem::is_regular_file(sample_input_file, ec), UsageError, "--sample-input-file ",
                  sample_input_file, ": ",
                  std::filesystem::is_directory(sample_input_file, ec) ? "is a directory" : "no such file",
                  "; expected a file of prompts, one a line");
  }
  if (!sample_input_file.empty() && sample_output_file.empty()) sample_output_file = sample_input_file + ".out";
  MEGATON_CHECK(sample_output_file.empty() || !std::filesystem::is_directory(sample_output_file), UsageError,
                "--sample-output-file ", sample_output_file, ": is a directory; expected a file name");
}

std::string unconditional_record(const GenerateResult& r, int64_t row, int64_t seq_length, const data::Tokenizer& tok) {
  const int64_t length = r.lengths[row];
  auto acc = r.tokens.accessor<int64_t, 2>();
  std::vector<int32_t> ids;
  for (int64_t i = 1; i < length - 1; ++i) ids.push_back(static_cast<int32_t>(acc[row][i]));
  nlohmann::json j;
  j["text"] = data::sanitize_utf8(tok.decode(ids));
  j["length"] = length - 1;
  j["finished"] = length < seq_length - 1;
  return j.dump();
}

std::string conditional_block(const std::string& prompt, const std::string& full_text) {
  // Skip as many code points of the decoded text as the prompt has (Python's str slicing).
  size_t chars = 0;
  for (unsigned char c : prompt) chars += (c & 0xC0) != 0x80;
  size_t i = 0;
  for (size_t n = 0; n < chars && i < full_text.size(); ++n) {
    ++i;
    while (i < full_text.size() && (static_cast<unsigned char>(full_text[i]) & 0xC0) == 0x80) ++i;
  }
  return "\nContext:" + prompt + "\n\nMegatron-LM:" + full_text.substr(i) + "\n";
}

namespace {

GenerateOptions generate_options(const GenerateAppOptions& f, const data::Tokenizer& tok) {
  GenerateOptions o;
  o.sampling = {f.greedy, f.temperature, f.top_k, f.top_p};
  o.seq_length = f.model.model.seq_length;
  o.out_seq_length = f.out_seq_length;
  o.recompute = f.recompute;
  o.eos_id = f.ignore_eos ? -1 : tok.eod();
  o.pad_id = tok.eod();
  return o;
}

}  // namespace

int run_generate_app(const GenerateAppOptions& f, const dist::LaunchEnv& env, std::istream& in, std::ostream& out) {
  Logger log(env.rank, env.size, parse_log_level(f.model.log_level));
  auto m = build_inference_model(f.model, env, log);
  StageRunner runner(*m->stage, m->groups);
  data::Tokenizer& tok = *m->tokenizer;
  const GenerateOptions o = generate_options(f, tok);
  at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(f.model.seed));
  const bool writer = m->groups.rank == 0;
  const int64_t seq = o.seq_length;

  if (f.num_samples > 0) {
    // Unconditional: batches of --micro-batch-size contexts [EOD].
    std::ofstream file;
    if (writer) {
      file.open(f.genfile, std::ios::binary | std::ios::trunc);
      MEGATON_CHECK(file.good(), UsageError, "--genfile ", f.genfile, ": cannot open for writing");
    }
    const int64_t mb = f.model.micro_batch_size;
    int64_t written = 0, tokens_out = 0;
    Timer timer;
    timer.start();
    while (written < f.num_samples) {
      std::vector<std::vector<int32_t>> ctx(mb, std::vector<int32_t>{tok.eod()});
      GenerateResult r = generate(runner, ctx, o, gen);
      for (int64_t row = 0; row < mb && written < f.num_samples; ++row, ++written) {
        tokens_out += r.finished[row] ? r.lengths[row] : r.end - 1;  // positions generated after the [EOD] prompt
        if (writer) file << unconditional_record(r, row, seq, tok) << "\n";
      }
      if (writer) file.flush();
      log.info0("generated ", written, "/", f.num_samples, " samples");
    }
    timer.stop();
    const double secs = timer.elapsed();
    log.info0("wrote ", written, " samples to ", f.genfile, " in ", secs, " s: ", tokens_out, " tokens generated, ",
              double(tokens_out) / secs, " tokens/s");
    return 0;
  }

  const int64_t max_prompt = seq / 2;
  auto run_prompt = [&](const std::string& prompt, bool interactive) -> std::optional<std::string> {
    std::vector<int32_t> ids = tok.encode(prompt);
    if (ids.empty() || static_cast<int64_t>(ids.size()) >= max_prompt) {
      log.warn0("context of ", ids.size(), " tokens skipped: ",
                ids.empty() ? "the prompt is empty"
                            : "Please give smaller context (half of the "
                              "sequence length)!");
      return std::nullopt;
    }
    int64_t last_print = static_cast<int64_t>(ids.size());
    StepCallback cb;
    if (interactive && writer) {
      cb = [&](const torch::Tensor& t, int64_t len) {
        if (len - last_print < 24) return;
        last_print = len;
        std::vector<int32_t> row(t.size(1));
        for (int64_t i = 0; i < t.size(1); ++i) row[i] = static_cast<int32_t>(t[0][i].item<int64_t>());
        out << "\nMegatron-LM (partial): " << data::sanitize_utf8(tok.decode(row)) << std::endl;
      };
    }
    GenerateResult r = generate(runner, {ids}, o, gen, cb);
    return data::sanitize_utf8(tok.decode(row_tokens(r, 0)));
  };

  if (!f.sample_input_file.empty()) {
    std::vector<std::string> lines;
    if (writer) {
      std::ifstream pin(f.sample_input_file, std::ios::binary);
      MEGATON_CHECK(pin.good(), UsageError, "--sample-input-file ", f.sample_input_file, ": cannot open the file");
      std::string line;
      while (std::getline(pin, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(line);
      }
    }
    const int64_t n = broadcast_int(*m->groups.world, static_cast<int64_t>(lines.size()), runner.device());
    std::ofstream file;
    if (writer) {
      file.open(f.sample_output_file, std::ios::binary | std::ios::trunc);
      MEGATON_CHECK(file.good(), UsageError, "--sample-output-file ", f.sample_output_file,
                    ": cannot open for writing");
    }
    int64_t done = 0;
    for (int64_t i = 0; i < n; ++i) {
      const std::string prompt = broadcast_string(*m->groups.world, writer ? lines[i] : std::string(), runner.device());
      if (prompt == "stop") break;
      if (prompt.empty()) continue;
      auto text = run_prompt(prompt, false);
      if (!text) continue;
      ++done;
      if (writer) file << conditional_block(prompt, *text) << std::flush;
    }
    log.info0("wrote ", done, " samples to ", f.sample_output_file);
    return 0;
  }

  // Interactive.
  for (;;) {
    std::string prompt;
    if (writer) {
      out << "\nContext prompt (stop to exit) >>> " << std::flush;
      if (!std::getline(in, prompt)) prompt = "stop";
    }
    prompt = broadcast_string(*m->groups.world, prompt, runner.device());
    if (prompt == "stop") break;
    if (prompt.empty()) continue;
    auto text = run_prompt(prompt, true);
    if (text && writer) out << conditional_block(prompt, *text) << std::flush;
  }
  return 0;
}

}  // namespace megaton::infer
