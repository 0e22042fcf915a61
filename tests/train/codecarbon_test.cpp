// The CodeCarbon log over a fake powercap tree: RAPL counters read per top-level domain and unfolded across wraps,
// CodeCarbon's columns, rows appended with totals since the start, energy and emissions from the counters.
#include "train/codecarbon.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/energy_counters.h"
#include "core/error.h"
#include "core/remove_tree.h"
#include "dist/self_communicator.h"

using namespace megaton;
namespace fs = std::filesystem;

namespace {

struct FakePowercap {
  fs::path root;
  explicit FakePowercap(const std::string& name) {
    root = fs::temp_directory_path() / ("megaton_rapl_" + name + "_" + std::to_string(::getpid()));
    remove_tree(root.string());
    domain("intel-rapl:0", "package-0", 1000000, 10000000);
    domain("intel-rapl:1", "package-1", 5000000, 10000000);
    domain("intel-rapl:0:0", "core", 0, 10000000);  // a sub-domain: inside package-0, never added
  }
  ~FakePowercap() { remove_tree(root.string()); }
  void domain(const std::string& dir, const std::string& name, uint64_t uj, uint64_t range) {
    fs::create_directories(root / dir);
    std::ofstream(root / dir / "name") << name << "\n";
    std::ofstream(root / dir / "max_energy_range_uj") << range << "\n";
    set(dir, uj);
  }
  void set(const std::string& dir, uint64_t uj) { std::ofstream(root / dir / "energy_uj") << uj << "\n"; }
};

std::vector<std::vector<std::string>> read_csv(const fs::path& p) {
  std::ifstream f(p);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(f, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ',')) cells.push_back(c);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    rows.push_back(cells);
  }
  return rows;
}

int column(const std::string& name) {
  std::stringstream ss(train::kCodecarbonColumns);
  std::string c;
  for (int i = 0; std::getline(ss, c, ','); ++i)
    if (c == name) return i;
  return -1;
}

}  // namespace

TEST(Rapl, ReadsTopLevelDomainsAndUnfoldsWraps) {
  FakePowercap fake("wrap");
  RaplEnergy rapl(fake.root.string());
  ASSERT_TRUE(rapl.available()) << rapl.why();
  EXPECT_EQ(rapl.domain_names(), (std::vector<std::string>{"package-0", "package-1"}));
  fake.set("intel-rapl:0", 3000000);  // +2 J
  fake.set("intel-rapl:1", 1000000);  // wrapped: +5 J to the range, +1 J after
  EXPECT_NEAR(rapl.sample(), 2.0 + 6.0, 1e-9);
  fake.set("intel-rapl:0", 3500000);
  EXPECT_NEAR(rapl.sample(), 8.5, 1e-9);

  RaplEnergy none((fake.root / "absent").string());
  EXPECT_FALSE(none.available());
  EXPECT_NE(none.why().find("no RAPL domains"), std::string::npos);
}

TEST(Codecarbon, WritesCodecarbonRowsWithMeasuredEnergy) {
  FakePowercap fake("rows");
  const fs::path dir = fake.root / "out";
  train::CodecarbonOptions o;
  o.dir = dir.string();
  o.powercap_root = fake.root.string();
  o.validate();
  EXPECT_EQ(o.carbon_intensity, 55.0);
  auto world = std::make_shared<dist::SelfCommunicator>("world");
  Logger log;
  {
    train::CodecarbonTracker tracker(o, *world, torch::kCPU, log);
    fake.set("intel-rapl:0", 1000000 + 3600000);  // +3.6 J = 1e-6 kWh
    tracker.flush(10);
    fake.set("intel-rapl:1", 5000000 + 7200000);  // +7.2 J more
    tracker.flush(20);
    tracker.flush(20);  // the end of training right after a save: no second row
  }
  for (const char* file : {"emissions-000.csv", "emissions.csv"}) {
    const auto rows = read_csv(dir / file);
    ASSERT_EQ(rows.size(), 3u) << file << ": the header and one row per flush";
    std::stringstream header;
    for (size_t i = 0; i < rows[0].size(); ++i) header << (i ? "," : "") << rows[0][i];
    EXPECT_EQ(header.str(), train::kCodecarbonColumns);
    for (size_t r = 1; r < rows.size(); ++r) ASSERT_EQ(rows[r].size(), rows[0].size()) << file << " row " << r;
    const double cpu1 = std::stod(rows[1][column("cpu_energy")]), cpu2 = std::stod(rows[2][column("cpu_energy")]);
    EXPECT_NEAR(cpu1, 1e-6, 1e-12) << file;
    EXPECT_NEAR(cpu2, 3e-6, 1e-12) << file << ": totals since the start";
    const double kwh = std::stod(rows[2][column("energy_consumed")]);
    const double ram = std::stod(rows[2][column("ram_energy")]);
    EXPECT_GT(ram, 0.0) << "CodeCarbon's RAM model: 3 W per 8 GB";
    EXPECT_NEAR(kwh, cpu2 + ram, 1e-12);
    EXPECT_NEAR(std::stod(rows[2][column("emissions")]), kwh * 55.0 / 1000.0, 1e-15);
    EXPECT_EQ(rows[2][column("gpu_energy")], "0.0") << "no GPU on a CPU rank";
    EXPECT_EQ(rows[2][column("country_iso_code")], "FRA");
    EXPECT_EQ(rows[2][column("country_name")], "France");
    EXPECT_EQ(rows[2][column("run_id")], rows[1][column("run_id")]);
    EXPECT_EQ(rows[2][column("run_id")].size(), 36u);
    EXPECT_GT(std::stod(rows[2][column("cpu_power")]), 0.0) << "7.2 J since the previous row";
  }
  // A later tracker (a resumed job) appends under the same header.
  {
    train::CodecarbonTracker tracker(o, *world, torch::kCPU, log);
    tracker.flush(30);
  }
  EXPECT_EQ(read_csv(dir / "emissions-000.csv").size(), 4u);
}

TEST(Codecarbon, OtherCountriesNeedTheirIntensity) {
  train::CodecarbonOptions o;
  o.dir = "x";
  o.country_iso_code = "USA";
  EXPECT_THROW(o.validate(), UsageError);
  o.carbon_intensity = 380;
  EXPECT_NO_THROW(o.validate());
}
