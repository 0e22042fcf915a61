#include "checkpoint/pickler.h"

#include <cstring>

#include "checkpoint/torch_storage.h"
#include "core/error.h"

namespace megaton::checkpoint {

namespace {

using K = PyNode::Kind;

class Writer {
 public:
  Pickled out;

  void run(const Py& v) {
    op(0x80);
    op(2);  // PROTO 2
    value(v);
    op('.');
  }

 private:
  void op(uint8_t c) { out.data.push_back(static_cast<char>(c)); }
  template <typename T>
  void raw(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.data.append(b, sizeof(T));
  }
  void text(const std::string& s) {
    op('X');
    raw<uint32_t>(static_cast<uint32_t>(s.size()));
    out.data += s;
  }
  void global(const std::string& qualname) {
    const size_t dot = qualname.rfind('.');
    MEGATON_ASSERT(dot != std::string::npos, "pickle: global '", qualname, "' has no module");
    op('c');
    out.data += qualname.substr(0, dot) + "\n" + qualname.substr(dot + 1) + "\n";
  }
  void integer(int64_t i) {
    if (i >= 0 && i < 256) {
      op('K');
      raw<uint8_t>(static_cast<uint8_t>(i));
    } else if (i >= INT32_MIN && i <= INT32_MAX) {
      op('J');
      raw<int32_t>(static_cast<int32_t>(i));
    } else {
      op(0x8a);
      op(8);
      raw<int64_t>(i);
    }
  }
  void tuple(const std::vector<Py>& items) {
    op('(');
    for (const auto& x : items) value(x);
    op('t');
  }
  void tensor(const torch::Tensor& t0) {
    const torch::Tensor t = t0.detach().to(torch::kCPU).contiguous();
    const int64_t key = static_cast<int64_t>(out.storages.size());
    out.storages.push_back(t);
    global("torch._utils._rebuild_tensor_v2");
    op('(');
    op('(');  // persistent id ('storage', class, key, location, numel)
    text("storage");
    global(storage_class(t.scalar_type()));
    text(std::to_string(key));
    text("cpu");
    integer(t.numel());
    op('t');
    op('Q');
    integer(0);
    op('(');
    for (auto d : t.sizes()) integer(d);
    op('t');
    op('(');
    for (auto s : t.strides()) integer(s);
    op('t');
    op(0x89);  // requires_grad False
    global("collections.OrderedDict");
    op(')');
    op('R');
    op('t');
    op('R');
  }

  void value(const Py& v) {
    if (!v) {
      op('N');
      return;
    }
    switch (v->kind) {
      case K::kNone:
        op('N');
        break;
      case K::kBool:
        op(v->b ? 0x88 : 0x89);
        break;
      case K::kInt:
        integer(v->i);
        break;
      case K::kFloat: {
        op('G');
        uint64_t u;
        std::memcpy(&u, &v->f, 8);
        for (int k = 7; k >= 0; --k) op(static_cast<uint8_t>(u >> (8 * k)));
        break;
      }
      case K::kStr:
        text(v->s);
        break;
      case K::kBytes: {  // protocol 2 has no bytes opcode: torch.save writes _codecs.encode(latin-1 text)
        std::string utf8;
        for (unsigned char c : v->s) {
          if (c < 0x80) {
            utf8.push_back(static_cast<char>(c));
          } else {
            utf8.push_back(static_cast<char>(0xc0 | (c >> 6)));
            utf8.push_back(static_cast<char>(0x80 | (c & 0x3f)));
          }
        }
        global("_codecs.encode");
        op('(');
        text(utf8);
        text("latin1");
        op('t');
        op('R');
        break;
      }
      case K::kList:
        op(']');
        if (!v->items.empty()) {
          op('(');
          for (const auto& x : v->items) value(x);
          op('e');
        }
        break;
      case K::kTuple:
        tuple(v->items);
        break;
      case K::kDict:
        op('}');
        if (!v->dict.empty()) {
          op('(');
          for (const auto& [k, x] : v->dict) {
            value(k);
            value(x);
          }
          op('u');
        }
        break;
      case K::kTensor:
        tensor(v->tensor);
        break;
      case K::kRecord:
        global(v->s);
        tuple(v->items);
        op(v->s == "argparse.Namespace" ? 0x81 : 'R');  // NEWOBJ, as pickle writes a plain class instance
        if (v->state) {
          value(v->state);
          op('b');
        }
        break;
      case K::kGlobal:
        global(v->s);
        break;
    }
  }
};

}  // namespace

Pickled pickle(const Py& v) {
  Writer w;
  w.run(v);
  return std::move(w.out);
}

}  // namespace megaton::checkpoint
