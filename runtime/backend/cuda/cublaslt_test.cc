// CublasLt on the CPU: its symbol table against the toolkit's libcublasLt, and load errors.
#include "runtime/backend/cuda/cublaslt.h"

#include <dlfcn.h>

#include <cstdlib>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace ingot {
namespace {

/// Sets an environment variable for the scope, then restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old) saved_ = old;
    hadValue_ = old != nullptr;
    ::setenv(name, value, 1);
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

TEST(CublasLt, ToolkitLibraryExportsEverySymbolTheWrapperResolves) {
  void* library = ::dlopen(INGOT_TOOLKIT_CUBLASLT, RTLD_LAZY | RTLD_LOCAL);
  if (!library) GTEST_SKIP() << "no toolkit libcublasLt.so.13: " << ::dlerror();
  ASSERT_GE(CublasLt::entryPoints().size(), 16u);
  std::set<std::string> members;
  for (const CublasLtEntryPoint& e : CublasLt::entryPoints()) {
    EXPECT_NE(::dlsym(library, e.symbol), nullptr)
        << "CublasLt resolves " << e.symbol << ", which " << INGOT_TOOLKIT_CUBLASLT
        << " does not export";
    EXPECT_TRUE(members.insert(e.member).second) << "member listed twice: " << e.member;
  }
  // The library must be the one the header describes (a newer major changes the ABI).
  auto getVersion = reinterpret_cast<size_t (*)()>(::dlsym(library, "cublasLtGetVersion"));
  ASSERT_NE(getVersion, nullptr);
  EXPECT_EQ(getVersion() / 10000, 13u) << getVersion();
  // Not closed, as CublasLt never closes it: its static C++ runtime's allocations would dangle.
}

TEST(CublasLt, UnloadableLibraryIsANotFoundErrorNamingItAndTheVariable) {
  ScopedEnv env("INGOT_CUBLASLT_LIBRARY", "/nonexistent/libcublasLt.so.13");
  StatusOr<std::unique_ptr<CublasLt>> lt = CublasLt::load();
  ASSERT_FALSE(lt.ok());
  EXPECT_EQ(lt.status().code(), StatusCode::kNotFound);
  EXPECT_NE(lt.status().message().find("/nonexistent/libcublasLt.so.13"), std::string::npos)
      << lt.status().message();
  EXPECT_NE(lt.status().message().find("INGOT_CUBLASLT_LIBRARY"), std::string::npos)
      << lt.status().message();
}

TEST(CublasLt, LibraryWithoutTheEntryPointsIsAnErrorNamingTheSymbol) {
  ScopedEnv env("INGOT_CUBLASLT_LIBRARY", "libc.so.6");
  StatusOr<std::unique_ptr<CublasLt>> lt = CublasLt::load();
  ASSERT_FALSE(lt.ok());
  EXPECT_NE(lt.status().message().find("libc.so.6 has no cublasLtCreate"), std::string::npos)
      << lt.status().message();
}

}  // namespace
}  // namespace ingot
