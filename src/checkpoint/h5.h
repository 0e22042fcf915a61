// Thin RAII layer over the HDF5 C API: owned ids, errors turned into CheckpointError carrying HDF5's own message,
// file opening (serial POSIX driver, or MPI-IO over a communicator), attributes, hyperslab selections, JSON blobs.
// HDF5 has no bfloat16/float16 type in 1.10: both are stored as 16-bit unsigned integers with a "dtype" attribute.
#pragma once
#include <hdf5.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace megaton::checkpoint::h5 {

/// Owns one hid_t and closes it with the matching H5?close.
class Id {
 public:
  using Closer = herr_t (*)(hid_t);
  Id() = default;
  Id(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Id() { reset(); }
  Id(Id&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
  Id& operator=(Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      closer_ = o.closer_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }
  bool valid() const { return id_ >= 0; }
  /// Closes now and reports failure (a failed H5Fclose means the data may not be on disk).
  void close(const std::string& what);
  void reset();
  /// Forgets the id without closing it. After a failed collective write the ranks' HDF5 states can disagree and a
  /// collective close could wait forever; the process is about to end with the error, so the handle is left open.
  void abandon() { id_ = H5I_INVALID_HID; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

/// Silences HDF5's automatic error printing (errors become exceptions with the stack's text instead).
void quiet_errors();
/// The current HDF5 error stack as one line: "H5Fopen(): unable to open file: ... truncated file: eof = ...".
std::string error_stack();
/// Throws CheckpointError("<what>: <error stack>") when id < 0; returns the id otherwise.
hid_t check_id(hid_t id, const std::string& what);
void check(herr_t rc, const std::string& what);

// ~~~ files ~~~
Id open_file_serial(const std::string& path, bool writable);
Id create_file_serial(const std::string& path);
/// Collective over `comm`: every rank opens/creates the same file through MPI-IO.
/// `collective_metadata`: every rank opens the same objects in the same order (required by the collective writer;
/// the independent reader opens only what it reads, so it passes false).
Id open_file_parallel(const std::string& path, MPI_Comm comm, bool collective_metadata);
Id create_file_parallel(const std::string& path, MPI_Comm comm);
/// Collective H5Fflush (global scope).
void flush(hid_t file, const std::string& what);

// ~~~ types and spaces ~~~
/// File type of a stored dtype (little-endian; 16-bit floats as U16LE) and the matching in-memory type.
hid_t file_type(torch::ScalarType t);
hid_t mem_type(torch::ScalarType t);
/// A simple dataspace of `shape` (scalar dataspace for an empty shape).
Id make_space(const std::vector<int64_t>& shape);
/// Selects the box offset/count in `space` (none when count has a zero, everything for a scalar space).
void select_box(hid_t space, const std::vector<int64_t>& offset, const std::vector<int64_t>& count);
void select_none(hid_t space);
std::vector<int64_t> space_shape(hid_t space);

// ~~~ objects ~~~
bool exists(hid_t loc, const std::string& path);
Id open_dataset(hid_t file, const std::string& path);
/// Creates a contiguous dataset (intermediate groups created, no fill) of `shape` and dtype `t`.
Id create_dataset(hid_t file, const std::string& path, const std::vector<int64_t>& shape, torch::ScalarType t);
/// Transfer property list: collective or independent MPI-IO on a parallel file; plain on a serial one.
Id transfer_plist(bool parallel, bool collective);

// ~~~ attributes (every call is collective on a parallel file; all ranks pass the same values) ~~~
bool has_attr(hid_t obj, const std::string& name);
void write_attr(hid_t obj, const std::string& name, const std::string& value);
void write_attr(hid_t obj, const std::string& name, int64_t value);
std::string read_attr_string(hid_t obj, const std::string& name, const std::string& where);
int64_t read_attr_int(hid_t obj, const std::string& name, const std::string& where);

// ~~~ text blobs (JSON) stored as 1-D uint8 datasets ~~~
/// Creates `path` of text.size() bytes; only a rank with `writer` true writes the bytes (collective on parallel files).
void write_text(hid_t file, const std::string& path, const std::string& text, bool writer, hid_t xfer);
std::string read_text(hid_t file, const std::string& path, const std::string& where);

}  // namespace megaton::checkpoint::h5
