//===- flashlight-run.cpp - Run and check a compiled attention kernel -----===//
//
//   flashlight-run <manifest.json> [--entry] [--check] [--bench] [--seed=N]
//                  [--iters=N] [--check-rows=N] [--json=<file>]
//
// Fills the inputs with seeded random values, poisons the outputs (NaN),
// launches the kernel, and with --check compares with the fp64 reference of
// the same attention program (after a second launch into outputs poisoned
// again: whatever state a kernel keeps, such as its tile counter, must
// serve the next launch); with --bench reports the median of --iters
// launches timed with CUDA events. With --entry it runs the user's whole
// function (the manifest entry's steps: contractions on cuBLAS, the
// attention kernels), checked against the same steps on their simple
// kernels with each attention by the fp64 reference. Exit status: 0 pass,
// 1 check failed, 2 usage, manifest or driver error.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Runtime/CudaDriver.h"
#include "flashlight/Runtime/DType.h"
#include "flashlight/Runtime/Entry.h"
#include "flashlight/Runtime/Kernel.h"
#include "flashlight/Runtime/Reference.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <execinfo.h>
#include <unistd.h>

using namespace flashlight::runtime;
using json = nlohmann::json;

namespace {

struct Options {
  std::string manifest;
  bool check = false, bench = false, entry = false;
  uint64_t seed = 0;
  int iters = 20;
  int64_t checkRows = -1;
  std::string jsonPath;
  /// The extents of a kernel with runtime shapes (--extents).
  std::map<std::string, int64_t> extents;
  /// Inputs (the entry's with --entry, else the kernel's parameters) that
  /// take random 0 / 1 values, as a mask does (--binary-inputs).
  std::set<int64_t> binaryInputs;
};

const char kUsage[] =
    "usage: flashlight-run <manifest.json> [options]\n"
    "\n"
    "Loads a kernel compiled by flashlight-compile, runs it on random inputs\n"
    "(NaN-poisoned outputs) and prints a JSON result.\n"
    "\n"
    "  --entry          run the whole function (the manifest's entry steps)\n"
    "  --check          compare with the fp64 reference of the program\n"
    "  --check-rows=N   query rows to check (default: all up to 256, else 64)\n"
    "  --bench          time the kernel (median of --iters launches)\n"
    "  --iters=N        launches to time (default 20)\n"
    "  --seed=N         seed of the random inputs (default 0)\n"
    "  --extents=B=2,M=300,...\n"
    "                   the sizes of a kernel with runtime shapes\n"
    "  --binary-inputs=I,J,...\n"
    "                   inputs (by position: the entry's with --entry, else\n"
    "                   the kernel's parameters) filled with random 0 / 1, as\n"
    "                   a mask a program turns into -1e9 * (1 - mask)\n"
    "  --json=FILE      also write the result to FILE\n"
    "  --help           this text\n";

/// `text` as a whole number in [lo, hi], or a ManifestError naming `flag`.
int64_t parseInteger(const std::string &flag, const std::string &text,
                     int64_t lo, int64_t hi) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    throw ManifestError(flag + "=" + text + ": expected an integer in [" +
                        std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

/// "B=2,M=300" as {B: 2, M: 300}.
std::map<std::string, int64_t> parseExtents(const std::string &text) {
  std::map<std::string, int64_t> extents;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ManifestError("--extents: expected SYMBOL=SIZE items, got '" +
                          item + "'");
    extents[item.substr(0, eq)] = parseInteger(
        "--extents " + item.substr(0, eq), item.substr(eq + 1), 0, INT32_MAX);
  }
  return extents;
}

/// "1,3" as {1, 3}.
std::set<int64_t> parsePositions(const std::string &flag,
                                 const std::string &text) {
  std::set<int64_t> positions;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ','))
    positions.insert(parseInteger(flag, item, 0, INT32_MAX));
  if (positions.empty())
    throw ManifestError(flag + "=: expected input positions");
  return positions;
}

