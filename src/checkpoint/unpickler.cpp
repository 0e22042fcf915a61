#include "checkpoint/unpickler.h"

#include <cstring>
#include <map>
#include <set>

#include "checkpoint/torch_storage.h"
#include "core/error.h"

namespace megaton::checkpoint {

namespace {

using K = PyNode::Kind;

/// Globals that are values, not constructors: torch dtypes and layouts.
bool is_plain_global(const std::string& g) {
  static const std::set<std::string> dtypes = {"torch.float32", "torch.float", "torch.float64",  "torch.double",
                                               "torch.float16", "torch.half",  "torch.bfloat16", "torch.int64",
                                               "torch.long",    "torch.int32", "torch.int",      "torch.int16",
                                               "torch.int8",    "torch.uint8", "torch.bool",     "torch.strided"};
  return dtypes.count(g) || storage_dtype(g).has_value();
}

/// Constructors with a meaning megaton implements.
bool is_known_callable(const std::string& g) {
  static const std::set<std::string> known = {"collections.OrderedDict",
                                              "torch._utils._rebuild_tensor_v2",
                                              "torch._utils._rebuild_parameter",
                                              "torch._utils._rebuild_tensor",
                                              "_codecs.encode",
                                              "builtins.set",
                                              "builtins.frozenset",
                                              "builtins.slice",
                                              "torch.device",
                                              "__builtin__.set",
                                              "__builtin__.frozenset",
                                              "builtins.getattr",
                                              "__builtin__.getattr",
                                              "torch.Size",
                                              "argparse.Namespace",
                                              "numpy.core.multiarray._reconstruct",
                                              "numpy._core.multiarray._reconstruct",
                                              "numpy.ndarray",
                                              "numpy.dtype",
                                              "numpy.core.multiarray.scalar",
                                              "numpy._core.multiarray.scalar",
                                              "copy_reg._reconstructor",
                                              "copyreg._reconstructor",
                                              "builtins.object",
                                              "__builtin__.object",
                                              "types.SimpleNamespace"};
  return known.count(g) > 0;
}

/// Inert records: classes of Megatron and DeepSpeed (enums, configs, loss scalers, namedtuples), kept as data.
bool is_record_class(const std::string& g) {
  return g.rfind("megatron.", 0) == 0 || g.rfind("deepspeed.", 0) == 0 || g.rfind("enum.", 0) == 0;
}

torch::ScalarType numpy_dtype(const std::string& code, const std::string& where) {
  static const std::map<std::string, torch::ScalarType> m = {
      {"f4", torch::kFloat32}, {"f8", torch::kFloat64}, {"f2", torch::kFloat16}, {"i8", torch::kInt64},
      {"i4", torch::kInt32},   {"i2", torch::kInt16},   {"i1", torch::kInt8},    {"u1", torch::kUInt8},
      {"u4", torch::kInt64},   {"b1", torch::kBool}};
  auto it = m.find(code);
  MEGATON_CHECK(it != m.end(), CheckpointError, where, ": numpy dtype '", code, "' is not supported");
  return it->second;
}

class Machine {
 public:
  Machine(const std::string& data, const StorageLoader& storages, const std::string& where)
      : d_(data), storages_(storages), where_(where) {}

