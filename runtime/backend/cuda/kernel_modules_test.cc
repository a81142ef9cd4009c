// KernelModules and PtxJitCache on the CPU, over the fake libcuda: binary choice, PTX JIT,
// the disk cache (hits, corrupt entries, unwritable folders), force_ptx and the errors.
#include "runtime/backend/cuda/kernel_modules.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "core/artifact/artifact_writer.h"
#include "testing/cuda/fake_libcuda.h"
#include "runtime/backend/cuda/ptx_jit_cache.h"
#include "testing/test_seed.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

/// Sets an environment variable (nullptr: unsets it) for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    hadValue_ = old != nullptr;
    if (old) saved_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (hadValue_) ::setenv(name_, saved_.c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string saved_;
  bool hadValue_ = false;
};

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class KernelModulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<std::unique_ptr<CudaDriver>> loaded = CudaDriver::loadFrom(INGOT_FAKE_LIBCUDA);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    driver_ = std::move(loaded).value();
    void* fake = ::dlopen(INGOT_FAKE_LIBCUDA, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(fake, nullptr);
    reset_ = reinterpret_cast<FakeCudaResetFn>(::dlsym(fake, "fakeCudaReset"));
    stats_ = reinterpret_cast<FakeCudaStatsFn>(::dlsym(fake, "fakeCudaStats"));
    setDriverVersion_ =
        reinterpret_cast<FakeCudaSetDriverVersionFn>(::dlsym(fake, "fakeCudaSetDriverVersion"));
    loadedImage_ = reinterpret_cast<FakeCudaLoadedImageFn>(::dlsym(fake, "fakeCudaLoadedImage"));
    ::dlclose(fake);  // drops the NOLOAD reference; driver_ keeps it open
    ASSERT_TRUE(reset_ && stats_ && setDriverVersion_ && loadedImage_);
    reset_();
    char dir[] = "/tmp/ingot-ptx-cache-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    cacheDir_ = dir;
    options_.ptx_cache_dir = cacheDir_;
    nonce_ = std::to_string(std::random_device()()) + std::to_string(std::random_device()());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(cacheDir_, ec);
  }

  /// A fake cubin holding `entries`, distinct per test run.
  std::string cubin(const std::string& target, const std::vector<std::string>& entries) {
    std::string text = std::string(fake_cuda::kCubinMagic) + " " + target;
    for (const std::string& e : entries) text += " entry:" + e;
    return text + " nonce:" + nonce_;
  }
  /// PTX (as the fake JIT reads it) holding `entries`, distinct per test run.
  std::string ptx(const std::vector<std::string>& entries) {
    std::string text = "// nonce " + nonce_ + "\n.version 8.0\n.target sm_80\n.address_size 64\n";
    for (const std::string& e : entries) text += ".visible .entry " + e + "()\n{\n  ret;\n}\n";
    return text;
  }
  static KernelBinary binary(const std::string& target, const std::string& bytes) {
    bool isPtx = target.rfind("compute_", 0) == 0;
    return {target, isPtx ? schema::BinaryFormat::Ptx : schema::BinaryFormat::Cubin,
            std::vector<uint8_t>(bytes.begin(), bytes.end())};
  }
  static Kernel kernel(const std::string& name, std::vector<KernelBinary> binaries,
                       uint32_t sharedBytes = 0) {
    Kernel k;
    k.name = name;
    k.blockDim = {128, 2, 1};
    k.sharedMemBytes = sharedBytes;
    k.binaries = std::move(binaries);
    return k;
  }
  static Artifact artifact(std::vector<Kernel> kernels) {
    ArtifactWriter writer;
    for (Kernel& k : kernels) writer.addKernel(std::move(k));
    writer.setDummyWeights(0);
    StatusOr<std::vector<uint8_t>> bytes = writer.writeToBuffer();
    EXPECT_TRUE(bytes.ok()) << bytes.status().message();
    StatusOr<Artifact> opened = Artifact::openFromMemory(*bytes);
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    return std::move(opened).value();
  }
  StatusOr<std::unique_ptr<KernelModules>> load(const Artifact& a, GpuTarget gpu = {9, 0, "H200"}) {
    return KernelModules::load(*driver_, a, gpu, options_);
  }
  std::string cachePath(const std::string& ptxText, const std::string& arch, int version = 13000) {
    return cacheDir_ + "/" + PtxJitCache::key(ptxText, arch, version) + ".cubin";
  }
  std::string jitOutput(const std::string& ptxText) {
    return std::string(fake_cuda::kCubinMagic) + " jit\n" + ptxText;
  }

  std::unique_ptr<CudaDriver> driver_;
  FakeCudaResetFn reset_ = nullptr;
  FakeCudaStatsFn stats_ = nullptr;
  FakeCudaSetDriverVersionFn setDriverVersion_ = nullptr;
  FakeCudaLoadedImageFn loadedImage_ = nullptr;
  std::string cacheDir_, nonce_;
  KernelModuleOptions options_;
};

