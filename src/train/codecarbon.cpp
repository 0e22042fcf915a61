#include "train/codecarbon.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <vector>

#include "core/device_memory.h"
#include "core/error.h"
#include "core/host_name.h"
#include "core/safe_file.h"

namespace megaton::train {

const char* const kCodecarbonColumns =
    "timestamp,project_name,run_id,duration,emissions,emissions_rate,cpu_power,gpu_power,ram_power,cpu_energy,"
    "gpu_energy,ram_energy,energy_consumed,country_name,country_iso_code,region,cloud_provider,cloud_region,os,"
    "python_version,cpu_count,cpu_model,gpu_count,gpu_model,longitude,latitude,ram_total_size,tracking_mode,on_cloud";

namespace {

namespace fs = std::filesystem;
constexpr double kJoulesPerKwh = 3.6e6;
constexpr double kRamWattsPerGb = 3.0 / 8.0;  // CodeCarbon's RAM model

// Shortest round-trip form, as pandas writes a float ("0.0123", "1e-05").
std::string num(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // a float column stays a float
  return s;
}

// RFC 4180 quoting of one written cell (rows are only written here; Debian packages no C++ CSV library).
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (const char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string local_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

std::string uuid4() {
  std::random_device rd;
  std::mt19937_64 g((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t a = g(), b = g();
  a = (a & ~0xF000ull) | 0x4000ull;                  // version 4
  b = (b & ~(0xC000ull << 48)) | (0x8000ull << 48);  // variant 10
  char s[40];
  std::snprintf(s, sizeof(s), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xFFFF), static_cast<unsigned>(a & 0xFFFF),
                static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFull));
  return s;
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "";
}

std::string os_name() {
  utsname u{};
  if (uname(&u) != 0) return "";
  return std::string(u.sysname) + "-" + u.release + "-" + u.machine;
}

// Bytes of `s` in a fixed-width uint8 tensor row (zero-padded), and back.
torch::Tensor fixed_bytes(const std::string& s, int64_t width) {
  torch::Tensor t = torch::zeros({width}, torch::kUInt8);
  std::memcpy(t.data_ptr<uint8_t>(), s.data(), std::min<size_t>(s.size(), width - 1));
  return t;
}
std::string from_bytes(const torch::Tensor& row) {
  const auto* p = reinterpret_cast<const char*>(row.data_ptr<uint8_t>());
  return std::string(p, strnlen(p, row.numel()));
}

// Appends `row` to `path`, writing the header first into a new file. A file with other columns is kept as
// path.bak[.N] (CodeCarbon renames it too) and a new one started.
void append_row(const std::string& path, const std::string& row) {
  refuse_symlink(path, "the CodeCarbon log");
  std::error_code ec;
  if (fs::exists(path, ec)) {
    std::ifstream in(path);
    std::string header;
    std::getline(in, header);
    if (header != kCodecarbonColumns) {
      std::string bak = path + ".bak";
      for (int n = 1; fs::exists(bak, ec); ++n) bak = path + ".bak." + std::to_string(n);
      fs::rename(path, bak, ec);
      if (ec) throw RuntimeError(str("cannot move ", path, " (other columns) aside to ", bak, ": ", ec.message()));
    }
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeError(str("cannot open ", path, ": ", std::strerror(errno)));
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && st.st_size == 0) text = std::string(kCodecarbonColumns) + "\n";
  text += row + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());  // one write: O_APPEND keeps the row whole
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    throw RuntimeError(str("cannot append to ", path, ": ", n < 0 ? std::strerror(err) : "short write"));
}

}  // namespace

CodecarbonTracker::CodecarbonTracker(const CodecarbonOptions& options, dist::Communicator& world,
                                     const torch::Device& device, const Logger& log)
    : o_(options), world_(world), log_(log) {
  std::error_code ec;
  fs::create_directories(o_.dir, ec);
  MEGATON_CHECK(!ec && fs::is_directory(o_.dir), UsageError, "--codecarbon-dir ", o_.dir,
                ": cannot create the directory (", ec.message(), ")");
  rapl_ = std::make_unique<RaplEnergy>(o_.powercap_root);
  std::string gpu_why = "the rank runs on the CPU";
  const std::string bus = device_pci_bus_id(device);
  if (!bus.empty()) nvml_ = NvmlEnergy::open(bus, gpu_why);
  ram_gb_ = static_cast<double>(device_capacity_bytes(torch::kCPU)) / (1024.0 * 1024.0 * 1024.0);
  cpu_count_ = static_cast<int>(std::thread::hardware_concurrency());
  os_ = os_name();
  cpu_model_ = cpu_model_name();

  // Who shares a host or a GPU: the first rank of each host counts its CPUs and memory in the job's sum, the first
  // rank of each (host, GPU) its GPU. One id for the job's rows: rank 0's.
  constexpr int64_t kWidth = 160;
  const std::string me = host_name() + "|" + bus;
  torch::Tensor all = torch::empty({world_.size(), kWidth}, torch::kUInt8);
  world_.all_gather(all, fixed_bytes(me, kWidth));
  std::set<std::string> hosts, gpus;
  for (int r = 0; r < world_.size(); ++r) {
    const std::string id = from_bytes(all[r]);
    const std::string host = id.substr(0, id.find('|'));
    const bool new_host = hosts.insert(host).second, new_gpu = gpus.insert(id).second;
    if (r == world_.rank()) {
      counts_cpu_ = new_host;
      counts_gpu_ = new_gpu && nvml_ != nullptr;
    }
  }
  torch::Tensor id = fixed_bytes(world_.rank() == 0 ? uuid4() : "", 40);
  world_.broadcast(id, 0);
  run_id_ = from_bytes(id);

  if (world_.rank() == 0) {
    log_.info("--codecarbon-dir ", o_.dir, ": energy and emissions to emissions-RRR.csv per rank and emissions.csv ",
              "for the job (", o_.country_iso_code, ", ", o_.carbon_intensity,
              " g CO2eq/kWh); CPU: ", rapl_->available() ? "RAPL" : "not measured, " + rapl_->why(),
              "; GPU: ", nvml_ ? "NVML (" + nvml_->name() + ")" : "not measured, " + gpu_why);
  }
  start_ = std::chrono::steady_clock::now();
  if (rapl_->available()) thread_ = std::thread([this] { sampler(); });
}

CodecarbonTracker::~CodecarbonTracker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CodecarbonTracker::sampler() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto period = std::chrono::duration<double>(o_.measure_power_secs);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) rapl_->sample();
}

