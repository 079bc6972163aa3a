//===- Entry.cpp - Run a manifest's whole function ------------------------===//

#include "flashlight/Runtime/Entry.h"

#include "flashlight/Runtime/DType.h"
#include "flashlight/Runtime/Gemm.h"
#include "flashlight/Runtime/Reference.h"

#include <fstream>
#include <sstream>

using namespace flashlight::runtime;
using json = nlohmann::json;

namespace {

/// A value's description ({"dtype", "shape"}) as a parameter.
ParamInfo valueInfo(const json &j, const std::string &name) {
  ParamInfo p;
  p.name = j.value("name", name);
  p.dtype = j.at("dtype");
  p.shape = j.at("shape").get<std::vector<int64_t>>();
  dtypeSize(p.dtype); // Rejects unknown dtypes now.
  for (int64_t d : p.shape)
    if (d < 0)
      throw ManifestError(name + ": the entry's shapes must be static");
  return p;
}

size_t bytesOf(const ParamInfo &p) {
  return size_t(p.numElements()) * dtypeSize(p.dtype);
}

/// A value id of a step, checked against the number of values.
size_t valueId(const json &j, size_t count, const std::string &where) {
  if (!j.is_number_unsigned() || j.get<size_t>() >= count)
    throw ManifestError(where + ": bad value id " + j.dump());
  return j.get<size_t>();
}

/// Device bytes as doubles, and back.
HostTensor download(CUdeviceptr p, const ParamInfo &info) {
  std::vector<unsigned char> raw(bytesOf(info));
  CudaDriver &cuda = CudaDriver::get();
  cuda.check(cuda.cuMemcpyDtoH(raw.data(), p, raw.size()), "cuMemcpyDtoH");
  HostTensor t{info.shape, std::vector<double>(size_t(info.numElements()))};
  size_t size = dtypeSize(info.dtype);
  for (size_t e = 0; e < t.data.size(); ++e)
    t.data[e] = decodeElement(&raw[e * size], info.dtype);
  return t;
}

void upload(const HostTensor &t, CUdeviceptr p, const ParamInfo &info) {
  size_t size = dtypeSize(info.dtype);
  std::vector<unsigned char> raw(t.data.size() * size);
  for (size_t e = 0; e < t.data.size(); ++e)
    encodeElement(t.data[e], &raw[e * size], info.dtype);
  CudaDriver &cuda = CudaDriver::get();
  cuda.check(cuda.cuMemcpyHtoD(p, raw.data(), raw.size()), "cuMemcpyHtoD");
}

} // namespace

void EntryProgram::checkStep(const json &step, size_t attentionCount,
                             const std::string &where) const {
  std::string op = step.at("op");
  auto ids = [&](const char *key) {
    for (const json &v : step.at(key))
      valueId(v, values.size(), where);
  };
  if (op == "empty" || op == "constant") {
    valueId(step.at("result"), values.size(), where);
    if (op == "constant" && !step.at("file").is_string())
      throw ManifestError(where + ": a constant without a file");
  } else if (op == "reshape") {
    valueId(step.at("source"), values.size(), where);
    valueId(step.at("result"), values.size(), where);
  } else if (op == "kernel" || op == "attention") {
    ids("args");
    ids("results");
    if (op == "kernel" && (!step.at("kernel").is_string() ||
                           !step.at("grid").is_number_integer() ||
                           !step.at("block").is_number_integer()))
      throw ManifestError(where + ": a kernel step needs kernel, grid, block");
    if (op == "attention" &&
        step.value("attention", size_t(0)) >= attentionCount)
      throw ManifestError(where + ": no attention " +
                          step.value("attention", json(0)).dump());
  } else {
    throw ManifestError(where + ": unknown step " + op);
  }
}

