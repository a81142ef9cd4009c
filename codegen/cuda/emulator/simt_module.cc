// Emulated modules: a CUDA C++ translation unit built by the host compiler into a shared object, cached and loaded.
//
// The build compiles the very text NVRTC compiles, with __CUDACC__, __CUDACC_RTC__ and
// __CUDA_ARCH__ defined as NVRTC defines them, the device prelude force-included
// (include/ingot_simt/device.h) and the stand-in CUDA headers first on the include path,
// through the instrumentation pass plugin (pass/SimtInstrument.cpp). After the text the
// build appends the kernel table (include/ingot_simt/kernel_table.h): one entry per
// `__global__` function it finds. The shared object is cached by the hash of everything that
// goes into it (the text, the flags, the prelude and stand-ins, the plugin, the compiler), so
// a module is compiled once per machine.

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cxxabi.h>
#include <xxhash.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "codegen/cuda/emulator/simt_internal.h"

extern char **environ;

namespace ingot {
namespace simt {

class Module {
 public:
  void *handle = nullptr;
  const KernelTable *kernels = nullptr;
  const SharedLayout *layout = nullptr;
  std::vector<std::pair<uintptr_t, uintptr_t>> segments;  ///< [start, end) of its PT_LOADs
  std::string path;
};

namespace {

std::string envOr(const char *name, const char *fallback) {
  const char *v = std::getenv(name);
  return v && *v ? v : fallback;
}

/// The emulator's toolchain: compiler, pass plugin, prelude folder (set at build time,
/// INGOT_SIMT_CXX / INGOT_SIMT_PLUGIN / INGOT_SIMT_INCLUDE override).
struct Toolchain {
  std::string cxx, plugin, include;
  uint64_t hash = 0;  ///< of the plugin, the headers and the compiler's identity
};

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const Toolchain &toolchain() {
  static const Toolchain tc = [] {
    Toolchain t;
    t.cxx = envOr("INGOT_SIMT_CXX", INGOT_SIMT_DEFAULT_CXX);
    t.plugin = envOr("INGOT_SIMT_PLUGIN", INGOT_SIMT_DEFAULT_PLUGIN);
    t.include = envOr("INGOT_SIMT_INCLUDE", INGOT_SIMT_DEFAULT_INCLUDE);
    std::string identity = t.cxx + "\n" + readFile(t.plugin);
    for (const char *header : {"ingot_simt/abi.h", "ingot_simt/device.h", "ingot_simt/kernel_table.h",
                               "cuda_bf16.h", "cuda_fp16.h", "cuda_fp8.h", "mma.h", "cuda_runtime.h"})
      identity += readFile(t.include + "/" + header);
    struct stat st {};
    if (stat(t.cxx.c_str(), &st) == 0)
      identity += std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime);
    t.hash = XXH64(identity.data(), identity.size(), 0);
    return t;
  }();
  return tc;
}

std::string cacheDir(const ModuleOptions &options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  if (const char *v = std::getenv("INGOT_SIMT_CACHE"); v && *v) return v;
  if (const char *v = std::getenv("XDG_CACHE_HOME"); v && *v) return std::string(v) + "/ingot/simt";
  if (const char *v = std::getenv("HOME"); v && *v) return std::string(v) + "/.cache/ingot/simt";
  return "/tmp/ingot-simt";
}

void makeDirs(const std::string &path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
}

bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// The `__global__` functions of `source`: (name, the first __launch_bounds__ argument or "0").
std::vector<std::pair<std::string, std::string>> findKernels(const std::string &source) {
  std::vector<std::pair<std::string, std::string>> kernels;
  const std::string key = "__global__";
  for (size_t at = source.find(key); at != std::string::npos; at = source.find(key, at + 1)) {
    if ((at > 0 && identChar(source[at - 1])) || identChar(source[at + key.size()])) continue;
    size_t i = at + key.size();
    auto skip = [&] {
      while (i < source.size() && std::isspace(static_cast<unsigned char>(source[i]))) ++i;
    };
    auto word = [&] {
      const size_t start = i;
      while (i < source.size() && identChar(source[i])) ++i;
      return source.substr(start, i - start);
    };
    skip();
    if (word() != "void") continue;
    skip();
    std::string bounds = "0";
    size_t save = i;
    if (word() == "__launch_bounds__") {
      skip();
      if (i >= source.size() || source[i] != '(') continue;
      int depth = 0;
      size_t argEnd = std::string::npos;
      const size_t open = i;
      for (; i < source.size(); ++i) {
        if (source[i] == '(') ++depth;
        if (source[i] == ')' && --depth == 0) break;
        if (source[i] == ',' && depth == 1 && argEnd == std::string::npos) argEnd = i;
      }
      if (argEnd == std::string::npos) argEnd = i;
      bounds = source.substr(open + 1, argEnd - open - 1);
      ++i;
      skip();
    } else {
      i = save;
    }
    const std::string name = word();
    skip();
    if (!name.empty() && i < source.size() && source[i] == '(') kernels.emplace_back(name, bounds);
  }
  return kernels;
}

std::string kernelTable(const std::vector<std::pair<std::string, std::string>> &kernels) {
  std::string text =
      "\n// ---- the SIMT emulator's kernel table (codegen/cuda/emulator/simt_module.cc)\n"
      "#include \"ingot_simt/kernel_table.h\"\n"
      "static const ::ingot::simt::KernelEntry __ingot_simt_kernel_entries[] = {\n";
  for (const auto &[name, bounds] : kernels)
    text += "  INGOT_SIMT_KERNEL(" + name + ", static_cast<int>(" + bounds + ")),\n";
  text += "};\nextern \"C\" const ::ingot::simt::KernelTable __ingot_simt_kernels = {" +
          std::to_string(kernels.size()) + ", __ingot_simt_kernel_entries};\n";
  return text;
}

/// Whether this CPU has FMA3: `fmaf` in the kernels is then one instruction instead of a call
/// into libm (the same fused result either way). Decided here at run time, never by the
/// build machine, and part of the cache key, so a cache never serves it to a CPU without.
bool hostHasFma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("fma");
}

std::vector<std::string> compileArgs(const Toolchain &tc, int arch, const std::string &input,
                                     const std::string &output) {
  std::vector<std::string> args = {tc.cxx,
                                   "-std=c++17",
                                   "-O2",
                                   "-gline-tables-only",
                                   "-fPIC",
                                   "-shared",
                                   "-fno-exceptions",
                                   "-fno-rtti",
                                   "-fno-strict-aliasing",
                                   "-ffp-contract=off",
                                   "-fno-math-errno",
                                   "-w",
                                   "-D__CUDACC__",
                                   "-D__CUDACC_RTC__",
                                   "-D__CUDA_ARCH__=" + std::to_string(arch),
                                   "-DINGOT_SIMT=1",
                                   "-I" + tc.include,
                                   "-include",
                                   "ingot_simt/device.h",
                                   "-fpass-plugin=" + tc.plugin,
                                   "-x",
                                   "c++",
                                   input,
                                   "-o",
                                   output};
  if (hostHasFma()) args.push_back("-mfma");
  return args;
}

/// Runs `args`, its output into `log`; returns the exit status (-1 when it could not start).
int run(const std::vector<std::string> &args, const std::string &log) {
  std::vector<char *> argv;
  for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct SegmentQuery {
  uintptr_t base;
  std::vector<std::pair<uintptr_t, uintptr_t>> *out;
};

int collectSegments(struct dl_phdr_info *info, size_t, void *data) {
  auto *q = static_cast<SegmentQuery *>(data);
  if (info->dlpi_addr != q->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_LOAD) {
      const uintptr_t start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
      q->out->emplace_back(start, start + info->dlpi_phdr[i].p_memsz);
    }
  return 1;
}

std::shared_ptr<Module> open(const std::string &path, std::string *error) {
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    *error = "cannot load the emulated module " + path + ": " + (why ? why : "dlopen failed");
    return nullptr;
  }
  auto m = std::make_shared<Module>();
  m->handle = handle;
  m->path = path;
  m->kernels = static_cast<const KernelTable *>(dlsym(handle, "__ingot_simt_kernels"));
  m->layout = static_cast<const SharedLayout *>(dlsym(handle, "__ingot_simt_shared_layout"));
  if (!m->kernels || !m->layout) {
    *error = "the emulated module " + path + " has no kernel table or shared layout (built without "
             "the instrumentation pass?)";
    dlclose(handle);
    return nullptr;
  }
  struct link_map *map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map) {
    SegmentQuery q{map->l_addr, &m->segments};
    dl_iterate_phdr(collectSegments, &q);
  }
  return m;
}