  Py run() {
    while (true) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80:
          byte();
          break;  // PROTO
        case 0x95:
          fixed<uint64_t>();
          break;     // FRAME
        case '.': {  // STOP
          MEGATON_CHECK(stack_.size() == 1, CheckpointError, where_, ": malformed pickle (", stack_.size(),
                        " values on the stack at STOP)");
          return stack_.back();
        }
        case '(':
          marks_.push_back(stack_.size());
          break;  // MARK
        case '0':
          pop();
          break;  // POP
        case '1':
          pop_mark();
          break;  // POP_MARK
        case '2':
          push(top());
          break;  // DUP
        case 'N':
          push(PyNode::none());
          break;
        case 0x88:
          push(PyNode::boolean(true));
          break;
        case 0x89:
          push(PyNode::boolean(false));
          break;
        case 'J':
          push(PyNode::integer(fixed<int32_t>()));
          break;  // BININT
        case 'K':
          push(PyNode::integer(fixed<uint8_t>()));
          break;  // BININT1
        case 'M':
          push(PyNode::integer(fixed<uint16_t>()));
          break;  // BININT2
        case 0x8a:
          push(PyNode::integer(long_int(fixed<uint8_t>())));
          break;  // LONG1
        case 0x8b:
          push(PyNode::integer(long_int(fixed<int32_t>())));
          break;  // LONG4
        case 'I':
          push(text_int());
          break;     // INT (protocol 0)
        case 'G': {  // BINFLOAT (big-endian)
          uint64_t u = 0;
          for (int k = 0; k < 8; ++k) u = (u << 8) | byte();
          double x;
          std::memcpy(&x, &u, 8);
          push(PyNode::real(x));
          break;
        }
        case 'X':
          push(PyNode::string(bytes(fixed<uint32_t>())));
          break;  // BINUNICODE
        case 0x8c:
          push(PyNode::string(bytes(fixed<uint8_t>())));
          break;  // SHORT_BINUNICODE
        case 0x8d:
          push(PyNode::string(bytes(fixed<uint64_t>())));
          break;  // BINUNICODE8
        case 'T':
          push(PyNode::string(bytes(fixed<uint32_t>())));
          break;  // BINSTRING (py2 str)
        case 'U':
          push(PyNode::string(bytes(fixed<uint8_t>())));
          break;  // SHORT_BINSTRING
        case 'B':
          push(PyNode::bytes(bytes(fixed<uint32_t>())));
          break;  // BINBYTES
        case 'C':
          push(PyNode::bytes(bytes(fixed<uint8_t>())));
          break;  // SHORT_BINBYTES
        case 0x8e:
          push(PyNode::bytes(bytes(fixed<uint64_t>())));
          break;  // BINBYTES8
        case 0x96:
          push(PyNode::bytes(bytes(fixed<uint64_t>())));
          break;  // BYTEARRAY8
        case ']':
          push(PyNode::list());
          break;  // EMPTY_LIST
        case 'l':
          push(PyNode::list(adopt_all(pop_mark())));
          break;     // LIST
        case 'a': {  // APPEND
          Py v = pop();
          append(seq_of(top(), "APPEND"), {v});
          break;
        }
        case 'e': {  // APPENDS
          auto vs = pop_mark();
          const Py dst = seq_of(top(), "APPENDS");
          append(dst, vs);
          break;
        }
        case ')':
          push(PyNode::tuple());
          break;  // EMPTY_TUPLE
        case 't':
          push(PyNode::tuple(adopt_all(pop_mark())));
          break;
        case 0x85:
          push(PyNode::tuple(adopt_all({pop()})));
          break;      // TUPLE1
        case 0x86: {  // TUPLE2
          Py b = pop(), a = pop();
          push(PyNode::tuple(adopt_all({a, b})));
          break;
        }
        case 0x87: {  // TUPLE3
          Py c = pop(), b = pop(), a = pop();
          push(PyNode::tuple(adopt_all({a, b, c})));
          break;
        }
        case '}':
          push(PyNode::new_dict());
          break;     // EMPTY_DICT
        case 'd': {  // DICT
          Py d = PyNode::new_dict();
          set_items(d, pop_mark());
          push(d);
          break;
        }
        case 's': {  // SETITEM
          Py v = pop(), k = pop();
          set_items(top(), {k, v});
          break;
        }
        case 'u': {  // SETITEMS
          auto kv = pop_mark();
          set_items(top(), kv);
          break;
        }
        case 0x8f:
          push(PyNode::list());
          break;      // EMPTY_SET (a list: order and content are what matter here)
        case 0x90: {  // ADDITEMS
          auto vs = pop_mark();
          const Py dst = seq_of(top(), "ADDITEMS");
          append(dst, vs);
          break;
        }
        case 0x91:
          push(PyNode::list(adopt_all(pop_mark())));
          break;     // FROZENSET
        case 'c': {  // GLOBAL "module\nname\n"
          const std::string module = line(), name = line();
          push(resolve(module + "." + name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          Py name = pop(), module = pop();
          push(resolve(module->as_str(where_) + "." + name->as_str(where_)));
          break;
        }
        case 'R': {  // REDUCE
          Py args = pop(), fn = pop();
          push(call(fn, args));
          break;
        }
        case 0x81: {  // NEWOBJ
          Py args = pop(), cls = pop();
          push(call(cls, args));
          break;
        }
        case 0x92: {  // NEWOBJ_EX
          pop();      // kwargs
          Py args = pop(), cls = pop();
          push(call(cls, args));
          break;
        }
        case 'b': {  // BUILD
          Py st = pop();
          build(top(), st);
          break;
        }
        case 'Q': {  // BINPERSID
          Py pid = pop();
          push(persistent(pid));
          break;
        }
        case 'q':
          memo(fixed<uint8_t>());
          break;  // BINPUT
        case 'r':
          memo(fixed<uint32_t>());
          break;  // LONG_BINPUT
        case 0x94:
          memo(memo_.size());
          break;  // MEMOIZE
        case 'p':
          memo(text_index());
          break;  // PUT
        case 'h':
          push(recall(fixed<uint8_t>()));
          break;  // BINGET
        case 'j':
          push(recall(fixed<uint32_t>()));
          break;  // LONG_BINGET
        case 'g':
          push(recall(text_index()));
          break;  // GET
        default:
          throw CheckpointError(str(where_, ": pickle opcode 0x", std::hex, int(op), std::dec, " at byte ", pos_ - 1,
                                    " is not supported (not a torch.save file, or a damaged one)"));
      }
    }
  }

