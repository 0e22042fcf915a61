#include "checkpoint/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/safe_file.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace megaton::checkpoint {

namespace {

const char* st_dtype(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat64:
      return "F64";
    case torch::kFloat32:
      return "F32";
    case torch::kFloat16:
      return "F16";
    case torch::kBFloat16:
      return "BF16";
    case torch::kInt64:
      return "I64";
    case torch::kInt32:
      return "I32";
    case torch::kUInt8:
      return "U8";
    default:
      throw RuntimeError(str("safetensors: cannot store dtype ", c10::toString(t)));
  }
}

torch::ScalarType from_st_dtype(const std::string& s, const std::string& where) {
  if (s == "F64") return torch::kFloat64;
  if (s == "F32") return torch::kFloat32;
  if (s == "F16") return torch::kFloat16;
  if (s == "BF16") return torch::kBFloat16;
  if (s == "I64") return torch::kInt64;
  if (s == "I32") return torch::kInt32;
  if (s == "U8") return torch::kUInt8;
  throw DataError(str(where, ": unsupported safetensors dtype '", s, "'"));
}

}  // namespace

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> data;
  int64_t offset = 0;
  for (const auto& [name, t0] : tensors) {
    torch::Tensor t = t0.detach().to(torch::kCPU).contiguous();
    const int64_t n = t.numel() * t.element_size();
    header[name] = {
        {"dtype", st_dtype(t.scalar_type())}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    data.push_back(t);
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  // Written to a temporary created exclusively (never through a planted link), then renamed over `path`.
  refuse_symlink(path, "safetensors output");
  const std::string tmp = path + ".tmp";
  std::FILE* f = open_exclusive_file(tmp, "safetensors output");
  uint64_t len = h.size();
  unsigned char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(len >> (8 * i));
  bool ok = std::fwrite(le, 1, 8, f) == 8 && std::fwrite(h.data(), 1, h.size(), f) == h.size();
  for (const auto& t : data) {
    const size_t n = static_cast<size_t>(t.numel() * t.element_size());
    ok = ok && (n == 0 || std::fwrite(t.data_ptr(), 1, n, f) == n);
  }
  ok = std::fflush(f) == 0 && ok;
  const int err = errno;
  std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw RuntimeError(str(path, ": write failed: ", std::strerror(ok ? errno : err)));
  }
}

std::map<std::string, torch::Tensor> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(str(path, ": cannot open: ", std::strerror(errno)));
  const uint64_t size = fs::file_size(path);
  unsigned char le[8];
  if (size < 8 || !in.read(reinterpret_cast<char*>(le), 8))
    throw DataError(str(path, ": not a safetensors file (shorter than its 8-byte header length)"));
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(le[i]) << (8 * i);
  if (len > size - 8 || len > (uint64_t{1} << 30))
    throw DataError(str(path, ": header length ", len, " does not fit in the file of ", size, " bytes (truncated?)"));
  std::string h(len, '\0');
  in.read(h.data(), static_cast<std::streamsize>(len));
  json header;
  try {
    header = json::parse(h);
  } catch (const json::exception& e) {
    throw DataError(str(path, ": the header is not valid JSON (", e.what(), ")"));
  }
  if (!header.is_object()) throw DataError(str(path, ": the header is not a JSON object"));
  const uint64_t data_size = size - 8 - len;
  std::map<std::string, torch::Tensor> out;
  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (const auto& [name, rec] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = str(path, ": tensor '", name, "'");
    try {
      const auto dtype = from_st_dtype(rec.at("dtype").get<std::string>(), where);
      const auto shape = rec.at("shape").get<std::vector<int64_t>>();
      const auto off = rec.at("data_offsets").get<std::vector<uint64_t>>();
      if (off.size() != 2 || off[0] > off[1] || off[1] > data_size)
        throw DataError(str(where, ": data_offsets outside the ", data_size, " data bytes (truncated file?)"));
      // The shape's bytes, checked before anything is allocated (a hostile shape must not allocate).
      uint64_t bytes = c10::elementSize(dtype);
      for (int64_t d : shape) {
        if (d < 0) throw DataError(str(where, ": negative dimension in shape ", rec.at("shape").dump()));
        if (d > 0 && bytes > data_size / static_cast<uint64_t>(d) + 1)
          throw DataError(str(where, ": shape ", rec.at("shape").dump(), " is larger than the file's data"));
        bytes *= static_cast<uint64_t>(d);
      }
      if (bytes != off[1] - off[0])
        throw DataError(str(where, ": ", off[1] - off[0], " bytes do not hold shape and dtype ", rec.dump()));
      spans.push_back({off[0], off[1], name});
      torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
      in.seekg(static_cast<std::streamoff>(8 + len + off[0]));
      if (!in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(off[1] - off[0])))
        throw DataError(str(where, ": short read"));
      out.emplace(name, t);
    } catch (const json::exception& e) {
      throw DataError(str(where, ": malformed header entry (", e.what(), ")"));
    }
  }
  // Tensors share no bytes (the format's own rule: an aliased entry is a malformed or hostile file).
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end && spans[i].end > spans[i].begin)
      throw DataError(str(path, ": tensors '", spans[i - 1].name, "' and '", spans[i].name,
                          "' overlap in the data (data_offsets ", spans[i - 1].begin, "..", spans[i - 1].end, " and ",
                          spans[i].begin, "..", spans[i].end, ")"));
  return out;
}

std::map<std::string, torch::Tensor> read_hf_weights(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(single)) return read_safetensors(single.string());
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (!fs::exists(index))
    throw DataError(str(dir, ": no model.safetensors or model.safetensors.index.json (pytorch_model.bin is not read)"));
  json j;
  try {
    std::ifstream in(index);
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw DataError(str(index.string(), ": not valid JSON (", e.what(), ")"));
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw DataError(str(index.string(), ": no \"weight_map\" object"));
  std::set<std::string> files;
  for (const auto& [n, f] : j["weight_map"].items()) {
    // A shard is a file of this directory: a name with '/' or ".." could read any file on the machine.
    if (!f.is_string() || !is_plain_file_name(f.get<std::string>()))
      throw DataError(
          str(index.string(), ": weight_map['", n, "'] is ", f.dump(), "; expected the file name of a shard in ", dir));
    files.insert(f.get<std::string>());
  }
  std::map<std::string, torch::Tensor> out;
  for (const auto& f : files) {
    auto part = read_safetensors((fs::path(dir) / f).string());
    out.insert(part.begin(), part.end());
  }
  return out;
}

}  // namespace megaton::checkpoint
