#include "checkpoint/h5.h"

#include <cstring>

#include "core/error.h"

namespace megaton::checkpoint::h5 {

void Id::reset() {
  if (id_ >= 0 && closer_) closer_(id_);
  id_ = H5I_INVALID_HID;
}

void Id::close(const std::string& what) {
  if (id_ < 0) return;
  const herr_t rc = closer_(id_);
  id_ = H5I_INVALID_HID;
  check(rc, what);
}

void quiet_errors() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

namespace {
herr_t collect_error(unsigned n, const H5E_error2_t* e, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (!out->empty()) *out += "; ";
  *out += str(e->func_name ? e->func_name : "?", "(): ", e->desc ? e->desc : "");
  return 0;
}
}  // namespace

std::string error_stack() {
  std::string out;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &out);
  H5Eclear2(H5E_DEFAULT);
  return out.empty() ? "no HDF5 error details" : out;
}

hid_t check_id(hid_t id, const std::string& what) {
  if (id < 0) throw CheckpointError(str(what, ": ", error_stack()));
  return id;
}

void check(herr_t rc, const std::string& what) {
  if (rc < 0) throw CheckpointError(str(what, ": ", error_stack()));
}

namespace {
Id parallel_fapl(MPI_Comm comm, bool collective_metadata) {
  Id fapl(check_id(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"), H5Pclose);
  check(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL), "H5Pset_fapl_mpio");
  // Metadata reads and writes as collectives: one rank touches the disk, the others get the result.
  check(H5Pset_all_coll_metadata_ops(fapl, collective_metadata), "H5Pset_all_coll_metadata_ops");
  check(H5Pset_coll_metadata_write(fapl, true), "H5Pset_coll_metadata_write");
  return fapl;
}
}  // namespace

Id open_file_serial(const std::string& path, bool writable) {
  quiet_errors();
  return Id(check_id(H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT),
                     str(path, ": cannot open as an HDF5 checkpoint file (missing, truncated or corrupt)")),
            H5Fclose);
}

Id create_file_serial(const std::string& path) {
  quiet_errors();
  return Id(check_id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), str(path, ": cannot create")),
            H5Fclose);
}

Id open_file_parallel(const std::string& path, MPI_Comm comm, bool collective_metadata) {
  quiet_errors();
  Id fapl = parallel_fapl(comm, collective_metadata);
  return Id(check_id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl),
                     str(path, ": cannot open as an HDF5 checkpoint file (missing, truncated or corrupt)")),
            H5Fclose);
}

Id create_file_parallel(const std::string& path, MPI_Comm comm) {
  quiet_errors();
  Id fapl = parallel_fapl(comm, true);
  return Id(check_id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), str(path, ": cannot create")),
            H5Fclose);
}

void flush(hid_t file, const std::string& what) {
  check(H5Fflush(file, H5F_SCOPE_GLOBAL), what);
}

hid_t file_type(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32:
      return H5T_IEEE_F32LE;
    case torch::kFloat64:
      return H5T_IEEE_F64LE;
    case torch::kFloat16:
    case torch::kBFloat16:
      return H5T_STD_U16LE;
    case torch::kInt64:
      return H5T_STD_I64LE;
    case torch::kInt32:
      return H5T_STD_I32LE;
    case torch::kUInt8:
      return H5T_STD_U8LE;
    default:
      throw CheckpointError(str("checkpoint: dtype ", c10::toString(t), " cannot be stored"));
  }
}

hid_t mem_type(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32:
      return H5T_NATIVE_FLOAT;
    case torch::kFloat64:
      return H5T_NATIVE_DOUBLE;
    case torch::kFloat16:
    case torch::kBFloat16:
      return H5T_NATIVE_UINT16;
    case torch::kInt64:
      return H5T_NATIVE_INT64;
    case torch::kInt32:
      return H5T_NATIVE_INT32;
    case torch::kUInt8:
      return H5T_NATIVE_UINT8;
    default:
      throw CheckpointError(str("checkpoint: dtype ", c10::toString(t), " cannot be stored"));
  }
}

Id make_space(const std::vector<int64_t>& shape) {
  if (shape.empty()) return Id(check_id(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return Id(check_id(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "H5Screate_simple"),
            H5Sclose);
}

void select_box(hid_t space, const std::vector<int64_t>& offset, const std::vector<int64_t>& count) {
  if (offset.empty()) {
    check(H5Sselect_all(space), "H5Sselect_all");
    return;
  }
  for (int64_t c : count)
    if (c == 0) return select_none(space);
  std::vector<hsize_t> start(offset.begin(), offset.end()), cnt(count.begin(), count.end());
  check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr), "H5Sselect_hyperslab");
}

void select_none(hid_t space) {
  check(H5Sselect_none(space), "H5Sselect_none");
}

std::vector<int64_t> space_shape(hid_t space) {
  const int nd = H5Sget_simple_extent_ndims(space);
  check(nd, "H5Sget_simple_extent_ndims");
  std::vector<hsize_t> dims(nd);
  if (nd > 0) check(H5Sget_simple_extent_dims(space, dims.data(), nullptr), "H5Sget_simple_extent_dims");
  return std::vector<int64_t>(dims.begin(), dims.end());
}