 private:
  uint8_t byte() {
    need(1);
    return static_cast<uint8_t>(d_[pos_++]);
  }
  void need(size_t n) {
    MEGATON_CHECK(n <= d_.size() - pos_, CheckpointError, where_, ": the pickle ends early at byte ", pos_,
                  " (truncated file?)");
  }
  template <typename T>
  T fixed() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, d_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string bytes(uint64_t n) {
    need(n);
    std::string s = d_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string line() {
    const size_t e = d_.find('\n', pos_);
    MEGATON_CHECK(e != std::string::npos, CheckpointError, where_, ": the pickle ends early (truncated file?)");
    std::string s = d_.substr(pos_, e - pos_);
    pos_ = e + 1;
    return s;
  }
  int64_t long_int(int64_t n) {
    MEGATON_CHECK(n >= 0 && n <= 8, CheckpointError, where_, ": an integer of ", n, " bytes does not fit 64 bits");
    const std::string b = bytes(n);
    uint64_t u = 0;
    for (int64_t k = n - 1; k >= 0; --k) u = (u << 8) | static_cast<uint8_t>(b[k]);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80)) u |= ~uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<int64_t>(u);
  }
  uint64_t text_index() {
    const std::string s = line();
    MEGATON_CHECK(!s.empty() && s.size() < 12 && s.find_first_not_of("0123456789") == std::string::npos,
                  CheckpointError, where_, ": malformed memo index '", s, "' in the pickle");
    return std::stoull(s);
  }
  Py text_int() {
    const std::string s = line();
    if (s == "01") return PyNode::boolean(true);
    if (s == "00") return PyNode::boolean(false);
    try {
      return PyNode::integer(std::stoll(s));
    } catch (const std::exception&) {
      throw CheckpointError(str(where_, ": malformed INT '", s, "' in the pickle"));
    }
  }

