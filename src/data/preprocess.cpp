#include "data/preprocess.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/timer.h"
#include "data/indexed_dataset.h"
#include "data/input_stream.h"
#include "data/json_line.h"

namespace megaton::data {

namespace {

/// A closable blocking FIFO.
template <typename T>
class Channel {
 public:
  explicit Channel(size_t capacity) : capacity_(capacity) {}
  bool push(T v) {
    std::unique_lock<std::mutex> lk(mu_);
    not_full_.wait(lk, [&] { return closed_ || q_.size() < capacity_; });
    if (closed_) return false;
    q_.push_back(std::move(v));
    not_empty_.notify_one();
    return true;
  }
  std::optional<T> pop() {
    std::unique_lock<std::mutex> lk(mu_);
    not_empty_.wait(lk, [&] { return closed_ || !q_.empty(); });
    if (q_.empty()) return std::nullopt;
    T v = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return v;
  }
  void close() {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

 private:
  size_t capacity_;
  std::deque<T> q_;
  bool closed_ = false;
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
};

/// Limits the chunks between the reader and the writer (so a slow chunk cannot make the reorder buffer grow).
class Slots {
 public:
  explicit Slots(size_t n) : free_(n) {}
  bool acquire() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return stop_ || free_ > 0; });
    if (stop_) return false;
    --free_;
    return true;
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu_);
    ++free_;
    cv_.notify_one();
  }
  void stop() {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    cv_.notify_all();
  }

 private:
  size_t free_;
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
};

struct ChunkResult {
  uint64_t seq = 0;
  uint64_t file_position = 0;
  uint64_t bytes = 0;
  int64_t lines = 0, blank = 0;
  // Per key: all tokens back to back, and per line the item length (-1: no item for this line).
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<int64_t>> lengths;
  std::vector<std::pair<uint64_t, std::string>> bad;  // (line number, reason)
};

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

ChunkResult process_chunk(const LineChunk& chunk, const PreprocessOptions& opts, Tokenizer& tok,
                          JsonLineParser& parser) {
  ChunkResult r;
  r.seq = chunk.seq;
  r.file_position = chunk.file_position;
  r.bytes = chunk.text.size();
  const size_t nk = opts.json_keys.size();
  r.tokens.resize(nk);
  r.lengths.resize(nk);
  std::vector<std::string_view> values;
  for (size_t i = 0; i < chunk.num_lines(); ++i) {
    const std::string_view line = chunk.line(i);
    ++r.lines;
    if (is_blank(line)) {
      ++r.blank;
      continue;
    }
    const std::string err = parser.parse(line, values);
    if (!err.empty()) {
      r.bad.emplace_back(chunk.first_line + i, err);
      continue;
    }
    for (size_t k = 0; k < nk; ++k) {
      const size_t before = r.tokens[k].size();
      try {
        tok.encode_to(values[k], r.tokens[k]);
      } catch (const DataError& e) {  // input that cannot be tokenized in bounded memory: a bad line
        r.tokens[k].resize(before);
        for (size_t j = 0; j < k; ++j) {  // drop this line's earlier keys too: a line is taken whole or not at all
          if (r.lengths[j].back() > 0) r.tokens[j].resize(r.tokens[j].size() - r.lengths[j].back());
          r.lengths[j].pop_back();
        }
        r.bad.emplace_back(chunk.first_line + i, str("key '", opts.json_keys[k], "': ", e.what()));
        break;
      }
      if (r.tokens[k].size() == before) {
        r.lengths[k].push_back(-1);  // empty document: Megatron adds no item
        continue;
      }
      if (opts.append_eod) r.tokens[k].push_back(tok.eod());
      r.lengths[k].push_back(static_cast<int64_t>(r.tokens[k].size() - before));
    }
  }
  return r;
}

}  // namespace

std::string output_prefix_for_key(const std::string& prefix, const std::string& key) {
  return prefix + "_" + key + "_document";
}

