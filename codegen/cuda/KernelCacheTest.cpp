//===- KernelCacheTest.cpp - the on-disk kernel cache ---------------------===//
#include "codegen/cuda/KernelCache.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace ingot::codegen {
namespace {

namespace fs = std::filesystem;

/// A fresh folder under the temp dir, removed afterwards.
class KernelCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ingot-kcache-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root = pattern;
    dir = root + "/cache/kernels"; // not there yet: the cache creates it
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root, ec);
  }

  std::vector<uint8_t> randomBytes(size_t n) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::vector<uint8_t> out(n);
    for (uint8_t &b : out)
      b = static_cast<uint8_t>(byte(rng));
    return out;
  }
  std::string randomKey() {
    return KernelCache::key(std::to_string(rng()), {"-DX"}, "sm_80", "nvrtc 13.0");
  }

  std::mt19937_64 rng{std::random_device{}()};
  std::string root, dir;
};

TEST_F(KernelCacheTest, MissComputesAndStoresThenHitReturnsTheSameBytes) {
  KernelCache cache(dir);
  const std::string key = randomKey();
  const std::vector<uint8_t> bytes = randomBytes(3000);
  EXPECT_FALSE(cache.lookup(key).has_value());
  int computed = 0;
  auto compute = [&]() -> StatusOr<std::vector<uint8_t>> {
    ++computed;
    return bytes;
  };
  bool hit = true;
  StatusOr<std::vector<uint8_t>> first = cache.getOrCompute(key, compute, &hit);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_FALSE(hit);
  EXPECT_EQ(*first, bytes);
  StatusOr<std::vector<uint8_t>> second = cache.getOrCompute(key, compute, &hit);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(hit);
  EXPECT_EQ(*second, bytes);
  EXPECT_EQ(computed, 1);
  // Another cache object on the same folder (another process) sees the entry.
  std::optional<std::vector<uint8_t>> again = KernelCache(dir).lookup(key);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, bytes);
}

TEST_F(KernelCacheTest, KeyDependsOnEveryPartAndNotOnHowTheyConcatenate) {
  const std::string base = KernelCache::key("src", {"-a", "-b"}, "sm_80", "nvrtc 13.0");
  EXPECT_EQ(base.size(), 32u);
  EXPECT_EQ(base, KernelCache::key("src", {"-a", "-b"}, "sm_80", "nvrtc 13.0"));
  EXPECT_NE(base, KernelCache::key("src ", {"-a", "-b"}, "sm_80", "nvrtc 13.0"));
  EXPECT_NE(base, KernelCache::key("src", {"-a"}, "sm_80", "nvrtc 13.0"));
  EXPECT_NE(base, KernelCache::key("src", {"-a-b"}, "sm_80", "nvrtc 13.0"));
  EXPECT_NE(base, KernelCache::key("src", {"-b", "-a"}, "sm_80", "nvrtc 13.0"));
  EXPECT_NE(base, KernelCache::key("src", {"-a", "-b"}, "sm_90a", "nvrtc 13.0"));
  EXPECT_NE(base, KernelCache::key("src", {"-a", "-b"}, "sm_80", "nvrtc 13.1"));
  EXPECT_NE(KernelCache::key("ab", {"c"}, "t", "v"), KernelCache::key("a", {"bc"}, "t", "v"));
}

TEST_F(KernelCacheTest, CorruptEntriesAreDetectedRemovedAndRecompiled) {
  KernelCache cache(dir);
  const std::vector<uint8_t> bytes = randomBytes(4096);
  // One way of breaking an entry per case: a flipped payload bit, a truncation, an entry
  // of another key copied over, an empty file, a file of another format.
  for (int corruption = 0; corruption < 5; ++corruption) {
    SCOPED_TRACE("corruption " + std::to_string(corruption));
    const std::string key = randomKey();
    ASSERT_TRUE(cache.store(key, bytes).ok());
    const std::string path = cache.entryPath(key);
    if (corruption == 0) {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(fs::file_size(path) - 100));
      char c = 0;
      f.read(&c, 1);
      f.seekp(static_cast<std::streamoff>(fs::file_size(path) - 100));
      c ^= 0x10;
      f.write(&c, 1);
    } else if (corruption == 1) {
      fs::resize_file(path, fs::file_size(path) - 1);
    } else if (corruption == 2) {
      const std::string other = randomKey();
      ASSERT_TRUE(cache.store(other, bytes).ok());
      fs::copy_file(cache.entryPath(other), path, fs::copy_options::overwrite_existing);
    } else if (corruption == 3) {
      std::ofstream(path, std::ios::trunc).close();
    } else {
      std::ofstream(path, std::ios::trunc) << "not a kernel cache entry at all, but long enough";
    }
    EXPECT_FALSE(cache.lookup(key).has_value());
    EXPECT_FALSE(fs::exists(path)) << "a corrupt entry is removed";
    bool hit = true;
    int computed = 0;
    StatusOr<std::vector<uint8_t>> got = cache.getOrCompute(
        key, [&]() -> StatusOr<std::vector<uint8_t>> { ++computed; return bytes; }, &hit);
    ASSERT_TRUE(got.ok());
    EXPECT_FALSE(hit);
    EXPECT_EQ(computed, 1);
    EXPECT_EQ(*got, bytes);
    std::optional<std::vector<uint8_t>> healed = cache.lookup(key);
    ASSERT_TRUE(healed.has_value());
    EXPECT_EQ(*healed, bytes);
  }
}

