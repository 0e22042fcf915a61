#include "data/document_positions.h"

namespace megaton::data {

bool document_positions(const int64_t* tokens, int64_t s, int64_t eod, int64_t* position, int64_t* document) {
  bool boundary = false;
  int64_t start = 0, doc = 0;
  for (int64_t t = 0; t < s; ++t) {
    position[t] = t - start;
    document[t] = doc;
    if (tokens[t] == eod) {
      start = t + 1;
      ++doc;
      boundary = boundary || t + 1 < s;
    }
  }
  return boundary;
}

}  // namespace megaton::data