PreprocessStats preprocess_jsonl(const PreprocessOptions& opts, const Tokenizer& tokenizer, const Logger& log) {
  MEGATON_CHECK(opts.workers >= 1 && opts.workers <= 1024, UsageError, "--workers must be in 1..1024 (got ",
                opts.workers, ")");
  MEGATON_CHECK(!opts.json_keys.empty(), UsageError, "--json-keys needs at least one key");
  MEGATON_CHECK(!opts.output_prefix.empty(), UsageError, "--output-prefix is required");
  auto input = InputStream::open(opts.input);
  const uint8_t dtype = best_fitting_dtype_code(tokenizer.vocab_size());

  PreprocessStats stats;
  std::vector<std::unique_ptr<IndexedDatasetBuilder>> builders;
  for (const auto& key : opts.json_keys) {
    stats.outputs.push_back(output_prefix_for_key(opts.output_prefix, key));
    builders.push_back(std::make_unique<IndexedDatasetBuilder>(stats.outputs.back(), dtype));
  }

  const size_t in_flight = 4 * static_cast<size_t>(opts.workers);
  Channel<LineChunk> work(in_flight);
  Channel<ChunkResult> results(in_flight + 1);
  Slots slots(in_flight);
  std::atomic<bool> failed{false};
  std::mutex err_mu;
  std::exception_ptr error;
  auto fail = [&](std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lk(err_mu);
      if (!error) error = e;
    }
    failed = true;
    slots.stop();
    work.close();
    results.close();
  };

  std::thread reader([&] {
    try {
      LineChunker chunker(*input, opts.chunk_bytes);
      for (;;) {
        if (!slots.acquire()) break;
        LineChunk c;
        if (!chunker.next(c)) break;
        if (!work.push(std::move(c))) break;
      }
      work.close();
    } catch (...) {
      fail(std::current_exception());
    }
  });
  std::atomic<int> workers_left{opts.workers};
  std::vector<std::thread> workers;
  for (int w = 0; w < opts.workers; ++w) {
    workers.emplace_back([&] {
      try {
        auto tok = tokenizer.clone();
        JsonLineParser parser(opts.json_keys);
        while (auto c = work.pop()) {
          if (failed) break;
          if (!results.push(process_chunk(*c, opts, *tok, parser))) break;
        }
      } catch (...) {
        fail(std::current_exception());
      }
      if (--workers_left == 0) results.close();
    });
  }

  // Writer: this thread, in input order.
  const auto t0 = std::chrono::steady_clock::now();
  auto last_print = t0;
  int64_t next_report = opts.log_interval;
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto progress_line = [&](uint64_t file_pos) {
    const double s = std::max(elapsed(), 1e-9);
    const double frac = input->file_size() ? double(file_pos) / double(input->file_size()) : 0.0;
    const double eta = frac > 0 ? s * (1.0 - frac) / frac : 0.0;
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "processed %lld documents (%.0f docs/s, %.2f MB/s, %.0f tokens/s), %.1f%% of input, ETA %s",
                  static_cast<long long>(stats.documents), stats.documents / s, stats.bytes / s / 1e6, stats.tokens / s,
                  100.0 * frac, format_duration(eta).c_str());
    return std::string(buf);
  };
  try {
    std::map<uint64_t, ChunkResult> pending;
    uint64_t next_seq = 0;
    while (auto res = results.pop()) {
      pending.emplace(res->seq, std::move(*res));
      for (auto it = pending.find(next_seq); it != pending.end(); it = pending.find(next_seq)) {
        ChunkResult& r = it->second;
        if (!r.bad.empty()) {
          if (!opts.skip_bad_lines) {
            const auto& [line, why] = r.bad.front();
            throw DataError(str(opts.input, ":", line, ": ", why,
                                "; fix the line or pass --skip-bad-lines to skip and count malformed lines"));
          }
          for (const auto& b : r.bad)
            if (stats.first_bad_lines.size() < 10) stats.first_bad_lines.push_back(static_cast<int64_t>(b.first));
          stats.bad_lines += static_cast<int64_t>(r.bad.size());
        }
        const size_t nlines = r.lengths.empty() ? 0 : r.lengths[0].size();
        std::vector<size_t> offs(builders.size(), 0);
        for (size_t i = 0; i < nlines; ++i) {
          bool any = false;
          for (size_t k = 0; k < builders.size(); ++k) {
            const int64_t n = r.lengths[k][i];
            if (n < 0 && builders.size() > 1) {
              // Several keys (prompt inputs and targets) are read side by side, document i of each from line i: an
              // empty text becomes an empty document, where Megatron's skip would shift the later lines' pairing.
              builders[k]->add_item(r.tokens[k].data() + offs[k], 0);
              builders[k]->end_document();
              ++stats.empty_kept;
              continue;
            }
            if (n < 0) {
              ++stats.empty_skipped;
              continue;
            }
            builders[k]->add_item(r.tokens[k].data() + offs[k], static_cast<size_t>(n));
            builders[k]->end_document();
            offs[k] += static_cast<size_t>(n);
            stats.tokens += n;
            any = true;
          }
          if (any) ++stats.documents;
        }
        stats.lines += r.lines;
        stats.blank_lines += r.blank;
        stats.bytes += r.bytes;
        const uint64_t pos = r.file_position;
        pending.erase(it);
        ++next_seq;
        slots.release();
        if (opts.log_interval > 0 && stats.documents >= next_report) {
          next_report = (stats.documents / opts.log_interval + 1) * opts.log_interval;
          const auto now = std::chrono::steady_clock::now();
          if (std::chrono::duration<double>(now - last_print).count() >= 1.0) {
            last_print = now;
            log.info(progress_line(pos));
          }
        }
      }
    }
  } catch (...) {
    fail(std::current_exception());
  }
  reader.join();
  for (auto& w : workers) w.join();
  if (error) std::rethrow_exception(error);
  for (auto& b : builders) b->finalize();
  stats.seconds = elapsed();
  return stats;
}

}  // namespace megaton::data