EntryProgram::EntryProgram(const std::string &path) : path(path) {
  std::ifstream in(path);
  if (!in)
    throw ManifestError("cannot open manifest " + path);
  json manifest;
  try {
    manifest = json::parse(in);
    size_t slash = path.find_last_of('/');
    directory = slash == std::string::npos ? "." : path.substr(0, slash);
    entry = manifest.value("entry", json(nullptr));
    if (!entry.is_object() || !entry.contains("steps"))
      throw ManifestError(path + " has no entry steps: its function is its "
                                 "attention kernel (run it without --entry)");
    const json &infos = entry.at("values");
    for (size_t v = 0; v < infos.size(); ++v)
      values.push_back(valueInfo(infos[v], "value " + std::to_string(v)));
    const json &inputs = entry.at("inputs");
    if (inputs.size() > values.size())
      throw ManifestError(path + ": more entry inputs than values");
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!inputs[i].contains("file"))
        callerInputs.push_back(
            valueInfo(inputs[i], "input " + std::to_string(i)));
    for (const json &r : entry.at("results")) {
      size_t v = valueId(r, values.size(), path + " (entry results)");
      results.push_back(values[v]);
    }
    size_t attentionCount = manifest.contains("attentions")
                                ? manifest.at("attentions").size()
                                : manifest.value("kernel", json()).is_string();
    for (size_t i = 0; i < entry.at("steps").size(); ++i)
      checkStep(entry["steps"][i], attentionCount,
                path + " (entry step " + std::to_string(i) + ")");
  } catch (const json::exception &e) {
    throw ManifestError("bad manifest " + path + ": " + e.what());
  }
  pointers.assign(values.size(), 0);
  ownsPointer.assign(values.size(), false);
}

EntryProgram::~EntryProgram() {
  for (size_t v = 0; v < pointers.size(); ++v)
    if (ownsPointer[v])
      CudaDriver::get().cuMemFree(pointers[v]);
}

CUdeviceptr EntryProgram::buffer(size_t v) {
  if (!pointers[v]) {
    CudaDriver &cuda = CudaDriver::get();
    cuda.check(
        cuda.cuMemAlloc(&pointers[v], std::max<size_t>(bytesOf(values[v]), 1)),
        "cuMemAlloc");
    ownsPointer[v] = true;
  }
  return pointers[v];
}

std::vector<int64_t> EntryProgram::shapeOf(size_t v) const {
  return values[v].shape;
}

const KernelManifest &EntryProgram::attentionManifest(size_t k) {
  auto it = attentionManifests.find(k);
  if (it == attentionManifests.end()) {
    KernelManifest all = KernelManifest::load(path, k);
    it =
        attentionManifests
            .emplace(k, all.forArtifact(chooseArtifact(all, computeCapability)))
            .first;
  }
  return it->second;
}

Kernel &EntryProgram::attention(size_t k) {
  std::unique_ptr<Kernel> &slot = attentions[k];
  if (!slot)
    slot = std::make_unique<Kernel>(KernelManifest::load(path, k),
                                    computeCapability);
  return *slot;
}

std::vector<CUdeviceptr>
EntryProgram::run(const std::vector<CUdeviceptr> &inputs, EntryMode mode,
                  bool poison, CUstream stream) {
  if (inputs.size() != callerInputs.size())
    throw ManifestError(entry.value("function", std::string("the entry")) +
                        " takes " + std::to_string(callerInputs.size()) +
                        " tensors, got " + std::to_string(inputs.size()));
  CudaDriver &cuda = CudaDriver::get();
  if (!computeCapability)
    computeCapability = cuda.currentDevice().second;
  libraryGemms = kernelGemms = 0;
  whyKernels.clear();
  // The inputs: the caller's buffers, and constants from their files.
  const json &listed = entry.at("inputs");
  auto load = [&](size_t v, const std::string &file) {
    if (pointers[v])
      return; // Loaded by an earlier run.
    std::ifstream in(directory + "/" + file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof())
      throw ManifestError("cannot read constant " + file);
    if (bytes.size() != bytesOf(values[v]))
      throw ManifestError("constant " + file + " has " +
                          std::to_string(bytes.size()) + " bytes, want " +
                          std::to_string(bytesOf(values[v])));
    cuda.check(cuda.cuMemcpyHtoD(buffer(v), bytes.data(), bytes.size()),
               "cuMemcpyHtoD");
  };
  for (size_t i = 0, next = 0; i < listed.size(); ++i) {
    if (listed[i].contains("file")) {
      load(i, listed[i].at("file"));
    } else {
      pointers[i] = inputs[next++];
      ownsPointer[i] = false;
    }
  }
  for (const json &step : entry.at("steps")) {
    std::string op = step.at("op");
    if (op == "empty") {
      size_t v = valueId(step.at("result"), values.size(), "empty");
      cuda.check(cuda.cuMemsetD8Async(buffer(v), 0, bytesOf(values[v]), stream),
                 "cuMemsetD8Async");
    } else if (op == "constant") {
      load(valueId(step.at("result"), values.size(), "constant"),
           step.at("file"));
    } else if (op == "reshape") {
      size_t from = valueId(step.at("source"), values.size(), "reshape"),
             to = valueId(step.at("result"), values.size(), "reshape");
      if (bytesOf(values[from]) != bytesOf(values[to]))
        throw ManifestError("reshape of value " + std::to_string(from) +
                            " changes its size");
      pointers[to] = pointers[from]; // A view: the same bytes.
      ownsPointer[to] = false;
    } else if (op == "kernel") {
      runKernelStep(step, mode, poison, stream);
    } else if (op == "attention") {
      runAttentionStep(step, mode, stream);
    } else {
      throw ManifestError(path + ": unknown entry step " + op);
    }
  }
  std::vector<CUdeviceptr> out;
  for (const json &r : entry.at("results"))
    out.push_back(pointers[r.get<size_t>()]);
  return out;
}