  void push(Py v) { stack_.push_back(std::move(v)); }
  Py pop() {
    MEGATON_CHECK(!stack_.empty() && (marks_.empty() || stack_.size() > marks_.back()), CheckpointError, where_,
                  ": malformed pickle (stack underflow at byte ", pos_, ")");
    Py v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  const Py& top() {
    MEGATON_CHECK(!stack_.empty(), CheckpointError, where_, ": malformed pickle (empty stack at byte ", pos_, ")");
    return stack_.back();
  }
  std::vector<Py> pop_mark() {
    MEGATON_CHECK(!marks_.empty(), CheckpointError, where_, ": malformed pickle (no MARK at byte ", pos_, ")");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Py> v(stack_.begin() + m, stack_.end());
    stack_.resize(m);
    return v;
  }
  void memo(uint64_t k) {
    MEGATON_CHECK(k <= memo_.size(), CheckpointError, where_, ": malformed pickle (memo index ", k, " skips ahead)");
    if (memo_.size() <= k) memo_.resize(k + 1);
    memo_[k] = top();
  }
  Py recall(uint64_t k) {
    MEGATON_CHECK(k < memo_.size() && memo_[k], CheckpointError, where_, ": malformed pickle (memo ", k,
                  " used before it is set)");
    return memo_[k];
  }
  Py seq_of(const Py& p, const char* op) {
    MEGATON_CHECK(p->is(K::kList), CheckpointError, where_, ": malformed pickle (", op, " on a ", p->kind_name(), ")");
    return p;
  }
  /// A value becomes part of another: from now on it is not modified (so no structure can contain itself).
  static std::vector<Py> adopt_all(std::vector<Py> vs) {
    for (const auto& v : vs) v->owned = true;
    return vs;
  }
  void check_mutable(const Py& target, const std::vector<Py>& incoming, const char* op) {
    MEGATON_CHECK(!target->owned, CheckpointError, where_, ": malformed pickle (", op,
                  " modifies a value already held by another: a recursive structure, which checkpoints do not hold)");
    for (const auto& v : incoming)
      MEGATON_CHECK(v != target, CheckpointError, where_, ": malformed pickle (", op, " puts a value into itself)");
  }
  void append(const Py& list, const std::vector<Py>& vs) {
    check_mutable(list, vs, "APPEND");
    adopt_all(vs);
    list->items.insert(list->items.end(), vs.begin(), vs.end());
  }
  void set_items(const Py& d, const std::vector<Py>& kv) {
    MEGATON_CHECK(kv.size() % 2 == 0, CheckpointError, where_, ": malformed pickle (odd SETITEMS)");
    // A record (argparse.Namespace built by NEWOBJ, then items) keeps them in its state.
    Py target = d;
    if (d->is(K::kRecord)) {
      if (!d->state) d->state = PyNode::new_dict();
      target = d->state;
    }
    MEGATON_CHECK(target->is(K::kDict), CheckpointError, where_, ": malformed pickle (SETITEMS on a ",
                  target->kind_name(), ")");
    check_mutable(d, kv, "SETITEMS");
    check_mutable(target, kv, "SETITEMS");
    adopt_all(kv);
    for (size_t k = 0; k < kv.size(); k += 2) {
      bool replaced = false;
      if (kv[k]->is(K::kStr))
        for (auto& [key, v] : target->dict)
          if (key->is(K::kStr) && key->s == kv[k]->s) {
            v = kv[k + 1];
            replaced = true;
          }
      if (!replaced) target->dict.emplace_back(kv[k], kv[k + 1]);
    }
  }

  Py resolve(const std::string& g) {
    if (is_plain_global(g) || is_known_callable(g) || is_record_class(g)) return PyNode::global(g);
    throw CheckpointError(str(where_, ": the pickle refers to '", g,
                              "', which megaton does not read (it reads tensors, dicts, argparse.Namespace, numpy "
                              "RNG states and Megatron/DeepSpeed records; it never runs pickled code)"));
  }

  Py persistent(const Py& pid) {
    const auto& t = pid->as_seq(where_ + ": persistent id");
    MEGATON_CHECK(t.size() >= 5 && t[0]->is(K::kStr) && t[0]->s == "storage" && t[1]->is(K::kGlobal), CheckpointError,
                  where_, ": a persistent id that is not a torch storage");
    const std::string& key = t[2]->as_str(where_ + ": storage key");
    auto it = storage_memo_.find(key);
    if (it != storage_memo_.end()) return it->second;
    const auto dtype = storage_dtype(t[1]->s);
    MEGATON_CHECK(dtype, CheckpointError, where_, ": storage type '", t[1]->s, "' is not supported");
    Py v = PyNode::of_tensor(storages_(key, *dtype, t[4]->as_int(where_ + ": storage size")));
    storage_memo_[key] = v;
    return v;
  }

  torch::Tensor rebuild_tensor(const std::vector<Py>& a) {
    MEGATON_CHECK(a.size() >= 4, CheckpointError, where_, ": _rebuild_tensor_v2 with ", a.size(), " arguments");
    const torch::Tensor& storage = a[0]->as_tensor(where_ + ": tensor storage");
    MEGATON_CHECK(storage.dim() == 1 && storage.is_contiguous() && storage.storage_offset() == 0, CheckpointError,
                  where_, ": a tensor built over something other than a storage");
    const int64_t offset = a[1]->as_int(where_ + ": storage offset");
    MEGATON_CHECK(offset >= 0, CheckpointError, where_, ": negative storage offset");
    std::vector<int64_t> size, stride;
    for (const auto& x : a[2]->as_seq(where_ + ": tensor size")) size.push_back(x->as_int(where_));
    for (const auto& x : a[3]->as_seq(where_ + ": tensor stride")) stride.push_back(x->as_int(where_));
    MEGATON_CHECK(size.size() == stride.size(), CheckpointError, where_, ": tensor size and stride differ in rank");
    int64_t last = offset;
    bool empty = false;
    for (size_t k = 0; k < size.size(); ++k) {
      MEGATON_CHECK(size[k] >= 0 && stride[k] >= 0, CheckpointError, where_, ": negative tensor size or stride");
      if (size[k] == 0) empty = true;
      int64_t reach = 0;
      MEGATON_CHECK(!__builtin_mul_overflow(size[k] > 0 ? size[k] - 1 : 0, stride[k], &reach) &&
                        !__builtin_add_overflow(last, reach, &last),
                    CheckpointError, where_, ": a tensor's size and stride overflow");
    }
    if (empty) last = -1;
    MEGATON_CHECK(offset >= 0 && last < storage.numel(), CheckpointError, where_, ": a tensor view reaches element ",
                  last, " of a storage of ", storage.numel());
    return storage.as_strided(size, stride, offset);
  }

  static std::string latin1(const std::string& utf8) {  // _codecs.encode(s, 'latin1') of a pickled bytes object
    std::string out;
    for (size_t k = 0; k < utf8.size(); ++k) {
      const auto c = static_cast<uint8_t>(utf8[k]);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
      } else if ((c & 0xe0) == 0xc0 && k + 1 < utf8.size()) {
        out.push_back(static_cast<char>(((c & 0x1f) << 6) | (static_cast<uint8_t>(utf8[++k]) & 0x3f)));
      } else {
        throw CheckpointError("a latin-1 byte string holds a character above U+00FF");
      }
    }
    return out;
  }

