#include "data/bpe_model.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <queue>

#include "core/error.h"

namespace megaton::data {

// ~~~ PairMap ~~~

void PairMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap <<= 1;
  if (cap <= slots_.size()) return;
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  count_ = 0;
  for (const Slot& s : old)
    if (s.key != kEmpty) insert(int32_t(s.key >> 32), int32_t(s.key & 0xFFFFFFFFu), s.merge);
}

void PairMap::grow() {
  reserve(slots_.empty() ? 8 : slots_.size());
}

void PairMap::insert(int32_t a, int32_t b, Merge m) {
  if (2 * (count_ + 1) > slots_.size()) grow();
  const uint64_t k = key(a, b);
  for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == k) return;
    if (s.key == kEmpty) {
      s.key = k;
      s.merge = m;
      ++count_;
      return;
    }
  }
}

// ~~~ BpeModel ~~~

BpeModel::BpeModel(std::vector<std::string> tokens, const std::vector<std::pair<std::string, std::string>>& merges,
                   const std::string& origin, bool ignore_merges, const CharLevel* char_level)
    : tokens_(std::move(tokens)), ignore_merges_(ignore_merges), char_level_(char_level != nullptr), origin_(origin) {
  ids_.reserve(tokens_.size() * 2);
  for (size_t id = 0; id < tokens_.size(); ++id)
    if (!tokens_[id].empty()) ids_.emplace(tokens_[id], static_cast<int32_t>(id));
  if (char_level_) chars_ = *char_level;
  for (int b = 0; b < 256 && !char_level_; ++b) {
    const int32_t id = find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    MEGATON_CHECK(id >= 0, DataError, origin, ": the vocabulary has no token for byte 0x", std::hex, b,
                  " (a byte-level BPE vocabulary must cover all 256 bytes)");
    byte_ids_[b] = id;
  }
  merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [l, rr] = merges[r];
    const int32_t a = find(l), b = find(rr), m = find(l + rr);
    MEGATON_CHECK(a >= 0 && b >= 0 && m >= 0, DataError, origin, ": merge #", r + 1, " ('", l, "' + '", rr,
                  "') names a token missing from the vocabulary");
    merges_.insert(a, b, {static_cast<int32_t>(r), m});
  }
}

int32_t BpeModel::find(std::string_view bytes) const {
  const auto it = ids_.find(std::string(bytes));
  return it == ids_.end() ? -1 : it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  // Merging holds a few words of state per byte: one hostile "word" (50 MB without a break) would take gigabytes.
  MEGATON_CHECK(word.size() <= kMaxWordBytes, DataError, "a word of ", word.size(),
                " bytes without a break (longer than the ", kMaxWordBytes,
                " bytes BPE accepts; real text has none): the line is refused");
  if (word.size() == 1 && !char_level_) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    const int32_t id = find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<int32_t> syms;
  if (char_level_) {
    char_symbols(word, syms);
  } else {
    syms.resize(word.size());
    for (size_t i = 0; i < word.size(); ++i) syms[i] = byte_ids_[static_cast<unsigned char>(word[i])];
  }
  if (syms.size() <= 64) {
    merge_short(syms);
  } else {
    merge_long(syms);
  }
  out.insert(out.end(), syms.begin(), syms.end());
}

void BpeModel::char_symbols(std::string_view word, std::vector<int32_t>& syms) const {
  bool last_unk = false;
  for (size_t i = 0; i < word.size();) {
    // One UTF-8 character (the text is valid UTF-8: tokenizers repair it first).
    const auto lead = static_cast<unsigned char>(word[i]);
    const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const std::string_view c = word.substr(i, std::min(n, word.size() - i));
    i += c.size();
    if (const int32_t id = find(c); id >= 0) {
      syms.push_back(id);
      last_unk = false;
      continue;
    }
    bool bytes = true;
    for (const char b : c) bytes = bytes && chars_.byte_fallback[static_cast<unsigned char>(b)] >= 0;
    if (bytes) {
      for (const char b : c) syms.push_back(chars_.byte_fallback[static_cast<unsigned char>(b)]);
      last_unk = false;
      continue;
    }
    MEGATON_CHECK(chars_.unk >= 0, DataError, origin_, ": the character '", std::string(c),
                  "' is not in the vocabulary, which has neither byte fallback nor an unknown token");
    if (!(chars_.fuse_unk && last_unk)) syms.push_back(chars_.unk);
    last_unk = true;
  }
}