void EntryProgram::runKernelStep(const json &step, EntryMode mode, bool poison,
                                 CUstream stream) {
  CudaDriver &cuda = CudaDriver::get();
  std::vector<size_t> args, created;
  for (const json &a : step.at("args"))
    args.push_back(valueId(a, values.size(), "kernel step"));
  for (const json &r : step.at("results"))
    created.push_back(valueId(r, values.size(), "kernel step"));
  for (size_t r : created)
    if (poison)
      cuda.check(
          cuda.cuMemsetD8Async(buffer(r), 0xff, bytesOf(values[r]), stream),
          "cuMemsetD8Async");
  if (mode == EntryMode::Fast && step.contains("copy") &&
      runCopyStep(step, stream))
    return;
  if (mode == EntryMode::Fast && step.contains("einsum")) {
    // result = init + a b, on cuBLAS where it takes the product.
    std::string why;
    std::optional<GemmPlan> plan;
    if (args.size() == 4 && created.size() == 1 && args[3] == created[0]) {
      const ParamInfo &a = values[args[0]], &b = values[args[1]],
                      &c = values[created[0]];
      if (a.dtype != b.dtype || !Cublas::supports(a.dtype, c.dtype))
        why = "cuBLAS takes no " + a.dtype + " x " + b.dtype + " -> " +
              c.dtype + " product";
      else if (!(plan = planGemm(step.at("einsum"), a.shape, b.shape, c.shape)))
        why = "einsum " + step.at("einsum").get<std::string>() +
              " is no GEMM of these buffers";
      else if (!Cublas::get(&why))
        plan.reset();
    } else {
      why = "an einsum step of another form";
    }
    if (plan) {
      CUdeviceptr c = buffer(created[0]);
      cuda.check(cuda.cuMemcpyDtoDAsync(c, buffer(args[2]),
                                        bytesOf(values[created[0]]), stream),
                 "cuMemcpyDtoDAsync");
      Cublas::get()->gemm(*plan, values[args[0]].dtype,
                          values[created[0]].dtype, pointers[args[0]],
                          pointers[args[1]], c, stream);
      ++libraryGemms;
      return;
    }
    ++kernelGemms;
    if (whyKernels.empty())
      whyKernels = why;
  }
  std::vector<CUdeviceptr> ptrs;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t a : args) {
    ptrs.push_back(buffer(a));
    shapes.push_back(shapeOf(a));
  }
  if (!host)
    host = std::make_unique<HostKernels>(directory + "/" +
                                         chooseArtifact(entry.at("archs"),
                                                        path + " (entry)",
                                                        computeCapability));
  host->launch(step.at("kernel"), step.at("grid"), step.at("block"), ptrs,
               shapes, stream);
}

namespace {
/// The product of `shape`'s extents from `dim` on.
size_t extentFrom(const std::vector<int64_t> &shape, size_t dim) {
  size_t n = 1;
  for (size_t d = dim; d < shape.size(); ++d)
    n *= shape[d];
  return n;
}
} // namespace