std::mutex gModulesMutex;
std::map<uint64_t, std::weak_ptr<Module>> gModules;

}  // namespace

std::shared_ptr<Module> loadModule(const std::string &source, const ModuleOptions &options,
                                   std::string *error) {
  const Toolchain &tc = toolchain();
  const auto kernels = findKernels(source);
  const std::string text = source + kernelTable(kernels);
  const std::string flags =
      "arch=" + std::to_string(options.arch) + (hostHasFma() ? ";fma" : "");
  uint64_t key = XXH64(text.data(), text.size(), tc.hash);
  key = XXH64(flags.data(), flags.size(), key);
  std::lock_guard<std::mutex> lock(gModulesMutex);  // one build at a time per process
  if (auto it = gModules.find(key); it != gModules.end())
    if (auto m = it->second.lock()) return m;
  const std::string dir = cacheDir(options);
  makeDirs(dir);
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(key));
  const std::string so = dir + "/" + name + ".so";
  struct stat st {};
  if (stat(so.c_str(), &st) != 0) {
    static std::atomic<int> counter{0};
    const std::string tmp = dir + "/" + name + "." + std::to_string(getpid()) + "." +
                            std::to_string(counter++);
    {
      std::ofstream out(tmp + ".cu", std::ios::binary);
      out << text;
      if (!out) {
        *error = "cannot write " + tmp + ".cu (set INGOT_SIMT_CACHE to a writable folder)";
        return nullptr;
      }
    }
    const int status = run(compileArgs(tc, options.arch, tmp + ".cu", tmp + ".so"), tmp + ".log");
    if (status != 0) {
      std::string log = readFile(tmp + ".log");
      if (log.size() > 12000) log = log.substr(0, 12000) + "\n[...]";
      *error = (status < 0 ? "cannot run " + tc.cxx
                           : "the emulated build of the module failed (" + tc.cxx + ", status " +
                                 std::to_string(status) + "); source kept in " + tmp + ".cu:\n" + log);
      return nullptr;
    }
    if (std::rename((tmp + ".so").c_str(), so.c_str()) != 0) {
      *error = "cannot move the emulated module into " + so;
      return nullptr;
    }
    std::remove((tmp + ".cu").c_str());
    std::remove((tmp + ".log").c_str());
  }
  auto m = open(so, error);
  if (m) gModules[key] = m;
  return m;
}

const KernelEntry *findKernel(const Module &module, const std::string &name) {
  for (unsigned long long i = 0; i < module.kernels->count; ++i)
    if (name == module.kernels->kernels[i].name) return &module.kernels->kernels[i];
  return nullptr;
}

std::vector<size_t> kernelParamSizes(const KernelEntry &kernel) {
  return std::vector<size_t>(kernel.param_sizes, kernel.param_sizes + kernel.num_params);
}

const char *kernelName(const KernelEntry &kernel) { return kernel.name; }

bool moduleContains(const Module &module, uintptr_t address) {
  for (const auto &[start, end] : module.segments)
    if (address >= start && address < end) return true;
  return false;
}

const SharedLayout *moduleSharedLayout(const Module &module) { return module.layout; }

std::string demangle(const char *name) {
  int status = 0;
  char *text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !text) return name;
  std::string result = text;
  std::free(text);
  return result;
}

}  // namespace simt
}  // namespace ingot
