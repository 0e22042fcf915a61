// Byte-level BPE over token ids: the vocabulary maps raw byte strings to ids, merges map an adjacent id pair to
// (rank, merged id). encode_word() applies the reference algorithm (openai/gpt-2 encoder.py `bpe`): repeatedly take
// the lowest-ranked adjacent pair and merge all of its occurrences left to right. Short words use a rank scan over an
// array; long words (a run of thousands of digits, say) a min-heap over a linked list, so cost stays O(n log n).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace megaton::data {

/// Open-addressing hash map from an id pair to (rank, merged id); immutable after construction.
class PairMap {
 public:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  void reserve(size_t n);
  /// Inserts unless present (the first, lowest-ranked, definition of a pair wins, as in the Python dict).
  void insert(int32_t a, int32_t b, Merge m);
  const Merge* find(int32_t a, int32_t b) const {
    if (slots_.empty()) return nullptr;
    const uint64_t k = key(a, b);
    for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == k) return &s.merge;
      if (s.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return count_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{};
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  static size_t hash(uint64_t k) { return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 17); }
  void grow();
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

class BpeModel {
 public:
  /// SentencePiece-style BPE (Llama-2's tokenizer.json): a word's first symbols are its UTF-8 characters, not its
  /// bytes; a character missing from the vocabulary becomes the byte tokens of its bytes (byte_fallback: "<0xXX>"),
  /// else the unknown token (consecutive ones fused into one with fuse_unk).
  struct CharLevel {
    std::array<int32_t, 256> byte_fallback;  // the id of "<0xXX>" per byte, or -1 (no byte fallback)
    int32_t unk = -1;
    bool fuse_unk = false;
  };
  /// `tokens[id]` is the raw byte string of token id (empty for ids that are not byte strings, e.g. specials);
  /// `merges` are byte-string pairs in rank order, `merge_lines[i]` the line (or index) each came from, for errors.
  /// Throws DataError naming `origin` when a byte is missing from the vocabulary (byte-level BPE) or a merge names
  /// unknown tokens. With `char_level`, tokens and merges are the vocabulary's strings (UTF-8), symbols characters.
  BpeModel(std::vector<std::string> tokens, const std::vector<std::pair<std::string, std::string>>& merges,
           const std::string& origin, bool ignore_merges = false, const CharLevel* char_level = nullptr);

  /// The longest pre-token encode_word accepts (bounds the memory one input line can take).
  static constexpr size_t kMaxWordBytes = size_t{1} << 20;
  /// Appends the ids of one pre-token (raw bytes). DataError for a word longer than kMaxWordBytes.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  /// The id of an exact byte string, or -1.
  int32_t find(std::string_view bytes) const;
  const std::string& token_bytes(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  size_t size() const { return tokens_.size(); }
  size_t num_merges() const { return merges_.size(); }

 private:
  void merge_short(std::vector<int32_t>& syms) const;
  void merge_long(std::vector<int32_t>& syms) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  std::array<int32_t, 256> byte_ids_{};
  PairMap merges_;
  bool ignore_merges_;
  bool char_level_ = false;
  CharLevel chars_{};
  std::string origin_;

  void char_symbols(std::string_view word, std::vector<int32_t>& syms) const;
};

/// Memoizes BpeModel::encode_word per distinct pre-token (the reference encoder's `cache`): an open-addressing table
/// whose keys and values live in two arenas (no allocation per entry). Not thread-safe: one per thread. Bounded:
/// cleared when it holds `max_entries` words.
class BpeCache {
 public:
  explicit BpeCache(size_t max_entries = 1 << 20) : max_entries_(max_entries) {}
  void encode_word(const BpeModel& model, std::string_view word, std::vector<int32_t>& out);
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, key_len = 0;  // key_len == 0: empty (words are never empty)
    uint32_t val_off = 0, val_len = 0;
  };
  void rehash(size_t capacity);
  void clear();
  size_t max_entries_;
  size_t count_ = 0;
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> values_;
};

}  // namespace megaton::data
