// The values a torch `.pt` file's pickle holds, as a tree megaton can walk without Python: None, bool, int, float,
// str, bytes, list, tuple, dict (insertion order kept, as OrderedDict), tensors, and inert records of the few
// classes these files contain (argparse.Namespace, DeepSpeed's and Megatron's enums and namedtuples, torch dtypes).
// A record is data only: its class name, the arguments it was built with and its state; nothing is ever called.
//
//   Py v = load_torch_file("mp_rank_00_model_states.pt");      // torch_file.h
//   int64_t it = v->at("iteration")->as_int(where);
//   const Py& args = v->at("args");                            // argparse.Namespace: a record;
//   args->attr("hidden_size")
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace megaton::checkpoint {

struct PyNode;
using Py = std::shared_ptr<PyNode>;

struct PyNode {
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kBytes, kList, kTuple, kDict, kTensor, kRecord, kGlobal };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                        // str, bytes; a record's or a global's "module.qualname"
  std::vector<Py> items;                // list, tuple; a record's constructor arguments
  std::vector<std::pair<Py, Py>> dict;  // dict entries in insertion order
  Py state;                             // a record's BUILD state (usually a dict), or null
  torch::Tensor tensor;                 // kTensor (CPU)
  bool owned = false;                   // held by another node (the unpickler mutates only unowned containers)

  PyNode() = default;
  PyNode(const PyNode&) = default;
  PyNode& operator=(const PyNode&) = default;
  /// Frees nested children iteratively: a deeply nested tree does not recurse once per level.
  ~PyNode();

  static Py none();
  static Py boolean(bool v);
  static Py integer(int64_t v);
  static Py real(double v);
  static Py string(std::string v);
  static Py bytes(std::string v);
  static Py list(std::vector<Py> v = {});
  static Py tuple(std::vector<Py> v = {});
  static Py new_dict();
  static Py of_tensor(torch::Tensor t);
  static Py record(std::string cls, std::vector<Py> args = {}, Py state = nullptr);
  static Py global(std::string name);

  bool is(Kind k) const { return kind == k; }
  const char* kind_name() const;

  /// Dict entry (or a record's state entry / attribute) with a string key; null when absent.
  Py get(const std::string& key) const;
  /// As get(), but a CheckpointError naming `where` and the key when absent.
  const Py at(const std::string& key, const std::string& where = "") const;
  /// Sets (or replaces) a string-keyed dict entry.
  void set(const std::string& key, Py v);
  /// A record's attribute: its state dict's entry (argparse.Namespace), null when absent.
  Py attr(const std::string& key) const { return get(key); }

  int64_t as_int(const std::string& where) const;   // int or bool
  double as_float(const std::string& where) const;  // float or int
  const std::string& as_str(const std::string& where) const;
  const torch::Tensor& as_tensor(const std::string& where) const;
  const std::vector<Py>& as_seq(const std::string& where) const;  // list or tuple
};

/// JSON for a value tree of plain data: dicts with string keys become objects, tuples and lists arrays, a record
/// its state (an enum, whose state is empty, its one argument), a global its name, bytes and tensors a description.
nlohmann::json py_to_json(const Py& v);

/// The JSON as a value tree (objects become dicts, arrays lists).
Py json_to_py(const nlohmann::json& j);

}  // namespace megaton::checkpoint
