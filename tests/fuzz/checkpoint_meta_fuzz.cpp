// libFuzzer target: a checkpoint file whose metadata is hostile. The input's first byte picks one of the metadata
// blobs (manifest, state, model_config, args, layout), the rest is its text; the other blobs and one small tensor are
// valid. The file is written serially, then opened with CheckpointFile and verified, as `megaton inspect` does:
// every malformed blob must be a CheckpointError or a reported problem, never a crash or an escaping JSON exception.
#include <string>

#include "checkpoint/crc.h"
#include "checkpoint/file.h"
#include "checkpoint/format.h"
#include "checkpoint/h5.h"
#include "core/error.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megaton;
  using namespace megaton::checkpoint;
  if (size == 0) return 0;
  static const char* kBlobs[] = {"manifest.json", "state.json", "model_config.json", "args.json", "layout.json"};
  const std::string chosen = kBlobs[data[0] % 5];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const float w[4] = {1, 2, 3, 4};
  const std::string manifest =
      "{\"format\":\"megaton-checkpoint\",\"format_version\":1,\"tensors\":{\"model/w\":"
      "{\"shape\":[2,2],\"dtype\":\"float32\",\"crc32\":" +
      std::to_string(crc32_bytes(w, sizeof w)) + ",\"partition_dim\":-1}}}";
  const std::string path = fuzz::scratch_dir() + "/model_optim.h5";
  try {
    {
      h5::Id file = h5::create_file_serial(path);
      h5::Id ds = h5::create_dataset(file, "model/w", {2, 2}, torch::kFloat32);
      h5::check(H5Dwrite(ds, h5::mem_type(torch::kFloat32), H5S_ALL, H5S_ALL, H5P_DEFAULT, w), "write");
      h5::write_attr(ds, "dtype", std::string("float32"));
      const std::string defaults[] = {manifest, "{}", "{}", "{}", "{\"tp\":1,\"pp\":1,\"dp\":1,\"world\":1}"};
      for (int i = 0; i < 5; ++i)
        h5::write_text(file, std::string("meta/") + kBlobs[i], kBlobs[i] == chosen ? text : defaults[i], true,
                       H5P_DEFAULT);
      h5::write_attr(file, "format", std::string(kFormatName));
      h5::write_attr(file, "format_version", int64_t{1});
      h5::write_attr(file, "iteration", int64_t{3});
      h5::write_attr(file, "complete", int64_t{1});
    }
    const CheckpointFile f(path);
    (void)f.verify();
    for (const auto& p : f.tensor_paths()) (void)f.read(p);
  } catch (const Error&) {
  }
  return 0;
}