TEST_F(KernelModulesTest, LoadsTheCubinForTheDeviceOverPtx) {
  const std::string c90a = cubin("sm_90a", {"k"}), c80 = cubin("sm_80", {"k"});
  Artifact a = artifact({kernel("k", {binary("sm_80", c80), binary("sm_90a", c90a),
                                      binary("compute_80", ptx({"k"}))})});
  auto h200 = load(a, {9, 0, "NVIDIA H200"});
  ASSERT_TRUE(h200.ok()) << h200.status().message();
  EXPECT_EQ(stats_()->moduleLoads, 1);
  EXPECT_EQ(std::string(loadedImage_(0)), c90a);
  EXPECT_EQ(stats_()->linkCreates, 0);
  EXPECT_EQ((*h200)->report().cubins, 1);
  EXPECT_EQ((*h200)->report().ptx_jit + (*h200)->report().ptx_from_cache, 0);
  EXPECT_EQ((*h200)->report().gpu, "NVIDIA H200 (sm_90)");
  StatusOr<LoadedKernel> k = (*h200)->find("k");
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_NE(k->function, nullptr);
  EXPECT_EQ(k->block[0], 128u);
  EXPECT_EQ(k->block[1], 2u);
  EXPECT_EQ(k->block[2], 1u);
  EXPECT_TRUE((*h200)->has("k"));

  auto a6000 = load(a, {8, 6, "RTX A6000"});  // no sm_86 cubin: sm_80's runs there
  ASSERT_TRUE(a6000.ok()) << a6000.status().message();
  EXPECT_EQ(std::string(loadedImage_(1)), c80);
  EXPECT_EQ(stats_()->linkCreates, 0);
  EXPECT_TRUE(fs::is_empty(cacheDir_));
}

TEST_F(KernelModulesTest, JitsPtxOfAComputeOnlyArtifactAndCachesTheCubin) {
  const std::string p = ptx({"k"});
  Artifact a = artifact({kernel("k", {binary("compute_80", p)})});
  auto loaded = load(a);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(stats_()->linkCompletes, 1);
  EXPECT_EQ(std::string(loadedImage_(0)), jitOutput(p));
  EXPECT_EQ((*loaded)->report().ptx_jit, 1);
  EXPECT_EQ((*loaded)->report().ptx_from_cache, 0);
  EXPECT_EQ((*loaded)->report().cubins, 0);
  EXPECT_EQ(readAll(cachePath(p, "sm_90")), jitOutput(p));
  int files = 0;
  for (const auto& entry : fs::directory_iterator(cacheDir_)) {
    ++files;
    EXPECT_EQ(entry.path().extension(), ".cubin") << entry.path();  // no temporaries left
  }
  EXPECT_EQ(files, 1);
}

