#include "checkpoint/py_value.h"

#include "core/error.h"

using nlohmann::json;

namespace megaton::checkpoint {

namespace {
Py make(PyNode::Kind k) {
  auto p = std::make_shared<PyNode>();
  p->kind = k;
  return p;
}
std::string suffix(const std::string& where) {
  return where.empty() ? "" : where + ": ";
}
}  // namespace

PyNode::~PyNode() {
  std::vector<Py> work;
  auto take = [&work](PyNode& n) {
    for (auto& c : n.items)
      if (c && c.use_count() == 1) work.push_back(std::move(c));
    for (auto& [k, v] : n.dict) {
      if (k && k.use_count() == 1) work.push_back(std::move(k));
      if (v && v.use_count() == 1) work.push_back(std::move(v));
    }
    if (n.state && n.state.use_count() == 1) work.push_back(std::move(n.state));
  };
  take(*this);
  while (!work.empty()) {
    Py p = std::move(work.back());
    work.pop_back();
    take(*p);
  }
}

Py PyNode::none() {
  return make(Kind::kNone);
}
Py PyNode::boolean(bool v) {
  Py p = make(Kind::kBool);
  p->b = v;
  return p;
}
Py PyNode::integer(int64_t v) {
  Py p = make(Kind::kInt);
  p->i = v;
  return p;
}
Py PyNode::real(double v) {
  Py p = make(Kind::kFloat);
  p->f = v;
  return p;
}
Py PyNode::string(std::string v) {
  Py p = make(Kind::kStr);
  p->s = std::move(v);
  return p;
}
Py PyNode::bytes(std::string v) {
  Py p = make(Kind::kBytes);
  p->s = std::move(v);
  return p;
}
Py PyNode::list(std::vector<Py> v) {
  Py p = make(Kind::kList);
  p->items = std::move(v);
  return p;
}
Py PyNode::tuple(std::vector<Py> v) {
  Py p = make(Kind::kTuple);
  p->items = std::move(v);
  return p;
}
Py PyNode::new_dict() {
  return make(Kind::kDict);
}
Py PyNode::of_tensor(torch::Tensor t) {
  Py p = make(Kind::kTensor);
  p->tensor = std::move(t);
  return p;
}
Py PyNode::record(std::string cls, std::vector<Py> args, Py state) {
  Py p = make(Kind::kRecord);
  p->s = std::move(cls);
  p->items = std::move(args);
  p->state = std::move(state);
  return p;
}
Py PyNode::global(std::string name) {
  Py p = make(Kind::kGlobal);
  p->s = std::move(name);
  return p;
}

const char* PyNode::kind_name() const {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "str";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kTensor:
      return "tensor";
    case Kind::kRecord:
      return "object";
    case Kind::kGlobal:
      return "global";
  }
  return "?";
}

Py PyNode::get(const std::string& key) const {
  if (kind == Kind::kRecord) return state ? state->get(key) : nullptr;
  if (kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : dict)
    if (k->kind == Kind::kStr && k->s == key) return v;
  return nullptr;
}

const Py PyNode::at(const std::string& key, const std::string& where) const {
  MEGATON_CHECK(kind == Kind::kDict || kind == Kind::kRecord, CheckpointError, suffix(where), "expected a dict with '",
                key, "', found ", kind_name());
  Py v = get(key);
  MEGATON_CHECK(v, CheckpointError, suffix(where), "no key '", key, "'");
  return v;
}

void PyNode::set(const std::string& key, Py v) {
  MEGATON_ASSERT(kind == Kind::kDict, "PyNode::set on a ", kind_name());
  for (auto& [k, old] : dict)
    if (k->kind == Kind::kStr && k->s == key) {
      old = std::move(v);
      return;
    }
  dict.emplace_back(string(key), std::move(v));
}

int64_t PyNode::as_int(const std::string& where) const {
  if (kind == Kind::kBool) return b ? 1 : 0;
  MEGATON_CHECK(kind == Kind::kInt, CheckpointError, suffix(where), "expected an int, found ", kind_name());
  return i;
}
double PyNode::as_float(const std::string& where) const {
  if (kind == Kind::kInt) return static_cast<double>(i);
  MEGATON_CHECK(kind == Kind::kFloat, CheckpointError, suffix(where), "expected a float, found ", kind_name());
  return f;
}
const std::string& PyNode::as_str(const std::string& where) const {
  MEGATON_CHECK(kind == Kind::kStr, CheckpointError, suffix(where), "expected a str, found ", kind_name());
  return s;
}
const torch::Tensor& PyNode::as_tensor(const std::string& where) const {
  MEGATON_CHECK(kind == Kind::kTensor, CheckpointError, suffix(where), "expected a tensor, found ", kind_name());
  return tensor;
}
const std::vector<Py>& PyNode::as_seq(const std::string& where) const {
  MEGATON_CHECK(kind == Kind::kList || kind == Kind::kTuple, CheckpointError, suffix(where),
                "expected a list or tuple, found ", kind_name());
  return items;
}

namespace {
json to_json(const Py& v, int depth) {
  if (!v) return nullptr;
  MEGATON_CHECK(depth < 256, CheckpointError, "a pickled value nests deeper than 256 levels");
  using K = PyNode::Kind;
  switch (v->kind) {
    case K::kNone:
      return nullptr;
    case K::kBool:
      return v->b;
    case K::kInt:
      return v->i;
    case K::kFloat:
      return v->f;
    case K::kStr:
      return v->s;
    case K::kBytes:
      return str("<", v->s.size(), " bytes>");
    case K::kList:
    case K::kTuple: {
      json a = json::array();
      for (const auto& x : v->items) a.push_back(to_json(x, depth + 1));
      return a;
    }
    case K::kDict: {
      json o = json::object();
      for (const auto& [k, x] : v->dict) {
        const std::string key = k->kind == K::kStr ? k->s : to_json(k, depth + 1).dump();
        o[key] = to_json(x, depth + 1);
      }
      return o;
    }
    case K::kTensor: {
      std::string shape;
      for (auto d : v->tensor.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      return megaton::str("<tensor ", c10::toString(v->tensor.scalar_type()), " [", shape, "]>");
    }
    case K::kRecord:
      if (v->state) return to_json(v->state, depth + 1);
      if (v->items.size() == 1) return to_json(v->items[0], depth + 1);
      return v->s;
    case K::kGlobal:
      return v->s;
  }
  return nullptr;
}
}  // namespace

json py_to_json(const Py& v) {
  return to_json(v, 0);
}

Py json_to_py(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return PyNode::none();
    case json::value_t::boolean:
      return PyNode::boolean(j.get<bool>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return PyNode::integer(j.get<int64_t>());
    case json::value_t::number_float:
      return PyNode::real(j.get<double>());
    case json::value_t::string:
      return PyNode::string(j.get<std::string>());
    case json::value_t::array: {
      Py l = PyNode::list();
      for (const auto& x : j) l->items.push_back(json_to_py(x));
      return l;
    }
    case json::value_t::object: {
      Py d = PyNode::new_dict();
      for (const auto& [k, x] : j.items()) d->dict.emplace_back(PyNode::string(k), json_to_py(x));
      return d;
    }
    default:
      return PyNode::none();
  }
}

}  // namespace megaton::checkpoint