bool EntryProgram::runCopyStep(const json &step, CUstream stream) {
  const json &copy = step.at("copy");
  std::vector<size_t> sources;
  for (const json &s : copy.at("sources"))
    sources.push_back(valueId(s, values.size(), "copy step"));
  size_t to = valueId(step.at("results").at(0), values.size(), "copy step");
  std::vector<int64_t> out = shapeOf(to);
  size_t elements = extentFrom(out, 0);
  if (elements == 0)
    return true;
  size_t element = bytesOf(values[to]) / elements;
  // Each part: rows of `width` bytes, `srcPitch` apart in the source and
  // `dstPitch` apart in the result, starting `srcX` / `dstX` bytes in.
  struct Part {
    size_t source, srcX, srcPitch, dstX, dstPitch, width, rows;
  };
  std::vector<Part> parts;
  std::string kind = copy.at("kind");
  if (kind == "concat") {
    size_t dim = copy.at("dim");
    size_t offset = 0, rows = elements / extentFrom(out, dim);
    for (size_t s : sources) {
      std::vector<int64_t> in = shapeOf(s);
      size_t width = extentFrom(in, dim) * element;
      parts.push_back(
          {s, 0, width, offset, extentFrom(out, dim) * element, width, rows});
      offset += width;
    }
  } else if (kind == "slice" && sources.size() == 1) {
    std::vector<int64_t> in = shapeOf(sources[0]);
    std::vector<int64_t> offsets = copy.at("offsets"), sizes = copy.at("sizes");
    // One sliced dim `k` (the first whose extent changes); every later one
    // whole: a 2-D box.
    size_t k = 0;
    while (k < in.size() && sizes[k] == in[k])
      ++k;
    if (k == in.size())
      k = 0;
    for (size_t d = k + 1; d < in.size(); ++d)
      if (sizes[d] != in[d])
        return false;
    size_t inner = extentFrom(in, k + 1) * element;
    parts.push_back({sources[0], size_t(offsets[k]) * inner, in[k] * inner, 0,
                     sizes[k] * inner, sizes[k] * inner,
                     extentFrom(in, 0) / extentFrom(in, k)});
  } else {
    return false;
  }
  CudaDriver &cuda = CudaDriver::get();
  for (const Part &p : parts) {
    CudaMemcpy2D m;
    m.srcMemoryType = m.dstMemoryType = kDeviceMemory;
    m.srcDevice = buffer(p.source);
    m.srcXInBytes = p.srcX;
    m.srcPitch = p.srcPitch;
    m.dstDevice = buffer(to);
    m.dstXInBytes = p.dstX;
    m.dstPitch = p.dstPitch;
    m.WidthInBytes = p.width;
    m.Height = p.rows;
    cuda.check(cuda.cuMemcpy2DAsync(&m, stream), "cuMemcpy2DAsync");
  }
  return true;
}

void EntryProgram::runAttentionStep(const json &step, EntryMode mode,
                                    CUstream stream) {
  size_t k = step.value("attention", size_t(0));
  const KernelManifest &m = attentionManifest(k);
  // The step's arguments are the kernel's inputs, its results the outputs,
  // each in parameter order.
  std::vector<size_t> args, created;
  for (const json &a : step.at("args"))
    args.push_back(valueId(a, values.size(), "attention step"));
  for (const json &r : step.at("results"))
    created.push_back(valueId(r, values.size(), "attention step"));
  std::vector<size_t> byParam;
  size_t nextArg = 0, nextResult = 0;
  for (const ParamInfo &p : m.params) {
    std::vector<size_t> &from = p.output ? created : args;
    size_t &next = p.output ? nextResult : nextArg;
    if (next >= from.size())
      throw ManifestError("attention step " + std::to_string(k) +
                          ": fewer values than kernel parameters");
    byParam.push_back(from[next++]);
  }
  if (nextArg != args.size() || nextResult != created.size())
    throw ManifestError("attention step " + std::to_string(k) +
                        ": more values than kernel parameters");
  if (mode == EntryMode::Fast) {
    std::vector<CUdeviceptr> ptrs;
    std::vector<std::vector<int64_t>> shapes;
    for (size_t v : byParam) {
      ptrs.push_back(buffer(v));
      shapes.push_back(shapeOf(v));
    }
    attention(k).launch(ptrs, shapes, stream);
    return;
  }
  // The fp64 reference on the host, on what the steps before computed.
  CudaDriver &cuda = CudaDriver::get();
  cuda.check(cuda.cuCtxSynchronize(), "entry steps");
  std::vector<HostTensor> tensors;
  for (size_t i = 0; i < byParam.size(); ++i)
    tensors.push_back(m.params[i].output
                          ? HostTensor{m.params[i].shape, {}}
                          : download(buffer(byParam[i]), values[byParam[i]]));
  std::vector<HostTensor> outs = evaluateReference(m, tensors, {});
  size_t o = 0;
  for (size_t i = 0; i < byParam.size(); ++i)
    if (m.params[i].output)
      upload(outs[o++], buffer(byParam[i]), values[byParam[i]]);
}