/// The options; `help` is set for --help (usage goes to stdout).
Options parse(int argc, char **argv, bool &help) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    size_t eq = a.find('=');
    std::string flag = a.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : a.substr(eq + 1);
    bool hasValue = eq != std::string::npos;
    if (a == "--help" || a == "-h")
      help = true;
    else if (a == "--check")
      o.check = true;
    else if (a == "--bench")
      o.bench = true;
    else if (a == "--entry")
      o.entry = true;
    else if (flag == "--seed" && hasValue)
      o.seed = parseInteger(flag, value, 0, INT64_MAX);
    else if (flag == "--iters" && hasValue)
      o.iters = parseInteger(flag, value, 1, 1000000);
    else if (flag == "--check-rows" && hasValue)
      o.checkRows = parseInteger(flag, value, 0, INT64_MAX);
    else if (flag == "--extents" && hasValue)
      o.extents = parseExtents(value);
    else if (flag == "--binary-inputs" && hasValue)
      o.binaryInputs = parsePositions(flag, value);
    else if (flag == "--json" && hasValue && !value.empty())
      o.jsonPath = value;
    else if (!a.empty() && a[0] != '-' && o.manifest.empty())
      o.manifest = a;
    else
      throw ManifestError("unknown argument '" + a + "' (see --help)");
  }
  if (o.manifest.empty() && !help)
    throw ManifestError(std::string("no manifest given\n") + kUsage);
  return o;
}

/// Random contents for an input: normal floats rounded to the dtype, small
/// non-negative integers (ids, buckets) non-decreasing along the last dim
/// (document ids are contiguous runs, so a document mask has empty, partial
/// and full tiles), random bits for i1 and for a `binary` input of any type.
HostTensor randomInput(const ParamInfo &p, uint64_t seed, bool binary) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 3), bit(0, 1);
  HostTensor t{p.shape, std::vector<double>(size_t(p.numElements()))};
  for (double &x : t.data) {
    if (p.dtype == "i1" || binary)
      x = bit(rng);
    else if (p.dtype[0] == 'i')
      x = small(rng);
    else
      x = roundToDType(normal(rng), p.dtype);
  }
  int64_t last = p.shape.empty() ? 1 : std::max<int64_t>(p.shape.back(), 1);
  if (p.dtype[0] == 'i' && p.dtype != "i1" && !binary)
    for (size_t row = 0; row < t.data.size(); row += size_t(last))
      std::sort(t.data.begin() + row, t.data.begin() + row + last);
  return t;
}