CodecarbonTracker::Totals CodecarbonTracker::read() {
  Totals t;
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (rapl_->available()) t.cpu_j = rapl_->sample();
  }
  if (nvml_) t.gpu_j = nvml_->sample();
  t.ram_j = ram_gb_ * kRamWattsPerGb * t.seconds;
  return t;
}

void CodecarbonTracker::flush(int64_t iteration) {
  if (iteration == last_iteration_) return;  // every rank alike: no collective is skipped on one rank only
  last_iteration_ = iteration;
  const Totals t = read();
  // Every rank's totals and what of them the job's sum takes: [world, 9] fp64.
  const std::vector<double> mine = {t.seconds,
                                    t.cpu_j,
                                    t.gpu_j,
                                    t.ram_j,
                                    counts_cpu_ ? 1.0 : 0.0,
                                    counts_gpu_ ? 1.0 : 0.0,
                                    static_cast<double>(cpu_count_),
                                    ram_gb_,
                                    nvml_ ? 1.0 : 0.0};
  torch::Tensor all = torch::empty({world_.size(), 9}, torch::kFloat64);
  world_.all_gather(all, torch::tensor(mine, torch::kFloat64));

  auto format = [&](const Totals& now, const Totals& prev, int cpu_count, int gpu_count, double ram_gb,
                    const std::string& gpu_model) {
    const double dt = now.seconds - prev.seconds;
    auto watts = [&](double j, double j0) { return dt > 0 ? (j - j0) / dt : 0.0; };
    const double kwh = (now.cpu_j + now.gpu_j + now.ram_j) / kJoulesPerKwh;
    const double emissions = kwh * o_.carbon_intensity / 1000.0;  // kg
    const std::string country = o_.country_iso_code == "FRA" ? "France" : o_.country_iso_code;
    std::string r = local_timestamp() + ",codecarbon," + run_id_ + "," + num(now.seconds) + "," + num(emissions) + "," +
                    num(now.seconds > 0 ? emissions * 1000.0 / now.seconds : 0.0) + "," +
                    num(watts(now.cpu_j, prev.cpu_j)) + "," + num(watts(now.gpu_j, prev.gpu_j)) + "," +
                    num(watts(now.ram_j, prev.ram_j)) + "," + num(now.cpu_j / kJoulesPerKwh) + "," +
                    num(now.gpu_j / kJoulesPerKwh) + "," + num(now.ram_j / kJoulesPerKwh) + "," + num(kwh) + "," +
                    csv_field(country) + "," + o_.country_iso_code + ",,,," + csv_field(os_) + ",," +
                    std::to_string(cpu_count) + "," + csv_field(cpu_model_) + "," + std::to_string(gpu_count) + "," +
                    csv_field(gpu_model) + ",,," + num(ram_gb) + ",machine,N";
    return r;
  };
  char name[32];
  std::snprintf(name, sizeof(name), "emissions-%03d.csv", world_.rank());
  const std::string gpu_name = nvml_ ? nvml_->name() : "";
  try {
    append_row((fs::path(o_.dir) / name).string(),
               format(t, last_row_, cpu_count_, nvml_ ? 1 : 0, ram_gb_, nvml_ ? "1 x " + gpu_name : ""));
    last_row_ = t;
    if (world_.rank() == 0) {
      Totals job;
      job.seconds = t.seconds;
      int cpus = 0, gpus = 0;
      double ram = 0;
      for (int r = 0; r < world_.size(); ++r) {
        const auto v = all[r];
        const bool cpu = v[4].item<double>() > 0, gpu = v[5].item<double>() > 0;
        if (cpu) {
          job.cpu_j += v[1].item<double>();
          job.ram_j += v[3].item<double>();
          cpus += static_cast<int>(v[6].item<double>());
          ram += v[7].item<double>();
        }
        if (gpu) {
          job.gpu_j += v[2].item<double>();
          gpus += 1;
        }
      }
      append_row((fs::path(o_.dir) / "emissions.csv").string(),
                 format(job, last_job_row_, cpus, gpus, ram, gpus > 0 ? std::to_string(gpus) + " x " + gpu_name : ""));
      last_job_row_ = job;
    }
  } catch (const Error& e) {
    log_.warn("CodeCarbon log not written: ", e.what());  // an energy log never stops training
  }
}

}  // namespace megaton::train