TEST_F(KernelModulesTest, SecondLoadIsServedByTheDiskCacheWithoutJit) {
  const std::string p = ptx({"k"});
  Artifact a = artifact({kernel("k", {binary("compute_80", p)})});
  ASSERT_TRUE(load(a).ok());
  ASSERT_EQ(stats_()->linkCreates, 1);
  auto second = load(a);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(stats_()->linkCreates, 1);
  EXPECT_EQ((*second)->report().ptx_from_cache, 1);
  EXPECT_EQ((*second)->report().ptx_jit, 0);
  EXPECT_EQ(std::string(loadedImage_(1)), jitOutput(p));
  EXPECT_TRUE((*second)->find("k").ok());
}

TEST_F(KernelModulesTest, CacheKeyCoversArchAndDriverVersion) {
  const std::string p = ptx({"k"});
  Artifact a = artifact({kernel("k", {binary("compute_80", p)})});
  ASSERT_TRUE(load(a, {9, 0, "H200"}).ok());
  ASSERT_TRUE(load(a, {8, 9, "L40S"}).ok());  // another arch: its own JIT and entry
  EXPECT_EQ(stats_()->linkCompletes, 2);
  setDriverVersion_(13010);  // a driver update: old entries are not used
  auto updated = load(a, {9, 0, "H200"});
  ASSERT_TRUE(updated.ok()) << updated.status().message();
  EXPECT_EQ(stats_()->linkCompletes, 3);
  EXPECT_TRUE(fs::exists(cachePath(p, "sm_90", 13000)));
  EXPECT_TRUE(fs::exists(cachePath(p, "sm_89", 13000)));
  EXPECT_TRUE(fs::exists(cachePath(p, "sm_90", 13010)));
  EXPECT_NE(PtxJitCache::key(p, "sm_90", 13000), PtxJitCache::key(p + " ", "sm_90", 13000));
}

TEST_F(KernelModulesTest, CorruptCacheEntryIsDeletedAndRebuilt) {
  const std::string p = ptx({"k"});
  Artifact a = artifact({kernel("k", {binary("compute_80", p)})});
  ASSERT_TRUE(load(a).ok());
  const std::string path = cachePath(p, "sm_90");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    std::mt19937 rng(ingot::testing::testSeed());
    for (int i = 0; i < 300; ++i) out.put(static_cast<char>('a' + rng() % 26));
  }
  ::testing::internal::CaptureStderr();
  auto rebuilt = load(a);
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().message();
  EXPECT_EQ(stats_()->moduleLoadFailures, 1);
  EXPECT_EQ(stats_()->linkCompletes, 2);
  EXPECT_EQ((*rebuilt)->report().ptx_jit, 1);
  EXPECT_EQ(readAll(path), jitOutput(p));
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("rebuilding"), std::string::npos) << err;
  auto third = load(a);  // the rebuilt entry serves the next load
  ASSERT_TRUE(third.ok());
  EXPECT_EQ((*third)->report().ptx_from_cache, 1);
}

TEST_F(KernelModulesTest, NoUsableBinaryIsAnErrorNamingGpuKernelAndTargets) {
  Artifact a = artifact({kernel("ingot_rms_norm_bf16", {binary("sm_90a", cubin("sm_90a", {"x"})),
                                                        binary("compute_90a", ptx({"x"}))})});
  auto loaded = load(a, {7, 5, "Tesla T4"});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().message(),
            "kernel 'ingot_rms_norm_bf16' has no binary for GPU Tesla T4 (sm_75); the artifact "
            "carries: sm_90a, compute_90a");
  EXPECT_EQ(stats_()->moduleLoads, 0);
}

TEST_F(KernelModulesTest, ForcePtxIgnoresCubins) {
  const std::string p = ptx({"k"});
  Artifact a = artifact({kernel("k", {binary("sm_90a", cubin("sm_90a", {"k"})),
                                      binary("compute_80", p)})});
  options_.force_ptx = true;
  auto loaded = load(a);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ((*loaded)->report().cubins, 0);
  EXPECT_EQ((*loaded)->report().ptx_jit, 1);
  EXPECT_EQ(std::string(loadedImage_(0)), jitOutput(p));

  Artifact cubinsOnly = artifact({kernel("k", {binary("sm_90a", cubin("sm_90a", {"k"}))})});
  auto refused = load(cubinsOnly);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("force_ptx"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("kernel 'k' has no binary for GPU H200 (sm_90)"),
            std::string::npos)
      << refused.status().message();
}

