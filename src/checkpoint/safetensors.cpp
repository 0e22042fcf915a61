#include "checkpoint/safetensors.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

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
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw RuntimeError(str(path, ": cannot create: ", std::strerror(errno)));
  uint64_t len = h.size();
  unsigned char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(len >> (8 * i));
  out.write(reinterpret_cast<const char*>(le), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& t : data) out.write(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  out.flush();
  if (!out) throw RuntimeError(str(path, ": write failed: ", std::strerror(errno)));
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
  for (const auto& [name, rec] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = str(path, ": tensor '", name, "'");
    try {
      const auto dtype = from_st_dtype(rec.at("dtype").get<std::string>(), where);
      const auto shape = rec.at("shape").get<std::vector<int64_t>>();
      const auto off = rec.at("data_offsets").get<std::vector<uint64_t>>();
      if (off.size() != 2 || off[0] > off[1] || off[1] > data_size)
        throw DataError(str(where, ": data_offsets outside the ", data_size, " data bytes (truncated file?)"));
      torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
      if (static_cast<uint64_t>(t.numel() * t.element_size()) != off[1] - off[0])
        throw DataError(str(where, ": ", off[1] - off[0], " bytes do not hold shape and dtype ", rec.dump()));
      in.seekg(static_cast<std::streamoff>(8 + len + off[0]));
      if (!in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(off[1] - off[0])))
        throw DataError(str(where, ": short read"));
      out.emplace(name, t);
    } catch (const json::exception& e) {
      throw DataError(str(where, ": malformed header entry (", e.what(), ")"));
    }
  }
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
  std::set<std::string> files;
  for (const auto& [n, f] : j.at("weight_map").items()) files.insert(f.get<std::string>());
  std::map<std::string, torch::Tensor> out;
  for (const auto& f : files) {
    auto part = read_safetensors((fs::path(dir) / f).string());
    out.insert(part.begin(), part.end());
  }
  return out;
}

}  // namespace megaton::checkpoint