  Py call(const Py& fn, const Py& args) {
    MEGATON_CHECK(fn->is(K::kGlobal), CheckpointError, where_, ": the pickle calls a ", fn->kind_name(),
                  " (only known globals can be called)");
    const std::string& g = fn->s;
    const auto& a = args->as_seq(where_ + ": arguments of " + g);
    args->owned = true;
    adopt_all(a);
    if (g == "collections.OrderedDict") {
      Py d = PyNode::new_dict();
      if (!a.empty())
        for (const auto& kv : a[0]->as_seq(where_)) {
          const auto& p = kv->as_seq(where_);
          if (p.size() == 2) d->dict.emplace_back(p[0], p[1]);
        }
      return d;
    }
    if (g == "torch._utils._rebuild_tensor_v2" || g == "torch._utils._rebuild_tensor")
      return PyNode::of_tensor(rebuild_tensor(a));
    if (g == "torch._utils._rebuild_parameter") {
      MEGATON_CHECK(!a.empty(), CheckpointError, where_, ": _rebuild_parameter without data");
      return a[0];
    }
    if (g == "_codecs.encode") {
      MEGATON_CHECK(!a.empty(), CheckpointError, where_, ": _codecs.encode without arguments");
      return PyNode::bytes(latin1(a[0]->as_str(where_)));
    }
    if (g == "builtins.set" || g == "builtins.frozenset" || g == "__builtin__.set" || g == "__builtin__.frozenset")
      return PyNode::list(a.empty() ? std::vector<Py>{} : a[0]->as_seq(where_));
    if (g == "builtins.getattr" || g == "__builtin__.getattr") {
      // An enum member by name (Python >= 3.11 pickles enums so): only of a record class, and never looked up.
      MEGATON_CHECK(a.size() == 2 && a[0]->is(K::kGlobal) && is_record_class(a[0]->s) && a[1]->is(K::kStr),
                    CheckpointError, where_, ": the pickle calls getattr on something other than a Megatron or ",
                    "DeepSpeed enum");
      return PyNode::record(a[0]->s, {a[1]});
    }
    if (g == "torch.Size") return PyNode::tuple(a.empty() ? std::vector<Py>{} : a[0]->as_seq(where_));
    if (g == "torch.device") return PyNode::string(a.empty() ? "cpu" : a[0]->as_str(where_));
    if (g == "numpy.dtype") return PyNode::record(g, a);
    if (g == "numpy.core.multiarray.scalar" || g == "numpy._core.multiarray.scalar") return numpy_scalar(a);
    if (g == "numpy.core.multiarray._reconstruct" || g == "numpy._core.multiarray._reconstruct")
      return PyNode::record("numpy.ndarray");
    if (g == "copy_reg._reconstructor" || g == "copyreg._reconstructor") {
      MEGATON_CHECK(!a.empty() && a[0]->is(K::kGlobal), CheckpointError, where_, ": malformed _reconstructor");
      return PyNode::record(a[0]->s);
    }
    MEGATON_CHECK(!is_plain_global(g), CheckpointError, where_, ": the pickle calls '", g, "'");
    return PyNode::record(g, a);  // argparse.Namespace, Megatron/DeepSpeed records and enums
  }

