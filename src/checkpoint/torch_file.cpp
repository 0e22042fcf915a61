#include "checkpoint/torch_file.h"

#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint/pickler.h"
#include "checkpoint/unpickler.h"
#include "core/error.h"

namespace fs = std::filesystem;

namespace megaton::checkpoint {

Py load_torch_file(const std::string& path) {
  MEGATON_CHECK(fs::is_regular_file(path), CheckpointError, path, ": no such file");
  {
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {0, 0, 0, 0};
    in.read(magic, 4);
    MEGATON_CHECK(in.gcount() == 4, CheckpointError, path, ": too short for a torch.save file");
    if (!(magic[0] == 'P' && magic[1] == 'K')) {
      const bool legacy = static_cast<uint8_t>(magic[0]) == 0x80;
      throw CheckpointError(
          str(path, ": not a torch.save zip archive",
              legacy ? " (torch's legacy pre-1.6 format: load and re-save it with torch >= 1.6)" : ""));
    }
  }
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    MEGATON_CHECK(reader.hasRecord("data.pkl"), CheckpointError, path,
                  ": a zip archive without data.pkl (a TorchScript module or another zip, not a torch.save file)");
    auto [pkl, pkl_size] = reader.getRecord("data.pkl");
    const std::string data(static_cast<const char*>(pkl.get()), pkl_size);
    StorageLoader storages = [&](const std::string& key, torch::ScalarType dtype, int64_t numel) {
      const std::string rec = "data/" + key;
      MEGATON_CHECK(reader.hasRecord(rec), CheckpointError, path, ": storage record '", rec, "' is missing");
      auto [ptr, size] = reader.getRecord(rec);
      const int64_t esize = static_cast<int64_t>(c10::elementSize(dtype));
      MEGATON_CHECK(numel >= 0 && static_cast<int64_t>(size) == numel * esize, CheckpointError, path, ": storage '",
                    rec, "' holds ", size, " bytes, expected ", numel, " x ", esize);
      torch::Tensor t = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
      if (size > 0) std::memcpy(t.data_ptr(), ptr.get(), size);
      return t;
    };
    return unpickle(data, storages, path);
  } catch (const c10::Error& e) {  // the zip reader: truncated or damaged archive
    std::string msg = e.what_without_backtrace();
    if (const auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    throw CheckpointError(str(path, ": unreadable torch archive (truncated or damaged?): ", msg));
  }
}

void save_torch_file(const std::string& path, const Py& v) {
  const Pickled p = pickle(v);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  MEGATON_CHECK(fd >= 0, RuntimeError, tmp, ": cannot create (", std::strerror(errno), ")");
  bool ok = true;
  int err = 0;
  try {
    caffe2::serialize::PyTorchStreamWriter w([&](const void* buf, size_t n) -> size_t {
      const char* c = static_cast<const char*>(buf);
      size_t done = 0;
      while (ok && done < n) {
        const ssize_t r = ::write(fd, c + done, n - done);
        if (r < 0) {
          if (errno == EINTR) continue;
          ok = false;
          err = errno;
          break;
        }
        done += static_cast<size_t>(r);
      }
      return n;  // a failure is reported after the archive is finished
    });
    w.writeRecord("data.pkl", p.data.data(), p.data.size());
    w.writeRecord("byteorder", "little", 6);
    for (size_t k = 0; k < p.storages.size(); ++k) {
      const auto& t = p.storages[k];
      w.writeRecord("data/" + std::to_string(k), t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
    }
    w.writeEndOfFile();
  } catch (const c10::Error& e) {
    ::close(fd);
    std::remove(tmp.c_str());
    throw RuntimeError(str(path, ": writing the torch archive failed: ", e.what_without_backtrace()));
  }
  if (ok && ::fsync(fd) != 0) {
    ok = false;
    err = errno;
  }
  ::close(fd);
  if (!ok) {
    std::remove(tmp.c_str());
    throw RuntimeError(str(path, ": write failed (", std::strerror(err), ")"));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  MEGATON_CHECK(!ec, RuntimeError, path, ": cannot rename the written file into place (", ec.message(), ")");
}

}  // namespace megaton::checkpoint