TEST_F(KernelModulesTest, IdenticalBinariesAreLoadedAndJittedOnce) {
  const std::string shared = ptx({"a", "b"});
  Artifact a = artifact({kernel("a", {binary("compute_80", shared)}),
                         kernel("b", {binary("compute_80", shared)}),
                         kernel("c", {binary("compute_80", ptx({"c"}))})});
  options_.ptx_cache_dir = "none";
  auto loaded = load(a);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(stats_()->linkCompletes, 2);
  EXPECT_EQ(stats_()->moduleLoads, 2);
  EXPECT_EQ((*loaded)->report().ptx_jit, 2);
  EXPECT_EQ((*loaded)->size(), 3u);
  for (const char* name : {"a", "b", "c"}) EXPECT_TRUE((*loaded)->has(name)) << name;
  EXPECT_NE((*loaded)->find("a")->function, (*loaded)->find("b")->function);
  EXPECT_TRUE(fs::is_empty(cacheDir_));  // "none": nothing written
}

TEST_F(KernelModulesTest, UnwritableCacheFolderIsAWarningNotAnError) {
  const std::string file = cacheDir_ + "/a-file";
  std::ofstream(file) << "not a folder";
  options_.ptx_cache_dir = file + "/ptx";
  Artifact a = artifact({kernel("k", {binary("compute_80", ptx({"k"}))}),
                         kernel("l", {binary("compute_80", ptx({"l"}))})});
  ::testing::internal::CaptureStderr();
  auto loaded = load(a);
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ((*loaded)->report().ptx_jit, 2);
  EXPECT_NE(err.find("not writable"), std::string::npos) << err;
  EXPECT_EQ(err.find("not writable"), err.rfind("not writable")) << "warned twice: " << err;
}

TEST_F(KernelModulesTest, LargeDynamicSharedMemoryOptsIn) {
  Artifact a = artifact({kernel("small", {binary("sm_90a", cubin("sm_90a", {"small"}))}, 48 << 10),
                         kernel("big", {binary("sm_90a", cubin("sm_90a", {"big"}))}, 200 << 10)});
  auto loaded = load(a);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(stats_()->funcSetAttributes, 1);
  EXPECT_EQ(stats_()->lastFuncAttribute, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  EXPECT_EQ(stats_()->lastFuncAttributeValue, 200 << 10);
  EXPECT_EQ((*loaded)->find("big")->shared_bytes, 200u << 10);
}

TEST_F(KernelModulesTest, UnloadsEveryModuleWhenDestroyed) {
  Artifact a = artifact({kernel("k", {binary("sm_90a", cubin("sm_90a", {"k"}))}),
                         kernel("l", {binary("compute_80", ptx({"l"}))})});
  int before = stats_()->liveModules;
  {
    auto loaded = load(a);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_EQ(stats_()->liveModules, before + 2);
  }
  EXPECT_EQ(stats_()->liveModules, before);
  EXPECT_EQ(stats_()->moduleUnloads, 2);
}

TEST_F(KernelModulesTest, ErrorsNameTheKernel) {
  Artifact a = artifact({kernel("k", {binary("sm_90a", cubin("sm_90a", {"k"}))})});
  auto loaded = load(a);
  ASSERT_TRUE(loaded.ok());
  StatusOr<LoadedKernel> missing = (*loaded)->find("ingot_nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'ingot_nope'"), std::string::npos);
  EXPECT_FALSE((*loaded)->has("ingot_nope"));

  // A binary without the kernel's entry point.
  Artifact wrong = artifact({kernel("k", {binary("sm_90a", cubin("sm_90a", {"other"}))})});
  auto refused = load(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("kernel 'k': its sm_90a binary has no entry point"),
            std::string::npos)
      << refused.status().message();

  // A cubin the driver refuses.
  Artifact garbage = artifact({kernel("k", {binary("sm_90a", "\x7f" "ELF garbage")})});
  refused = load(garbage);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "kernel 'k': loading its sm_90a cubin on H200 (sm_90): cuModuleLoadData: "
                "CUDA_ERROR_INVALID_IMAGE"),
            std::string::npos)
      << refused.status().message();
}