void BpeModel::merge_short(std::vector<int32_t>& syms) const {
  constexpr int32_t kNone = std::numeric_limits<int32_t>::max();
  while (syms.size() > 1) {
    int32_t best = kNone;
    size_t best_i = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      const PairMap::Merge* m = merges_.find(syms[i], syms[i + 1]);
      if (m && m->rank < best) best = m->rank, best_i = i;
    }
    if (best == kNone) break;
    const int32_t a = syms[best_i], b = syms[best_i + 1];
    const int32_t merged = merges_.find(a, b)->id;
    size_t w = best_i;
    for (size_t i = best_i; i < syms.size();) {
      if (i + 1 < syms.size() && syms[i] == a && syms[i + 1] == b) {
        syms[w++] = merged;
        i += 2;
      } else {
        syms[w++] = syms[i++];
      }
    }
    syms.resize(w);
  }
}

void BpeModel::merge_long(std::vector<int32_t>& syms) const {
  // Doubly linked list over positions; heap of candidate pairs keyed by (rank, left position). Merging the
  // lowest-ranked pair first, equal ranks left to right, gives the reference result (an occurrence that overlaps an
  // earlier merged one is stale and skipped).
  const size_t n = syms.size();
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) prev[i] = int32_t(i) - 1, next[i] = (i + 1 < n) ? int32_t(i + 1) : -1;
  struct Cand {
    int32_t rank;
    int32_t pos;
    int32_t left, right;  // the ids when pushed, to detect stale entries
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t i) {
    if (i < 0 || next[i] < 0) return;
    if (const PairMap::Merge* m = merges_.find(syms[i], syms[next[i]])) heap.push({m->rank, i, syms[i], syms[next[i]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(int32_t(i));
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int32_t i = c.pos;
    if (!alive[i] || next[i] < 0) continue;
    const int32_t j = next[i];
    if (syms[i] != c.left || syms[j] != c.right) continue;
    syms[i] = merges_.find(c.left, c.right)->id;
    alive[j] = false;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  size_t w = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) syms[w++] = syms[i];
  syms.resize(w);
}

// ~~~ BpeCache ~~~

namespace {
inline uint64_t hash_bytes(std::string_view s) {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    p += 8, n -= 8;
  }
  uint64_t v = 0;
  std::memcpy(&v, p, n);
  h = (h ^ v) * 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}
}  // namespace

void BpeCache::clear() {
  slots_.clear();
  keys_.clear();
  values_.clear();
  count_ = 0;
}

void BpeCache::rehash(size_t capacity) {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(capacity, Slot{});
  const size_t mask = capacity - 1;
  for (const Slot& s : old) {
    if (!s.key_len) continue;
    size_t i = s.hash & mask;
    while (slots_[i].key_len) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void BpeCache::encode_word(const BpeModel& model, std::string_view word, std::vector<int32_t>& out) {
  if (word.size() == 1 || word.size() > 0xFFFF) {
    model.encode_word(word, out);
    return;
  }
  if (slots_.empty()) rehash(1 << 12);
  const uint64_t h = hash_bytes(word);
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  for (; slots_[i].key_len; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash == h && s.key_len == word.size() &&
        std::memcmp(keys_.data() + s.key_off, word.data(), word.size()) == 0) {
      out.insert(out.end(), values_.begin() + s.val_off, values_.begin() + s.val_off + s.val_len);
      return;
    }
  }
  const size_t before = out.size();
  model.encode_word(word, out);
  if (count_ >= max_entries_ || keys_.size() + word.size() > 0xFFFFFFFFull ||
      values_.size() + (out.size() - before) > 0xFFFFFFFFull) {
    clear();
    return;
  }
  Slot s;
  s.hash = h;
  s.key_off = static_cast<uint32_t>(keys_.size());
  s.key_len = static_cast<uint32_t>(word.size());
  s.val_off = static_cast<uint32_t>(values_.size());
  s.val_len = static_cast<uint32_t>(out.size() - before);
  keys_.append(word.data(), word.size());
  values_.insert(values_.end(), out.begin() + before, out.end());
  slots_[i] = s;
  if (2 * ++count_ > slots_.size()) rehash(2 * slots_.size());
}

}  // namespace megaton::data