  void build(const Py& obj, const Py& st) {
    if (obj->is(K::kDict)) return;  // an OrderedDict's attributes (state_dict()._metadata): not data
    check_mutable(obj, {st}, "BUILD");
    st->owned = true;
    if (obj->is(K::kRecord) && obj->s == "numpy.ndarray") {
      *obj = *numpy_array(st);
      return;
    }
    MEGATON_CHECK(obj->is(K::kRecord), CheckpointError, where_, ": BUILD on a ", obj->kind_name());
    // (state, slotstate) pairs: keep the instance dict.
    if (st->is(K::kTuple) && st->items.size() == 2 && st->items[0]->is(K::kDict)) {
      obj->state = st->items[0];
      return;
    }
    obj->state = st;
  }

  std::string dtype_code(const Py& dt, char* order) {
    MEGATON_CHECK(dt->is(K::kRecord) && dt->s == "numpy.dtype" && !dt->items.empty(), CheckpointError, where_,
                  ": a numpy array without a dtype");
    *order = '<';
    if (dt->state && dt->state->is(K::kTuple) && dt->state->items.size() > 1 && dt->state->items[1]->is(K::kStr) &&
        !dt->state->items[1]->s.empty())
      *order = dt->state->items[1]->s[0];
    return dt->items[0]->as_str(where_);
  }