bool exists(hid_t loc, const std::string& path) {
  // H5Lexists fails (rather than answering false) when an intermediate group is missing: walk the path.
  size_t pos = 0;
  while (true) {
    const size_t slash = path.find('/', pos);
    const std::string prefix = path.substr(0, slash);
    const htri_t e = H5Lexists(loc, prefix.c_str(), H5P_DEFAULT);
    if (e <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    if (slash == std::string::npos) return true;
    pos = slash + 1;
  }
}

Id open_dataset(hid_t file, const std::string& path) {
  return Id(check_id(H5Dopen2(file, path.c_str(), H5P_DEFAULT), str("cannot open dataset '", path, "'")), H5Dclose);
}

Id create_dataset(hid_t file, const std::string& path, const std::vector<int64_t>& shape, torch::ScalarType t) {
  Id lcpl(check_id(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate"), H5Pclose);
  check(H5Pset_create_intermediate_group(lcpl, 1), "H5Pset_create_intermediate_group");
  Id dcpl(check_id(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
  check(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "H5Pset_fill_time");
  check(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time");
  Id space = make_space(shape);
  return Id(check_id(H5Dcreate2(file, path.c_str(), file_type(t), space, lcpl, dcpl, H5P_DEFAULT),
                     str("cannot create dataset '", path, "'")),
            H5Dclose);
}

Id transfer_plist(bool parallel, bool collective) {
  Id dxpl(check_id(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate"), H5Pclose);
  if (parallel)
    check(H5Pset_dxpl_mpio(dxpl, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT), "H5Pset_dxpl_mpio");
  return dxpl;
}

bool has_attr(hid_t obj, const std::string& name) {
  const htri_t e = H5Aexists(obj, name.c_str());
  check(e, str("H5Aexists(", name, ")"));
  return e > 0;
}

void write_attr(hid_t obj, const std::string& name, const std::string& value) {
  Id type(check_id(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  check(H5Tset_size(type, value.empty() ? 1 : value.size()), "H5Tset_size");
  check(H5Tset_strpad(type, H5T_STR_NULLPAD), "H5Tset_strpad");
  Id space(check_id(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  Id attr(check_id(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT),
                   str("cannot create attribute '", name, "'")),
          H5Aclose);
  std::string buf = value.empty() ? std::string(1, '\0') : value;
  check(H5Awrite(attr, type, buf.data()), str("cannot write attribute '", name, "'"));
}

void write_attr(hid_t obj, const std::string& name, int64_t value) {
  Id space(check_id(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  Id attr(check_id(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT),
                   str("cannot create attribute '", name, "'")),
          H5Aclose);
  check(H5Awrite(attr, H5T_NATIVE_INT64, &value), str("cannot write attribute '", name, "'"));
}

std::string read_attr_string(hid_t obj, const std::string& name, const std::string& where) {
  if (!has_attr(obj, name)) throw CheckpointError(str(where, ": attribute '", name, "' is missing"));
  Id attr(check_id(H5Aopen(obj, name.c_str(), H5P_DEFAULT), str(where, ": attribute '", name, "'")), H5Aclose);
  Id type(check_id(H5Aget_type(attr), "H5Aget_type"), H5Tclose);
  if (H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) > 0)
    throw CheckpointError(str(where, ": attribute '", name, "' is not a fixed-length string"));
  const size_t n = H5Tget_size(type);
  std::string buf(n, '\0');
  check(H5Aread(attr, type, buf.data()), str(where, ": attribute '", name, "'"));
  buf.resize(std::strlen(buf.c_str()));
  return buf;
}

int64_t read_attr_int(hid_t obj, const std::string& name, const std::string& where) {
  if (!has_attr(obj, name)) throw CheckpointError(str(where, ": attribute '", name, "' is missing"));
  Id attr(check_id(H5Aopen(obj, name.c_str(), H5P_DEFAULT), str(where, ": attribute '", name, "'")), H5Aclose);
  Id type(check_id(H5Aget_type(attr), "H5Aget_type"), H5Tclose);
  if (H5Tget_class(type) != H5T_INTEGER)
    throw CheckpointError(str(where, ": attribute '", name, "' is not an integer"));
  int64_t v = 0;
  check(H5Aread(attr, H5T_NATIVE_INT64, &v), str(where, ": attribute '", name, "'"));
  return v;
}

void write_text(hid_t file, const std::string& path, const std::string& text, bool writer, hid_t xfer) {
  Id ds = create_dataset(file, path, {static_cast<int64_t>(text.size())}, torch::kUInt8);
  write_attr(ds, "content_type", std::string("application/json"));
  Id fspace(check_id(H5Dget_space(ds), "H5Dget_space"), H5Sclose);
  Id mspace = make_space({static_cast<int64_t>(std::max<size_t>(text.size(), 1))});
  if (writer && !text.empty()) {
    check(H5Sselect_all(fspace), "H5Sselect_all");
    select_box(mspace, {0}, {static_cast<int64_t>(text.size())});
  } else {
    select_none(fspace);
    select_none(mspace);
  }
  const char dummy = 0;
  check(H5Dwrite(ds, H5T_NATIVE_UINT8, mspace, fspace, xfer, text.empty() ? &dummy : text.data()),
        str("cannot write '", path, "'"));
}

std::string read_text(hid_t file, const std::string& path, const std::string& where) {
  if (!exists(file, path)) throw CheckpointError(str(where, ": '", path, "' is missing"));
  Id ds = open_dataset(file, path);
  Id space(check_id(H5Dget_space(ds), "H5Dget_space"), H5Sclose);
  const auto shape = space_shape(space);
  if (shape.size() != 1) throw CheckpointError(str(where, ": '", path, "' is not a 1-D byte array"));
  std::string text(static_cast<size_t>(shape[0]), '\0');
  if (!text.empty())
    check(H5Dread(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()),
          str(where, ": reading '", path, "'"));
  return text;
}

}  // namespace megaton::checkpoint::h5