/// Query rows to check: all, or `count` spread over [0, M) with both ends.
std::vector<int64_t> rowsToCheck(int64_t m, int64_t count) {
  std::vector<int64_t> rows;
  if (count < 0 || count >= m) {
    for (int64_t i = 0; i < m; ++i)
      rows.push_back(i);
    return rows;
  }
  for (int64_t k = 0; k < count; ++k)
    rows.push_back(count == 1 ? 0 : k * (m - 1) / (count - 1));
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

/// With FLASHLIGHT_TRACE set, names each stage on stderr (unbuffered), to
/// locate a crash.
void trace(const char *stage) {
  static bool on = std::getenv("FLASHLIGHT_TRACE") != nullptr;
  if (on)
    std::fprintf(stderr, "flashlight-run: %s\n", stage);
}

/// Compares output `p` (its bytes `raw`) with `expected`: every element
/// written (no NaN left of the poison), the checked elements (not NaN in
/// `expected`) within `tol` in relative Frobenius norm. Sets `ok`.
json compare(const ParamInfo &p, const std::vector<unsigned char> &raw,
             const HostTensor &expected, double tol, bool &ok) {
  size_t esize = dtypeSize(p.dtype);
  int64_t nan = 0;
  double diff2 = 0, ref2 = 0, maxAbs = 0;
  for (size_t e = 0; e < expected.data.size(); ++e) {
    double got = decodeElement(&raw[e * esize], p.dtype);
    if (std::isnan(got)) {
      ++nan;
      continue;
    }
    double want = expected.data[e];
    if (std::isnan(want))
      continue; // row not checked
    if (std::isinf(want) || std::isinf(got)) {
      if (got != want)
        maxAbs = INFINITY;
      continue;
    }
    diff2 += (got - want) * (got - want);
    ref2 += want * want;
    maxAbs = std::max(maxAbs, std::fabs(got - want));
  }
  double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  ok = nan == 0 && rel <= tol && std::isfinite(maxAbs);
  return {{"rel_err", rel},
          {"max_abs", maxAbs},
          {"nan_or_unwritten", nan},
          {"tol", tol},
          {"pass", ok}};
}

/// The bytes of `bytes` at device pointer `p`.
std::vector<unsigned char> download(CUdeviceptr p, size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  CudaDriver &cuda = CudaDriver::get();
  cuda.check(cuda.cuMemcpyDtoH(raw.data(), p, raw.size()), "cuMemcpyDtoH");
  return raw;
}

/// Throws where --binary-inputs names a position past `params` or one of
/// an output (`what`: what the positions index).
void checkBinaryInputs(const Options &o, const std::vector<ParamInfo> &params,
                       const char *what) {
  for (int64_t i : o.binaryInputs) {
    if (size_t(i) >= params.size())
      throw ManifestError("--binary-inputs: position " + std::to_string(i) +
                          " past the " + std::to_string(params.size()) + " " +
                          what);
    if (params[i].output)
      throw ManifestError("--binary-inputs: position " + std::to_string(i) +
                          " is an output, not an input");
  }
}

/// Device buffers of `params` (inputs random from `seed`, 0 / 1 at
/// `binary` positions; outputs poisoned) and the inputs' values on the host.
std::vector<CUdeviceptr> allocate(const std::vector<ParamInfo> &params,
                                  uint64_t seed,
                                  const std::set<int64_t> &binary,
                                  std::vector<HostTensor> &host) {
  CudaDriver &cuda = CudaDriver::get();
  std::vector<CUdeviceptr> device;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo &p = params[i];
    size_t bytes = size_t(p.numElements()) * dtypeSize(p.dtype);
    CUdeviceptr ptr = 0;
    cuda.check(cuda.cuMemAlloc(&ptr, std::max<size_t>(bytes, 1)), "cuMemAlloc");
    device.push_back(ptr);
    host.push_back(p.output ? HostTensor{p.shape, {}}
                            : randomInput(p, seed * 1000003 + i,
                                          binary.count(int64_t(i)) != 0));
    if (!p.output) {
      std::vector<unsigned char> raw(bytes);
      for (size_t e = 0; e < host[i].data.size(); ++e)
        encodeElement(host[i].data[e], &raw[e * dtypeSize(p.dtype)], p.dtype);
      cuda.check(cuda.cuMemcpyHtoD(ptr, raw.data(), bytes), "cuMemcpyHtoD");
    } else {
      // Poison: all-ones bytes are NaN in every float format.
      cuda.check(cuda.cuMemsetD8(ptr, 0xff, bytes), "cuMemsetD8");
    }
  }
  return device;
}