TEST_F(KernelModulesTest, RecordsEachKernelsParameterSizes) {
  const std::string both = cubin("sm_90a", {"k", "l"});
  Kernel k = kernel("k", {binary("sm_90a", both)});
  k.paramBytes = {8, 8, 4, 88};
  Artifact a = artifact({std::move(k), kernel("l", {binary("sm_90a", both)})});
  auto loaded = load(a);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ((*loaded)->find("k")->param_bytes, (std::vector<uint32_t>{8, 8, 4, 88}));
  EXPECT_TRUE((*loaded)->find("l")->param_bytes.empty());  // not recorded: unchecked
}

TEST_F(KernelModulesTest, ZeroByteParameterIsACorruptArtifact) {
  const std::string name = "ingot_fused_add_f32";
  Kernel k = kernel(name, {binary("sm_90a", cubin("sm_90a", {name}))});
  k.paramBytes = {8, 8, 0, 8};
  auto refused = load(artifact({std::move(k)}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(refused.status().message(), "kernel 'ingot_fused_add_f32': param_bytes[2] is 0");
  EXPECT_EQ(stats_()->moduleLoads, 0);
}

TEST_F(KernelModulesTest, ParametersOverTheCudaLimitAreACorruptArtifact) {
  Kernel atLimit = kernel("a", {binary("sm_90a", cubin("sm_90a", {"a"}))});
  atLimit.paramBytes = {static_cast<uint32_t>(kMaxKernelParamBytes) - 4, 4};
  ASSERT_TRUE(load(artifact({std::move(atLimit)})).ok());

  Kernel over = kernel("k", {binary("sm_90a", cubin("sm_90a", {"k"}))});
  over.paramBytes = {static_cast<uint32_t>(kMaxKernelParamBytes) - 4, 8};
  auto refused = load(artifact({std::move(over)}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(refused.status().message(),
            "kernel 'k': its parameters take 32768 bytes, more than a kernel may (32764)");
}

TEST_F(KernelModulesTest, TheArtifactsGridRuleIsTheOneLaunchesUse) {
  // Recorded (format 1.5): taken as written, even where it is not the family's own rule.
  const std::string name = "ingot_quant_gemv_fp8";
  Kernel k = kernel(name, {binary("sm_90a", cubin("sm_90a", {name, "ingot_fused_add_f32"}))});
  k.blockDim = {128, 1, 1};
  k.grid = {gridAxis(schema::GridCount::Features, 16), gridAxis(schema::GridCount::Rows),
            gridAxis(schema::GridCount::One)};
  // Not recorded (format 1.4 and older): the family's rule, from the name and block.
  Kernel old = kernel("ingot_fused_add_f32",
                      {binary("sm_90a", cubin("sm_90a", {name, "ingot_fused_add_f32"}))});
  old.blockDim = {256, 1, 1};
  auto loaded = load(artifact({std::move(k), std::move(old)}));
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const GridCounts counts = GridCounts()
                                .set(schema::GridCount::Features, 576)
                                .set(schema::GridCount::Rows, 3)
                                .set(schema::GridCount::Elements, 1000);
  StatusOr<GridDims> gemv = launchGrid(*(*loaded)->find(name), counts, 132, "test");
  ASSERT_TRUE(gemv.ok()) << gemv.status().message();
  EXPECT_EQ(std::vector<unsigned>({gemv->x, gemv->y, gemv->z}), std::vector<unsigned>({36, 3, 1}));
  StatusOr<GridDims> add = launchGrid(*(*loaded)->find("ingot_fused_add_f32"), counts, 132, "test");
  ASSERT_TRUE(add.ok()) << add.status().message();
  EXPECT_EQ(add->x, 4u);
  // A count the launcher does not give is an error naming the launch and the kernel.
  StatusOr<GridDims> missing =
      launchGrid(*(*loaded)->find(name), GridCounts().set(schema::GridCount::Rows, 3), 132,
                 "step 7");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "step 7: kernel ingot_quant_gemv_fp8: its grid reads the count 'Features', which "
            "this launch does not give");
}

TEST_F(KernelModulesTest, OldKernelsOfNoFamilyLoadButCannotBeLaunched) {
  auto loaded = load(artifact({kernel("k", {binary("sm_90a", cubin("sm_90a", {"k"}))})}));
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  StatusOr<GridDims> refused = launchGrid(*(*loaded)->find("k"), GridCounts(), 132, "step 2");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("step 2: kernel k has no grid rule"), std::string::npos)
      << refused.status().message();
}

TEST_F(KernelModulesTest, ABadGridRuleIsACorruptArtifact) {
  const std::string name = "ingot_fused_add_f32";
  Kernel twoAxes = kernel(name, {binary("sm_90a", cubin("sm_90a", {name}))});
  twoAxes.grid = {gridAxis(schema::GridCount::Elements), gridAxis(schema::GridCount::One)};
  auto refused = load(artifact({std::move(twoAxes)}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(refused.status().message(),
            "kernel 'ingot_fused_add_f32': grid has 2 axes (x, y, z: 3)");

  Kernel unknown = kernel(name, {binary("sm_90a", cubin("sm_90a", {name}))});
  unknown.grid = {gridAxis(static_cast<schema::GridCount>(42)), gridAxis(schema::GridCount::One),
                  gridAxis(schema::GridCount::One, 0)};
  refused = load(artifact({std::move(unknown)}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(refused.status().message(),
            "kernel 'ingot_fused_add_f32': grid axis x counts 42, a count this runtime does not "
            "know (an artifact from a newer compiler)");
  EXPECT_EQ(stats_()->moduleLoads, 0);
}

TEST_F(KernelModulesTest, PtxTheJitRejectsIsAnErrorWithItsLog) {
  Artifact a = artifact({kernel("k", {binary("compute_80", ".visible .entry k() { ret; }")})});
  auto loaded = load(a);
  ASSERT_FALSE(loaded.ok());
  const std::string& m = loaded.status().message();
  EXPECT_NE(m.find("kernel 'k' (compute_80): PTX JIT for sm_90: cuLinkAddData: "
                   "CUDA_ERROR_INVALID_PTX"), std::string::npos) << m;
  EXPECT_NE(m.find("no .version directive"), std::string::npos) << m;
  EXPECT_TRUE(fs::is_empty(cacheDir_));
}

TEST(PtxJitCacheDir, FollowsOptionThenEnvironment) {
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  ScopedEnv home("HOME", "/home/u");
  {
    ScopedEnv cache("INGOT_PTX_CACHE", nullptr);
    EXPECT_EQ(PtxJitCache::resolveDir("/my/cache"), "/my/cache");
    EXPECT_EQ(PtxJitCache::resolveDir("none"), "");
    EXPECT_EQ(PtxJitCache::resolveDir(""), "/xdg/ingot/ptx");
    ScopedEnv noXdg("XDG_CACHE_HOME", nullptr);
    EXPECT_EQ(PtxJitCache::resolveDir(""), "/home/u/.cache/ingot/ptx");
  }
  {
    ScopedEnv cache("INGOT_PTX_CACHE", "/env/ptx");
    EXPECT_EQ(PtxJitCache::resolveDir(""), "/env/ptx");
    EXPECT_EQ(PtxJitCache::resolveDir("/my/cache"), "/my/cache");  // the option wins
  }
  {
    ScopedEnv cache("INGOT_PTX_CACHE", "none");
    EXPECT_EQ(PtxJitCache::resolveDir(""), "");
  }
  {
    ScopedEnv cache("INGOT_PTX_CACHE", "");
    EXPECT_EQ(PtxJitCache::resolveDir(""), "");
  }
}

}  // namespace
}  // namespace ingot