  Py numpy_array(const Py& st) {  // state: (version, shape, dtype, is_fortran, raw data)
    const auto& s = st->as_seq(where_ + ": numpy array state");
    MEGATON_CHECK(s.size() == 5, CheckpointError, where_, ": numpy array state of ", s.size(), " items");
    std::vector<int64_t> shape;
    int64_t count = 1;
    for (const auto& x : s[1]->as_seq(where_)) {
      shape.push_back(x->as_int(where_));
      MEGATON_CHECK(shape.back() >= 0 && !__builtin_mul_overflow(count, shape.back(), &count) &&
                        count <= static_cast<int64_t>(s[4]->is(K::kBytes) ? s[4]->s.size() : 0),
                    CheckpointError, where_, ": a numpy array's shape does not match its data");
    }
    char order;
    const std::string code = dtype_code(s[2], &order);
    MEGATON_CHECK(order != '>', CheckpointError, where_, ": big-endian numpy arrays are not supported");
    MEGATON_CHECK(s[4]->is(K::kBytes), CheckpointError, where_, ": a numpy array of Python objects");
    const std::string& raw = s[4]->s;
    int64_t n = 1;
    for (auto d : shape) n *= d;
    if (code == "u4") {  // uint32 (the MT19937 key): widened to int64
      MEGATON_CHECK(static_cast<int64_t>(raw.size()) == 4 * n, CheckpointError, where_, ": numpy array data size");
      auto t = torch::empty({n}, torch::kInt64);
      for (int64_t k = 0; k < n; ++k) {
        uint32_t u;
        std::memcpy(&u, raw.data() + 4 * k, 4);
        t[k] = static_cast<int64_t>(u);
      }
      return PyNode::of_tensor(t.reshape(shape));
    }
    const auto dtype = numpy_dtype(code, where_);
    auto t = torch::empty(shape, dtype);
    MEGATON_CHECK(static_cast<int64_t>(raw.size()) == t.numel() * t.element_size(), CheckpointError, where_,
                  ": numpy array data size");
    std::memcpy(t.data_ptr(), raw.data(), raw.size());
    return PyNode::of_tensor(t);
  }

  Py numpy_scalar(const std::vector<Py>& a) {
    MEGATON_CHECK(a.size() == 2 && a[1]->is(K::kBytes), CheckpointError, where_, ": malformed numpy scalar");
    char order;
    const std::string code = dtype_code(a[0], &order);
    const std::string& raw = a[1]->s;
    auto as = [&](auto v) {
      MEGATON_CHECK(raw.size() == sizeof(v), CheckpointError, where_, ": numpy scalar size");
      std::memcpy(&v, raw.data(), sizeof(v));
      return v;
    };
    if (code == "f8") return PyNode::real(as(double{}));
    if (code == "f4") return PyNode::real(as(float{}));
    if (code == "i8") return PyNode::integer(as(int64_t{}));
    if (code == "i4") return PyNode::integer(as(int32_t{}));
    if (code == "u4") return PyNode::integer(as(uint32_t{}));
    if (code == "b1") return PyNode::boolean(as(uint8_t{}) != 0);
    throw CheckpointError(str(where_, ": numpy scalar of dtype '", code, "' is not supported"));
  }

  const std::string& d_;
  const StorageLoader& storages_;
  const std::string& where_;
  size_t pos_ = 0;
  std::vector<Py> stack_;
  std::vector<size_t> marks_;
  std::vector<Py> memo_;
  std::map<std::string, Py> storage_memo_;
};

}  // namespace

Py unpickle(const std::string& data, const StorageLoader& storages, const std::string& where) {
  try {
    return Machine(data, storages, where).run();
  } catch (const c10::Error& e) {  // a tensor operation refused what the pickle describes
    throw CheckpointError(str(where, ": malformed tensor in the pickle (", e.what_without_backtrace(), ")"));
  }
}

}  // namespace megaton::checkpoint