/// The median of `iters` timed calls of `launch` (after 3 warm-ups), as
/// result fields.
json timeLaunches(const std::function<void()> &launch, int iters) {
  CudaDriver &cuda = CudaDriver::get();
  CUevent start, stop;
  cuda.check(cuda.cuEventCreate(&start, 0), "cuEventCreate");
  cuda.check(cuda.cuEventCreate(&stop, 0), "cuEventCreate");
  for (int i = 0; i < 3; ++i)
    launch();
  std::vector<float> times;
  for (int i = 0; i < iters; ++i) {
    cuda.check(cuda.cuEventRecord(start, nullptr), "cuEventRecord");
    launch();
    cuda.check(cuda.cuEventRecord(stop, nullptr), "cuEventRecord");
    cuda.check(cuda.cuEventSynchronize(stop), "cuEventSynchronize");
    float ms = 0;
    cuda.check(cuda.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  cuda.cuEventDestroy(start);
  cuda.cuEventDestroy(stop);
  return {{"median_ms", times[times.size() / 2]}, {"iters", iters}};
}

/// The --json file, opened before the run: an unwritable path is an error
/// now, not a silent exit 0 at the end.
std::ofstream openJson(const Options &o) {
  std::ofstream jsonFile;
  if (!o.jsonPath.empty()) {
    jsonFile.open(o.jsonPath);
    if (!jsonFile)
      throw ManifestError("cannot write --json file " + o.jsonPath + ": " +
                          std::strerror(errno));
  }
  return jsonFile;
}

/// Prints `result` (flushed now: it must not depend on how teardown goes)
/// and writes it to the --json file.
void emit(const json &result, std::ofstream &jsonFile, const Options &o) {
  std::cout << result.dump() << std::endl;
  trace("printed");
  if (jsonFile.is_open()) {
    jsonFile << result.dump(2) << "\n";
    jsonFile.close();
    if (!jsonFile)
      throw ManifestError("writing " + o.jsonPath + " failed");
  }
}

/// The device's name, after initializing it; its compute capability in
/// `cc`.
std::string initDevice(int &cc) {
  CudaDriver &cuda = CudaDriver::get();
  cc = cuda.initDevice();
  char deviceName[256] = {0};
  cuda.cuDeviceGetName(deviceName, sizeof(deviceName), 0);
  return deviceName;
}

/// The tolerance of a program whose lowest precision is `dtypes`' lowest.
double toleranceOf(const std::vector<ParamInfo> &params) {
  double tol = 1e-4;
  for (const ParamInfo &p : params)
    tol = std::max(tol, p.dtype == "bf16"  ? 2e-2
                        : p.dtype == "f16" ? 5e-3
                                           : 0.0);
  return tol;
}

/// --entry: the user's whole function.
int runEntry(const Options &o) {
  if (!o.extents.empty() || o.checkRows >= 0)
    throw ManifestError("--entry runs at the entry's static shapes and "
                        "checks every row: --extents and --check-rows do "
                        "not apply");
  EntryProgram program(o.manifest);
  std::vector<ParamInfo> inputs = program.inputs();
  checkBinaryInputs(o, inputs, "inputs of the entry");
  std::ofstream jsonFile = openJson(o);
  int cc = 0;
  std::string device = initDevice(cc);
  std::vector<HostTensor> host;
  std::vector<CUdeviceptr> buffers =
      allocate(inputs, o.seed, o.binaryInputs, host);
  CudaDriver &cuda = CudaDriver::get();
  trace("entry");
  std::vector<CUdeviceptr> out =
      program.run(buffers, EntryMode::Fast, /*poison=*/true);
  cuda.check(cuda.cuCtxSynchronize(), "entry steps");
  json result = {
      {"name", o.manifest},
      {"device", device},
      {"entry", true},
      {"seed", o.seed},
      {"gemms",
       {{"cublas", program.libraryGemms}, {"kernel", program.kernelGemms}}}};
  if (!program.whyKernels.empty())
    result["gemms"]["why_kernel"] = program.whyKernels;
  bool pass = true;
  if (o.check) {
    std::vector<std::vector<unsigned char>> got;
    for (size_t r = 0; r < out.size(); ++r)
      got.push_back(
          download(out[r], size_t(program.outputs()[r].numElements()) *
                               dtypeSize(program.outputs()[r].dtype)));
    out = program.run(buffers, EntryMode::Reference, /*poison=*/true);
    cuda.check(cuda.cuCtxSynchronize(), "reference steps");
    std::vector<ParamInfo> all = inputs;
    all.insert(all.end(), program.outputs().begin(), program.outputs().end());
    double tol = toleranceOf(all);
    for (size_t r = 0; r < out.size(); ++r) {
      const ParamInfo &p = program.outputs()[r];
      std::vector<unsigned char> raw = download(out[r], got[r].size());
      HostTensor expected{p.shape,
                          std::vector<double>(size_t(p.numElements()))};
      for (size_t e = 0; e < expected.data.size(); ++e)
        expected.data[e] = decodeElement(&raw[e * dtypeSize(p.dtype)], p.dtype);
      bool ok = false;
      result["check"]["result" + std::to_string(r)] =
          compare(p, got[r], expected, tol, ok);
      pass &= ok;
    }
  }
  if (o.bench)
    result.update(timeLaunches(
        [&] { program.run(buffers, EntryMode::Fast, /*poison=*/false); },
        o.iters));
  for (CUdeviceptr p : buffers)
    cuda.cuMemFree(p);
  result["pass"] = pass;
  emit(result, jsonFile, o);
  return pass ? 0 : 1;
}

/// The attention kernel alone.
int run(const Options &o) {
  if (o.entry)
    return runEntry(o);
  KernelManifest manifest = KernelManifest::load(o.manifest);
  std::ofstream jsonFile = openJson(o);
  if (manifest.hasRuntimeShapes()) {
    if (o.extents.empty())
      throw ManifestError(manifest.name +
                          " takes runtime shapes: give their sizes with "
                          "--extents=B=...,M=...");
    manifest = manifest.withExtents(o.extents);
  } else if (!o.extents.empty()) {
    throw ManifestError(manifest.name + " has static shapes: --extents "
                                        "does not apply");
  }
  std::vector<std::vector<int64_t>> shapes;
  for (const ParamInfo &p : manifest.params)
    shapes.push_back(p.shape);
  checkBinaryInputs(o, manifest.params, "parameters of the kernel");

  trace("init");
  int cc = 0;
  std::string device = initDevice(cc);
  Kernel kernel(manifest, cc);
  std::vector<HostTensor> host;
  std::vector<CUdeviceptr> buffers =
      allocate(manifest.params, o.seed, o.binaryInputs, host);

  trace("launch");
  CudaDriver &cuda = CudaDriver::get();
  kernel.launch(buffers, shapes);
  cuda.check(cuda.cuCtxSynchronize(), "kernel execution");
  if (o.check) {
    for (size_t i = 0; i < manifest.params.size(); ++i)
      if (const ParamInfo &p = manifest.params[i]; p.output)
        cuda.check(
            cuda.cuMemsetD8(buffers[i], 0xff,
                            size_t(p.numElements()) * dtypeSize(p.dtype)),
            "cuMemsetD8");
    kernel.launch(buffers, shapes);
    cuda.check(cuda.cuCtxSynchronize(), "kernel execution (second launch)");
  }
  trace("check");

  json result = {{"name", manifest.name},
                 {"device", device},
                 {"artifact", kernel.artifact()},
                 {"seed", o.seed}};
  bool pass = true;
  if (o.check) {
    const ParamInfo *q = manifest.find("q0");
    int64_t m = q->shape[2];
    int64_t count = o.checkRows >= 0 ? o.checkRows : (m <= 256 ? m : 64);
    std::vector<int64_t> rows = rowsToCheck(m, count);
    std::vector<HostTensor> ref = evaluateReference(manifest, host, rows);
    double tol = q->dtype == "bf16" ? 2e-2 : q->dtype == "f16" ? 5e-3 : 1e-4;
    size_t outIndex = 0;
    for (size_t i = 0; i < manifest.params.size(); ++i) {
      const ParamInfo &p = manifest.params[i];
      if (!p.output)
        continue;
      std::vector<unsigned char> raw =
          download(buffers[i], size_t(p.numElements()) * dtypeSize(p.dtype));
      bool ok = false;
      result["check"][p.name] = compare(p, raw, ref[outIndex++], tol, ok);
      result["check"][p.name]["rows_checked"] = rows.size();
      pass &= ok;
    }
  }
  if (o.bench)
    result.update(
        timeLaunches([&] { kernel.launch(buffers, shapes); }, o.iters));
  trace("free");
  for (CUdeviceptr p : buffers)
    cuda.cuMemFree(p);
  result["pass"] = pass;
  emit(result, jsonFile, o);
  trace("return");
  return pass ? 0 : 1;
}

} // namespace

/// A fatal signal (in the CUDA driver, say) prints the stack before the
/// process dies of it, so that a crash says where it happened.
void onFatalSignal(int signal) {
  static const char message[] = "flashlight-run: fatal signal; stack:\n";
  ssize_t ignored = write(STDERR_FILENO, message, sizeof(message) - 1);
  (void)ignored;
  void *frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

int main(int argc, char **argv) {
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    std::signal(signal, onFatalSignal);
  try {
    bool help = false;
    Options options = parse(argc, argv, help);
    if (help) {
      std::cout << kUsage;
      return 0;
    }
    int rc = run(options);
    trace("exit");
    return rc;
  } catch (const CudaError &e) {
    std::cerr << "flashlight-run: CUDA error: " << e.what() << "\n";
  } catch (const ManifestError &e) {
    std::cerr << "flashlight-run: error: " << e.what() << "\n";
  } catch (const std::exception &e) {
    std::cerr << "flashlight-run: error: " << e.what() << "\n";
  }
  return 2;
}