TEST_F(KernelCacheTest, ConcurrentCallersOfOneKeyComputeOnce) {
  KernelCache cache(dir);
  const std::string key = randomKey();
  const std::vector<uint8_t> bytes = randomBytes(1 << 16);
  std::atomic<int> computed{0};
  constexpr int kThreads = 8;
  std::vector<std::vector<uint8_t>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      StatusOr<std::vector<uint8_t>> got =
          cache.getOrCompute(key, [&]() -> StatusOr<std::vector<uint8_t>> {
            ++computed;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            return bytes;
          });
      if (got.ok())
        results[t] = std::move(got).value();
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(computed.load(), 1);
  for (const std::vector<uint8_t> &r : results)
    EXPECT_EQ(r, bytes);
}

TEST_F(KernelCacheTest, ConcurrentProcessesOfOneKeyCompileOnce) {
  KernelCache cache(dir);
  const std::string key = randomKey();
  const std::vector<uint8_t> bytes = randomBytes(1 << 16);
  const std::string log = root + "/computed.log";
  constexpr int kProcesses = 4;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      StatusOr<std::vector<uint8_t>> got =
          cache.getOrCompute(key, [&]() -> StatusOr<std::vector<uint8_t>> {
            int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
              (void)!::write(fd, "x", 1);
              ::close(fd);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            return bytes;
          });
      ::_exit(got.ok() && *got == bytes ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a child read wrong bytes";
  }
  EXPECT_EQ(fs::file_size(log), 1u) << "the kernel was compiled more than once";
}

TEST_F(KernelCacheTest, ConcurrentWritersNeverExposeATornEntry) {
  KernelCache cache(dir);
  const std::string key = randomKey();
  // Two different payloads of different sizes race for one key: a reader must see one of
  // them whole (or nothing before the first rename), never a mix.
  const std::vector<uint8_t> a = randomBytes(1 << 20), b = randomBytes((1 << 20) + 4097);
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0}, seen{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w)
    writers.emplace_back([&, w] {
      for (int i = 0; i < 20; ++i)
        EXPECT_TRUE(cache.store(key, (w + i) % 2 ? a : b).ok());
    });
  std::thread reader([&] {
    while (!stop) {
      std::optional<std::vector<uint8_t>> got = cache.lookup(key);
      if (!got)
        continue;
      ++seen;
      if (*got != a && *got != b)
        ++torn;
    }
  });
  for (std::thread &t : writers)
    t.join();
  stop = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0);
  std::optional<std::vector<uint8_t>> last = cache.lookup(key);
  ASSERT_TRUE(last.has_value());
  EXPECT_TRUE(*last == a || *last == b);
  for (const fs::directory_entry &e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos)
        << "temporary file left behind: " << e.path();
}

TEST_F(KernelCacheTest, DisabledCacheAlwaysComputesAndStoresNothing) {
  KernelCache cache("");
  EXPECT_FALSE(cache.enabled());
  int computed = 0;
  for (int i = 0; i < 2; ++i) {
    bool hit = true;
    StatusOr<std::vector<uint8_t>> got = cache.getOrCompute(
        randomKey(), [&]() -> StatusOr<std::vector<uint8_t>> { ++computed; return randomBytes(8); },
        &hit);
    ASSERT_TRUE(got.ok());
    EXPECT_FALSE(hit);
  }
  EXPECT_EQ(computed, 2);
}

TEST_F(KernelCacheTest, AnUnwritableFolderIsReportedButTheBytesStillCome) {
  // The cache folder's parent is a regular file: it cannot be created.
  std::ofstream(root + "/file") << "x";
  KernelCache cache(root + "/file/kernels");
  const std::vector<uint8_t> bytes = randomBytes(100);
  Status stored = cache.store(randomKey(), bytes);
  EXPECT_FALSE(stored.ok());
  EXPECT_NE(stored.message().find(root + "/file/kernels"), std::string::npos) << stored.message();
  std::string storeError;
  StatusOr<std::vector<uint8_t>> got = cache.getOrCompute(
      randomKey(), [&]() -> StatusOr<std::vector<uint8_t>> { return bytes; }, nullptr,
      &storeError);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, bytes);
  EXPECT_FALSE(storeError.empty());
}

TEST_F(KernelCacheTest, ComputeErrorsPassThroughAndCacheNothing) {
  KernelCache cache(dir);
  const std::string key = randomKey();
  StatusOr<std::vector<uint8_t>> got = cache.getOrCompute(
      key, []() -> StatusOr<std::vector<uint8_t>> { return invalidArgument("nvrtc said no"); });
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "nvrtc said no");
  EXPECT_FALSE(cache.lookup(key).has_value());
}

TEST_F(KernelCacheTest, DefaultDirectoryFollowsTheEnvironment) {
  auto saved = [](const char *name) -> std::optional<std::string> {
    const char *v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const auto kernelCache = saved("INGOT_KERNEL_CACHE"), xdg = saved("XDG_CACHE_HOME"),
             home = saved("HOME");
  ::setenv("INGOT_KERNEL_CACHE", "/k", 1);
  ::setenv("XDG_CACHE_HOME", "/x", 1);
  ::setenv("HOME", "/h", 1);
  EXPECT_EQ(KernelCache::defaultDirectory(), "/k");
  ::setenv("INGOT_KERNEL_CACHE", "", 1);
  EXPECT_EQ(KernelCache::defaultDirectory(), "") << "an empty value disables the cache";
  ::unsetenv("INGOT_KERNEL_CACHE");
  EXPECT_EQ(KernelCache::defaultDirectory(), "/x/ingot/kernels");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(KernelCache::defaultDirectory(), "/h/.cache/ingot/kernels");
  auto restore = [](const char *name, const std::optional<std::string> &v) {
    if (v)
      ::setenv(name, v->c_str(), 1);
    else
      ::unsetenv(name);
  };
  restore("INGOT_KERNEL_CACHE", kernelCache);
  restore("XDG_CACHE_HOME", xdg);
  restore("HOME", home);
}

} // namespace
} // namespace ingot::codegen
