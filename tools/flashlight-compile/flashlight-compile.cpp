//===- flashlight-compile.cpp - attn IR to PTX, cubin and a manifest ------===//
//
//   flashlight-compile model.mlir -o out/ [--arch=sm_80,sm_90a]
//                      [--emit=mlir|ptx|cubin] [--print-ir-after=<pass>]
//                      [--mlir-timing] [--block-m=N] [--block-n=N]
//
// Writes out/<name>.mlir (the first arch's kernel IR; out/<name>.<arch>.mlir
// for an arch whose kernel differs, e.g. wgmma on sm_90a),
// out/<name>.<arch>.ptx, out/<name>.ptx (the lowest arch's, JIT-compilable on
// newer GPUs), out/<name>.<arch>.cubin (ptxas) and out/<name>.json (the
// manifest).
//
//===----------------------------------------------------------------------===//

#include "flashlight/Conversion/Passes.h"
#include "flashlight/Dialect/Attn/Analysis/KernelFacts.h"
#include "flashlight/Dialect/Attn/IR/AttnDialect.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"
#include "flashlight/Import/InputChecks.h"
#include "flashlight/Import/JSON/JSONGraph.h"
#include "flashlight/Import/Passes.h"
#include "flashlight/Import/StableHLO/StableHLODialect.h"
#include "flashlight/Import/Torch/TorchDialect.h"
#include "flashlight/Target/Manifest.h"
#include "flashlight/Target/Pipeline.h"
#include "flashlight/Target/ShapeClass.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/TosaToLinalg/TosaToLinalg.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>

using namespace mlir;
using json = nlohmann::json;
namespace cl = llvm::cl;

static cl::OptionCategory toolCategory("flashlight-compile options");

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input.mlir>"),
                                      cl::Required, cl::cat(toolCategory));
static cl::opt<std::string> outputDir("o", cl::desc("Output directory"),
                                      cl::value_desc("dir"), cl::init("."),
                                      cl::cat(toolCategory));
static cl::list<std::string>
    archs("arch",
          cl::desc("Target chips, comma separated (default: sm_80,sm_90a; "
                   "supported: sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a)"),
          cl::CommaSeparated, cl::cat(toolCategory));
static cl::opt<std::string> emit("emit", cl::desc("mlir, ptx or cubin"),
                                 cl::init("cubin"), cl::cat(toolCategory));
static cl::opt<std::string>
    printAfter("print-ir-after",
               cl::desc("Print the IR after this pass (e.g. attn-tile)"),
               cl::cat(toolCategory));
static cl::opt<bool> dumpPipeline(
    "dump-pass-pipeline",
    cl::desc("Print the pass pipelines this compile runs, per arch"),
    cl::cat(toolCategory));
static cl::opt<bool> timing("mlir-timing", cl::desc("Time each pass"),
                            cl::cat(toolCategory));
static cl::opt<int64_t>
    blockM("block-m",
           cl::desc("Query rows per block (default: the kernel plan's)"),
           cl::init(0), cl::cat(toolCategory));
static cl::opt<int64_t>
    blockN("block-n", cl::desc("Keys per KV tile (default: the kernel plan's)"),
           cl::init(0), cl::cat(toolCategory));
// Re-shaping (attn-specialize); -1 / empty keeps the program's own sizes.
static cl::opt<int64_t> batch("batch", cl::desc("Batch size B"), cl::init(-1),
                              cl::cat(toolCategory));
static cl::opt<int64_t> qHeads("q-heads", cl::desc("Query heads"), cl::init(-1),
                               cl::cat(toolCategory));
static cl::opt<int64_t> kvHeads("kv-heads", cl::desc("Key/value heads"),
                                cl::init(-1), cl::cat(toolCategory));
static cl::opt<int64_t> qLen("q-len", cl::desc("Query length M"), cl::init(-1),
                             cl::cat(toolCategory));
static cl::opt<int64_t> kvLen("kv-len", cl::desc("Key/value length N"),
                              cl::init(-1), cl::cat(toolCategory));
static cl::opt<int64_t> headDim("head-dim", cl::desc("Head dim (Dqk = Dv)"),
                                cl::init(-1), cl::cat(toolCategory));
static cl::opt<int64_t>
    warpRows("warp-rows",
             cl::desc("Query rows per warp of the tensor-core generator (16 "
                      "or 32; default: 32 for 128-row tiles, else 16)"),
             cl::init(0), cl::cat(toolCategory));
static cl::opt<std::string> dtype("dtype",
                                  cl::desc("Q/K/V element type: f16, bf16"),
                                  cl::cat(toolCategory));
static cl::opt<bool> tensorCores(
    "tensor-cores",
    cl::desc("Use the mma.sync code generator where the program fits "
             "(block sizes then default to its tile heuristic, "
             "tensorCoreTiles); =false forces the "
             "reference generator"),
    cl::init(true), cl::cat(toolCategory));
static cl::opt<bool>
    wgmma("wgmma",
          cl::desc("On sm_90a, use the warpgroup-MMA (wgmma) code generator "
                   "where the tensor-core one applies; =false keeps mma.sync"),
          cl::init(true), cl::cat(toolCategory));
static cl::opt<bool> blockMask(
    "block-mask",
    cl::desc("For masks that read data (document ids, ...), on the "
             "tensor-core path: build a block mask per call with a generated "
             "pre-kernel; =false makes each block vote on its tiles instead"),
    cl::init(true), cl::cat(toolCategory));
static cl::opt<bool> overlapSoftmax(
    "overlap-softmax",
    cl::desc("With wgmma: software-pipeline the KV loop so that each "
             "warpgroup's softmax of a tile overlaps its P V of the previous "
             "one; =false keeps the plain loop"),
    cl::init(true), cl::cat(toolCategory));
static cl::opt<bool> decoupleWarpgroups(
    "decouple-warpgroups",
    cl::desc("With wgmma, two warpgroups on the plain KV loop: mbarriers "
             "(buffer full / empty) instead of a block-wide barrier per "
             "step; =false keeps the barrier"),
    cl::init(true), cl::cat(toolCategory));
static cl::opt<bool> producerWarpgroup(
    "producer-warpgroup",
    cl::desc("With wgmma and two warpgroups on the mbarrier loop: a third "
             "warpgroup copies the K/V tiles"),
    cl::init(true), cl::cat(toolCategory));
static cl::opt<bool> pingPong(
    "ping-pong",
    cl::desc("With --producer-warpgroup: the consumer warpgroups take turns "
             "issuing P V and the next S = Q K^T"),
    cl::init(true), cl::cat(toolCategory));
static cl::opt<bool> persistent(
    "persistent",
    cl::desc("A persistent grid (about one block per SM, each looping over "
             "work tiles) where the kernel plan picks one; =false keeps one "
             "work tile per block"),
    cl::init(true), cl::cat(toolCategory));
static cl::opt<bool>
    tma("tma",
        cl::desc("The producer warpgroup copies K/V (and Q where it copies "
                 "it) with TMA on sm_90a where the plan allows; =false keeps "
                 "cp.async"),
        cl::init(true), cl::cat(toolCategory));
static cl::opt<bool> bulkKeySide(
    "bulk-key-side",
    cl::desc("With wgmma, a key-side product's sums (the fused-query "
             "gradient's dQ) reach its output as TMA bulk reductions; "
             "=false keeps per-thread atomic adds"),
    cl::init(true), cl::cat(toolCategory));
static cl::opt<bool> tileCounter(
    "tile-counter",
    cl::desc("Where a mask makes the query tiles' work differ (causal, "
             "sliding windows): a persistent grid whose blocks draw work "
             "tiles from a counter, longest first (off by default: measured "
             "no faster than one work tile per block)"),
    cl::init(false), cl::cat(toolCategory));
static cl::opt<bool> branchLookahead(
    "branch-lookahead",
    cl::desc("With wgmma and several logit branches: issue the next "
             "branch's S = Q K^T before this branch's softmax"),
    cl::init(true), cl::cat(toolCategory));
static cl::opt<bool> gradient(
    "gradient",
    cl::desc("Compile the gradient program of the program's attention "
             "instead of the program: gradient(q, k, v, captures..., dout) "
             "-> (dq, dk, dv), each tensor in the attention's [B, H, N, D] "
             "layout (attn-gradient)"),
    cl::init(false), cl::cat(toolCategory));
static cl::opt<bool> unfusedKeyValue(
    "unfused-key-value-gradients",
    cl::desc("With --gradient: dK and dV as two attentions, each computing "
             "S and P, instead of one (the previous form, for A/B "
             "measurements; no effect without --gradient)"),
    cl::init(false), cl::cat(toolCategory));
static cl::opt<int64_t> fuseKeyValueFrom(
    "fuse-key-value-from",
    cl::desc("With --gradient: dK and dV in one attention only where the "
             "query and key lengths are both at least this (0: always; "
             "attn-gradient's fuse-key-value-from)"),
    cl::init(2048), cl::cat(toolCategory));
static cl::opt<int64_t> perHeadKeyValueFrom(
    "per-head-key-value-from",
    cl::desc("With --gradient, GQA and a mask that reads positions: dK and "
             "dV per query head where the query and key lengths are both at "
             "least this (0: always; attn-gradient's "
             "per-head-key-value-from)"),
    cl::init(4096), cl::cat(toolCategory));
static cl::opt<bool> fusedQueryGradient(
    "fused-query-gradient",
    cl::desc("With --gradient: where dK and dV are one attention, dQ from "
             "its key-side product (S and dP once for all three, dQ "
             "accumulated across blocks) instead of an attention of its own "
             "(attn-gradient's fuse-query)"),
    cl::init(false), cl::cat(toolCategory));
static cl::opt<bool> savedStatistics(
    "saved-statistics",
    cl::desc("With --gradient: the gradient program takes, after dout, "
             "each branch's output and log-sum-exp (a ring's merged ones) "
             "instead of computing the forward again"),
    cl::init(false), cl::cat(toolCategory));

static cl::opt<bool> scoreCaptureGradients(
    "score-capture-gradients",
    cl::desc("With --gradient: also return the gradients of tensors the "
             "score reads once (pair biases, slopes, relative-position "
             "tables): a pair bias's written per element by the dQ "
             "attention's kernel, the others from S and dP materialized as "
             "[B, H, M, N] f32 on the reference path"),
    cl::init(false), cl::cat(toolCategory));
static cl::opt<bool> materializedCaptureGradients(
    "materialized-capture-gradients",
    cl::desc("With --score-capture-gradients: pair biases' and slopes' "
             "gradients from S and dP materialized too (the previous form, "
             "for A/B runs)"),
    cl::init(false), cl::cat(toolCategory));

static cl::opt<bool> returnLse(
    "return-lse",
    cl::desc("A training forward: the entry also returns the attention's "
             "log-sum-exp (f32 [B, H, M]; one softmax branch without "
             "epilogue), for the gradient program with --saved-statistics"),
    cl::init(false), cl::cat(toolCategory));

static cl::opt<bool> staticStrides(
    "static-strides",
    cl::desc("Compile the contiguous strides in: callers must pass "
             "contiguous tensors (default: the kernels read each tensor's "
             "strides at run time; the innermost must be 1)"),
    cl::init(false), cl::cat(toolCategory));
static cl::opt<std::string> runtimeShapesFrom(
    "runtime-shapes-from",
    cl::desc("The same program exported at other shapes: the kernels take "
             "at run time every batch size and sequence length in which the "
             "two differ (the program is refused where it depends on its "
             "shapes otherwise)"),
    cl::value_desc("program"), cl::cat(toolCategory));
static cl::opt<bool>
    explain("flashlight-explain",
            cl::desc("Say what the analysis found and which code generator was "
                     "used, and why"),
            cl::cat(toolCategory));
static cl::opt<std::string> ptxasPath("ptxas", cl::desc("ptxas to use"),
                                      cl::cat(toolCategory));
static cl::opt<std::string> nameOpt("name",
                                    cl::desc("Output base name (default: "
                                             "the input file's stem)"),
                                    cl::cat(toolCategory));

namespace {

/// The chips the code generators target: mma.sync and cp.async need
/// sm_80; wgmma needs sm_90a. Newer chips run sm_80 PTX through the JIT.
const std::array<StringRef, 6> kSupportedArchs = {"sm_80", "sm_86", "sm_87",
                                                  "sm_89", "sm_90", "sm_90a"};

/// The manifest's name of a code generator.
std::string codegenName(flashlight::attn::Generator generator) {
  return generator == flashlight::attn::Generator::mma_sync
             ? "mma.sync"
             : flashlight::attn::stringifyGenerator(generator).str();
}

/// The kernel plan as the manifest records it (every field, by name).
json planJson(flashlight::attn::KernelPlanAttr plan) {
  return {{"generator", codegenName(plan.getGenerator())},
          {"block_m", plan.getBlockM()},
          {"block_n", plan.getBlockN()},
          {"warp_rows", plan.getWarpRows()},
          {"consumer_groups", plan.getConsumerGroups()},
          {"producer", plan.getProducer()},
          {"loop", flashlight::attn::stringifyLoopForm(plan.getLoop()).str()},
          {"ping_pong", plan.getPingPong()},
          {"lookahead", plan.getLookahead()},
          {"sparsity",
           flashlight::attn::stringifySparsity(plan.getSparsity()).str()},
          {"query_in_smem", plan.getQueryInSmem()},
          {"staged_reads", plan.getStagedReads()},
          {"shared_memory", plan.getSharedMemory()},
          {"min_blocks", plan.getMinBlocks()},
          {"producer_registers", plan.getProducerRegisters()},
          {"consumer_registers", plan.getConsumerRegisters()},
          {"runtime_strides", plan.getRuntimeStrides()},
          {"persistent", plan.getPersistent()},
          {"query_ahead", plan.getQueryAhead()},
          {"tma", plan.getTma()},
          {"bulk_key_side", plan.getBulkKeySide()},
          {"tile_counter", plan.getTileCounter()}};
}

/// `name` as a PTX identifier ([A-Za-z_][A-Za-z0-9_]*): other characters
/// (`<lambda>`, Unicode, `.`) become `_`; a leading digit gets a prefix.
std::string ptxIdentifier(StringRef name) {
  std::string id;
  for (char c : name)
    id += llvm::isAlnum(c) || c == '_' ? c : '_';
  if (id.empty() || llvm::isDigit(id.front()))
    id = "fn_" + id;
  return id;
}

/// Renames every function of `module` whose name is not a PTX identifier
/// (kernel symbols come from function names); names stay unique.
void sanitizeSymbols(ModuleOp module) {
  SymbolTable symbols(module);
  for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
    std::string id = ptxIdentifier(func.getName());
    if (id == func.getName())
      continue;
    std::string unique = id;
    for (int n = 1; symbols.lookup(unique); ++n)
      unique = id + "_" + std::to_string(n);
    if (failed(
            symbols.rename(func, StringAttr::get(module.getContext(), unique))))
      continue;
  }
}

/// Prints `message` as an error and returns 1.
int fail(const Twine &message) {
  llvm::errs() << "flashlight-compile: error: " << message << "\n";
  return 1;
}

LogicalResult writeFile(StringRef path, StringRef contents) {
  std::string error;
  auto file = openOutputFile(path, &error);
  if (!file) {
    llvm::errs() << "flashlight-compile: error: " << error << "\n";
    return failure();
  }
  file->os() << contents;
  file->keep();
  return success();
}

/// With --dump-pass-pipeline, prints `pm`'s pipeline (`stage` for `chip`).
void printPipeline(PassManager &pm, StringRef chip, StringRef stage) {
  if (!dumpPipeline)
    return;
  llvm::outs() << chip << " " << stage << ": ";
  pm.printAsTextualPipeline(llvm::outs());
  llvm::outs() << "\n";
}

void configure(PassManager &pm) {
  if (timing)
    pm.enableTiming();
  if (!printAfter.empty()) {
    // Module-scope printing needs a single-threaded pass manager.
    pm.getContext()->disableMultithreading();
    pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                        [](Pass *pass, Operation *) {
                          return pass->getArgument() == printAfter;
                        },
                        /*printModuleScope=*/true,
                        /*printAfterOnlyOnChange=*/false);
  }
}

/// The ptxas to run, or empty.
std::string findPtxas() {
  if (!ptxasPath.empty())
    return llvm::sys::fs::can_execute(ptxasPath) ? std::string(ptxasPath) : "";
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *root = std::getenv(var)) {
      SmallString<256> p(root);
      llvm::sys::path::append(p, "bin", "ptxas");
      if (llvm::sys::fs::can_execute(p))
        return std::string(p);
    }
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/ptxas"))
    return "/usr/local/cuda/bin/ptxas";
  if (auto found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  return "";
}

/// Runs ptxas on `ptx`; returns its -v report.
FailureOr<std::string> assemble(StringRef ptxas, StringRef chip, StringRef ptx,
                                StringRef cubin) {
  SmallString<128> log;
  llvm::sys::fs::createTemporaryFile("ptxas", "log", log);
  std::string arch = ("-arch=" + chip).str();
  SmallVector<StringRef> args = {ptxas, arch, "-O3", "-v", ptx, "-o", cubin};
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log),
                                          StringRef(log)};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0,
                                     &error);
  auto buffer = llvm::MemoryBuffer::getFile(log);
  std::string report = buffer ? (*buffer)->getBuffer().str() : "";
  llvm::sys::fs::remove(log);
  if (rc != 0) {
    llvm::errs() << report;
    fail("ptxas failed for " + chip + (error.empty() ? "" : ": " + error));
    return failure();
  }
  return report;
}

/// Fills registers / spill bytes of entry `kernel` from a ptxas -v report
/// (the module also holds other kernels: a block-mask pre-kernel, the
/// program's other attentions).
void ptxasInfo(StringRef fullReport, StringRef kernel, json &info) {
  std::string header = ("Compiling entry function '" + kernel + "'").str();
  StringRef report = fullReport;
  size_t start = report.find(header);
  // Another kernel's numbers would be wrong: none rather than those.
  if (start == StringRef::npos)
    return;
  size_t end = report.find("Compiling entry function", start + 1);
  report = report.substr(start, end == StringRef::npos ? StringRef::npos
                                                       : end - start);
  SmallVector<StringRef> m;
  if (llvm::Regex("Used ([0-9]+) registers").match(report, &m))
    info["registers"] = std::stoi(m[1].str());
  if (llvm::Regex("([0-9]+) bytes spill stores").match(report, &m))
    info["spill_store_bytes"] = std::stoi(m[1].str());
  if (llvm::Regex("([0-9]+) bytes smem").match(report, &m))
    info["shared_bytes"] = std::stoi(m[1].str());
  else
    info["shared_bytes"] = 0;
  if (llvm::Regex("([0-9]+) bytes stack frame").match(report, &m))
    info["stack_frame_bytes"] = std::stoi(m[1].str());
}

/// The program in `path` (MLIR text or a flashlight-graph JSON file), or
/// null after a diagnostic. `source` keeps its text.
OwningOpRef<ModuleOp> parseProgram(StringRef path, llvm::SourceMgr &sourceMgr,
                                   MLIRContext *context, std::string &source) {
  std::string error;
  auto input = openInputFile(path, &error);
  if (!input) {
    fail(error);
    return nullptr;
  }
  source = input->getBuffer().str();
  flashlight::TextChecks checks = flashlight::checkText(source);
  if (checks.nesting > flashlight::kMaxNesting) {
    fail(path + " nests brackets " + Twine(checks.nesting) + " deep (at most " +
         Twine(flashlight::kMaxNesting) + " are accepted)");
    return nullptr;
  }
  if (checks.openStringLine) {
    fail(path + ":" + Twine(checks.openStringLine) +
         ": a string literal is not closed on its line");
    return nullptr;
  }
  // The diagnostic handler quotes lines of the first file's buffer.
  bool first = sourceMgr.getNumBuffers() == 0;
  if (first)
    sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  OwningOpRef<ModuleOp> module =
      path.ends_with(".json")
          ? flashlight::importJSONGraph(source, path, context)
      : first ? parseSourceFile<ModuleOp>(sourceMgr, context)
              : parseSourceString<ModuleOp>(source, context, path);
  if (!module || failed(verify(*module)))
    return nullptr;
  sanitizeSymbols(*module);
  return module;
}

/// For programs that are not attn IR already: imports StableHLO, raises
/// the attention (attn-raise), and moves it into a kernel function of its
/// own (attn-outline). Returns the manifest's `entry` (how the user's
/// function feeds the kernels; null for attn programs), erasing the user's
/// function from `module`; `attentions` gets the kernel functions' names,
/// in manifest order.
LogicalResult raiseAndOutline(ModuleOp module) {
  bool stablehlo = false, torch = false, tosa = false, attention = false;
  module.walk([&](Operation *op) {
    stablehlo |= op->getName().getDialectNamespace() == "stablehlo";
    torch |= op->getName().getDialectNamespace() == "torch";
    tosa |= op->getName().getDialectNamespace() == "tosa";
    attention |= isa<flashlight::attn::AttentionOp>(op);
  });
  MLIRContext *ctx = module.getContext();
  PassManager pm(ctx);
  if (stablehlo) {
    pm.addPass(flashlight::createImportStableHLO());
    pm.addPass(createCanonicalizerPass());
  }
  if (torch) {
    pm.addPass(flashlight::createImportTorch());
    pm.addPass(createCanonicalizerPass());
  }
  if (tosa) {
    // torch-mlir's TOSA output: upstream's lowering to linalg on tensors.
    // No profile validation: torch-mlir emits f64 constants and i64 casts
    // that the lowering handles but the TOSA profiles do not list.
    TosaToLinalgOptions linalg;
    tosa::addTosaToLinalgPasses(pm, linalg, TosaToLinalgNamedOptions(),
                                std::nullopt);
    pm.addNestedPass<func::FuncOp>(createTosaToArithPass());
    pm.addNestedPass<func::FuncOp>(createTosaToTensorPass());
    pm.addPass(createCanonicalizerPass());
  }
  if (!attention) {
    // One form for every importer (the JSON graph's too): what the raise
    // reads is canonical IR.
    pm.addPass(createCanonicalizerPass());
    flashlight::attn::AttnRaiseOptions raise;
    raise.explain = explain;
    pm.addNestedPass<func::FuncOp>(flashlight::attn::createAttnRaise(raise));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  if (returnLse)
    pm.addPass(flashlight::attn::createAttnReturnLse());
  if (gradient) {
    flashlight::attn::AttnGradientOptions options;
    options.savedStatistics = savedStatistics;
    options.scoreCaptures = scoreCaptureGradients;
    options.captureTerms = !materializedCaptureGradients;
    options.fuseKeyValue = !unfusedKeyValue;
    options.fuseKeyValueFrom = fuseKeyValueFrom;
    options.perHeadKeyValueFrom = perHeadKeyValueFrom;
    options.fuseQuery = fusedQueryGradient;
    pm.addPass(flashlight::attn::createAttnGradient(options));
  }
  pm.addPass(flashlight::attn::createAttnExpandEmptyRows());
  // Imported programs always get an entry (the user's function calling
  // its kernel), also when the attention is all they compute.
  flashlight::attn::AttnOutlineOptions outline;
  outline.all = !attention;
  pm.addPass(flashlight::attn::createAttnOutline(outline));
  return pm.run(module);
}

/// The manifest's `entry` of `module` after raiseAndOutline (null for attn
/// programs): how the user's function feeds the kernels. Erases the user's
/// function from `module`; `attentions` gets the kernel functions' names,
/// in manifest order. A program whose function computes more than layouts
/// around its attentions gets `hostModule`, the reference path's kernels,
/// unless its shapes are `runtimeShapes` (those kernels are static).
FailureOr<json> describeProgram(ModuleOp module,
                                const std::string &manifestName,
                                bool runtimeShapes,
                                OwningOpRef<ModuleOp> &hostModule,
                                std::vector<std::string> &attentions) {
  MLIRContext *ctx = module.getContext();
  // The kernels: the functions holding an attention (one per distinct
  // attention); the host: the one calling them.
  SmallVector<func::FuncOp> kernels, hosts;
  for (auto func : module.getOps<func::FuncOp>()) {
    bool has = false;
    func.walk([&](flashlight::attn::AttentionOp) { has = true; });
    (has ? kernels : hosts).push_back(func);
    if (has)
      attentions.push_back(func.getName().str());
  }
  if (hosts.empty())
    return json();
  if (hosts.size() > 1) {
    fail("the program has more than one function besides its attentions");
    return failure();
  }
  SmallVector<func::CallOp> calls;
  hosts.front().walk([&](func::CallOp c) { calls.push_back(c); });
  for (func::FuncOp kernel : kernels)
    if (llvm::none_of(calls, [&](func::CallOp c) {
          return c.getCallee() == kernel.getName();
        })) {
      fail("the program's function does not call its attention " +
           kernel.getName());
      return failure();
    }
  // One attention called once: perhaps only layouts around it.
  func::CallOp call = calls.size() == 1 ? calls.front() : func::CallOp();
  // Tensor constants the kernels read are stored beside the manifest.
  unsigned constants = 0;
  auto writeConstant = [&](ElementsAttr attr) -> FailureOr<std::string> {
    FailureOr<std::vector<char>> bytes = flashlight::constantBytes(attr);
    if (failed(bytes))
      return failure();
    std::string file =
        manifestName + ".constant" + std::to_string(constants++) + ".bin";
    SmallString<256> path(outputDir);
    llvm::sys::path::append(path, file);
    if (failed(writeFile(path, StringRef(bytes->data(), bytes->size()))))
      return failure();
    return file;
  };
  std::string function = hosts.front().getName().str();
  if (call) {
    // The common case: layout copies around the attention, which the
    // runtime does itself (`sources`, `results` maps).
    FailureOr<json> entry = failure();
    {
      ScopedDiagnosticHandler quiet(ctx,
                                    [](Diagnostic &) { return success(); });
      entry = flashlight::describeEntry(hosts.front(), call, writeConstant);
    }
    if (succeeded(entry)) {
      (*entry)["function"] = function;
      hosts.front().erase();
      return entry;
    }
    constants = 0;
  }
  if (runtimeShapes) {
    hosts.front().emitError(
        "runtime shapes need a function that only changes layouts around "
        "one attention; this one computes more (its other operations would "
        "take the reference path, whose kernels are compiled per shape)");
    return failure();
  }
  // The reference path: what is not attention runs as simple kernels.
  if (explain)
    emitRemark(hosts.front().getLoc())
        << (calls.size() > 1
                ? "the function calls " + Twine(calls.size()) +
                      " attentions (" + Twine(kernels.size()) +
                      " distinct kernels); its other operations take the "
                      "reference path (one simple kernel each)"
            : call ? "the function computes more than layouts around its "
                     "attention: its other operations take the reference "
                     "path (one simple kernel each)"
                   : "no attention found: the function takes the reference "
                     "path (one simple kernel per operation)");
  OpBuilder b(ctx);
  hostModule = ModuleOp::create(module.getLoc());
  b.setInsertionPointToEnd(hostModule->getBody());
  auto host = cast<func::FuncOp>(b.clone(*hosts.front()));
  for (func::FuncOp kernel : kernels) {
    auto decl = func::FuncOp::create(b, kernel.getLoc(), kernel.getName(),
                                     kernel.getFunctionType());
    decl.setPrivate();
  }
  PassManager hostPM(ctx);
  configure(hostPM);
  hostPM.addPass(flashlight::createHostFuse());
  hostPM.addPass(flashlight::createHostSplitReductions());
  hostPM.addPass(flashlight::createHostToGPU());
  if (failed(hostPM.run(*hostModule)))
    return failure();
  FailureOr<json> entry =
      flashlight::describeHostSteps(host, attentions, writeConstant);
  if (failed(entry))
    return failure();
  (*entry)["function"] = function;
  hosts.front().erase();
  return entry;
}

/// Lowers the reference path's kernels (`flashlight_host` in `hostModule`)
/// to PTX (and cubin) for each arch; returns the manifest's artifacts.
FailureOr<json> compileHostKernels(ModuleOp hostModule, const std::string &name,
                                   const std::string &ptxas,
                                   flashlight::PipelineOptions options) {
  json artifacts = json::object();
  for (const std::string &chip : archs) {
    OwningOpRef<ModuleOp> copy = cast<ModuleOp>(hostModule->clone());
    options.chip = chip;
    PassManager pm(hostModule.getContext());
    configure(pm);
    flashlight::buildGPUToPTXPipeline(pm, options);
    if (failed(pm.run(*copy)))
      return failure();
    std::string ptx;
    copy->walk([&](gpu::BinaryOp binary) {
      auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
      ptx = object.getObject().getValue().str();
    });
    std::string stem = name + ".host." + chip;
    SmallString<256> path(outputDir);
    llvm::sys::path::append(path, stem + ".ptx");
    if (ptx.empty() || failed(writeFile(path, ptx)))
      return failure();
    json info = {{"ptx", stem + ".ptx"}};
    if (emit == "cubin") {
      SmallString<256> cubin(outputDir);
      llvm::sys::path::append(cubin, stem + ".cubin");
      if (failed(assemble(ptxas, chip, std::string(path), std::string(cubin))))
        return failure();
      info["cubin"] = stem + ".cubin";
    }
    artifacts[chip] = info;
  }
  return artifacts;
}

/// One attention kernel of the program and what the manifest says about
/// it: its parameters, its program for the reference interpreter, and per
/// arch its launch geometry, plan and artifacts.
struct AttentionKernel {
  std::string name;
  /// With runtime shapes: the variant for lengths that are multiples of the
  /// tiles (every tile whole; `aligned` per arch in the manifest).
  std::string aligned;
  json params;
  json program;
  json archs = json::object();
};

/// The launch geometry and kernel plan of kernel `name` in `kernels`
/// (lowered for `chip`), as the manifest's `archs.<chip>` records them.
FailureOr<json> kernelInfo(ModuleOp kernels, StringRef name, StringRef chip,
                           bool several) {
  std::vector<int64_t> block = {1, 1, 1};
  flashlight::attn::KernelPlanAttr plan;
  int64_t dynamicShared = 0;
  // Bytes every tensor pointer must be aligned to, beyond its element.
  int64_t pointerAlignment = 1;
  json blockMaskInfo;
  // TMA tensor maps, passed after the other parameters.
  json tensorMaps = json::array();
  kernels->walk([&](gpu::GPUFuncOp kernel) {
    // The block-mask pre-kernel, if any, is described by the attention
    // kernel's flashlight.block_mask.
    if (kernel.getName() != name)
      return;
    if (auto info =
            kernel->getAttrOfType<DictionaryAttr>("flashlight.block_mask")) {
      int64_t threads = info.getAs<IntegerAttr>("block").getInt();
      blockMaskInfo = {
          {"kernel", info.getAs<StringAttr>("kernel").str()},
          {"block", {threads, 1, 1}},
          {"batch", info.getAs<BoolAttr>("batch").getValue()},
          {"heads", info.getAs<BoolAttr>("heads").getValue()},
          {"grid_rule", "x = ceil(M / block_m) * ceil(N / block_n), y = "
                        "(heads ? Hq : 1), z = (batch ? B : 1)"},
          {"shape_rule", "i8 [batch ? B : 1, heads ? Hq : 1, "
                         "ceil(M / block_m), ceil(N / block_n)], passed "
                         "to both kernels after the other buffers (before "
                         "any tensor maps)"}};
    }
    if (auto bytes = kernel->getAttrOfType<IntegerAttr>(
            "flashlight.dynamic_shared_memory"))
      dynamicShared = bytes.getInt();
    if (auto bytes =
            kernel->getAttrOfType<IntegerAttr>("flashlight.pointer_alignment"))
      pointerAlignment = bytes.getInt();
    if (auto maps = kernel->getAttrOfType<ArrayAttr>("flashlight.tensor_maps"))
      for (auto map : maps.getAsRange<DictionaryAttr>()) {
        json entry = {
            {"param", map.getAs<IntegerAttr>("param").getInt()},
            {"box", llvm::map_to_vector(
                        map.getAs<ArrayAttr>("box").getAsRange<IntegerAttr>(),
                        [](IntegerAttr a) { return a.getInt(); })}};
        // Without the 128-byte swizzle (the launchers' default).
        if (auto swizzle = map.getAs<IntegerAttr>("swizzle"))
          entry["swizzle"] = swizzle.getInt();
        tensorMaps.push_back(entry);
      }
    if (auto known = kernel.getKnownBlockSizeAttr())
      block = {known[0], known[1], known[2]};
    plan = kernel->getAttrOfType<flashlight::attn::KernelPlanAttr>(
        flashlight::attn::kKernelPlanAttrName);
  });
  if (!plan) {
    fail("no kernel plan on kernel " + name + " for " + chip);
    return failure();
  }
  std::string codegen = codegenName(plan.getGenerator());
  if (explain) {
    std::string what =
        several ? (inputFile + ": " + name).str() : inputFile.getValue();
    llvm::errs() << what << ": code generator " << codegen << ", tiles "
                 << plan.getBlockM() << "x" << plan.getBlockN() << ", "
                 << block[0] << " threads per block for " << chip << "\n"
                 << what << ": kernel plan " << plan << "\n";
  }
  return json{{"block", block},
              {"block_m", plan.getBlockM()},
              {"block_n", plan.getBlockN()},
              {"codegen", codegen},
              {"plan", planJson(plan)},
              {"dynamic_shared_memory", dynamicShared},
              {"pointer_alignment", pointerAlignment},
              {"block_mask", blockMaskInfo},
              {"runtime_strides", plan.getRuntimeStrides()},
              {"persistent", plan.getPersistent()},
              {"tile_counter", plan.getTileCounter()},
              {"tensor_maps", tensorMaps}};
}

/// Lowers the attention kernels of `module` for each arch (one GPU module:
/// one kernel IR, PTX and cubin per arch hold them all) and fills each
/// kernel's `archs`. The first arch's kernel IR is <name>.mlir, another
/// arch's <name>.<arch>.mlir where it differs.
LogicalResult compileAttentions(ModuleOp module, const std::string &name,
                                const std::string &ptxas,
                                flashlight::PipelineOptions options,
                                std::vector<AttentionKernel> &attentions) {
  auto outPath = [&](StringRef suffix) {
    SmallString<256> p(outputDir);
    llvm::sys::path::append(p, name + suffix);
    return std::string(p);
  };
  MLIRContext *context = module.getContext();
  std::string firstIR;
  for (const std::string &chip : archs) {
    OwningOpRef<ModuleOp> kernels = cast<ModuleOp>(module->clone());
    options.chip = chip;
    {
      PassManager pm(context);
      configure(pm);
      flashlight::buildAttnToGPUPipeline(pm, options);
      printPipeline(pm, chip, "attn-to-gpu");
      if (failed(pm.run(*kernels)))
        return failure();
    }
    std::string kernelIR;
    llvm::raw_string_ostream(kernelIR) << *kernels;
    bool first = &chip == &archs.front();
    if (first)
      firstIR = kernelIR;
    std::string irFile =
        kernelIR == firstIR ? name + ".mlir" : name + "." + chip + ".mlir";
    if ((first || kernelIR != firstIR) &&
        failed(writeFile(outPath(irFile.substr(name.size())), kernelIR)))
      return failure();

    std::vector<json> infos;
    for (const AttentionKernel &kernel : attentions) {
      FailureOr<json> info =
          kernelInfo(*kernels, kernel.name, chip, attentions.size() > 1);
      if (failed(info))
        return failure();
      (*info)["kernel_ir"] = irFile;
      if (!kernel.aligned.empty()) {
        FailureOr<json> aligned =
            kernelInfo(*kernels, kernel.aligned, chip, /*several=*/true);
        if (failed(aligned))
          return failure();
        // The runtimes size the grid and the block mask by either kernel's
        // tiles and grid form: the plan takes the same facts for both.
        if ((*aligned)["block_m"] != (*info)["block_m"] ||
            (*aligned)["block_n"] != (*info)["block_n"] ||
            (*aligned)["persistent"] != (*info)["persistent"] ||
            (*aligned)["tile_counter"] != (*info)["tile_counter"]) {
          fail("the aligned kernel " + kernel.aligned +
               " was planned with other tiles or grid than " + kernel.name);
          return failure();
        }
        (*info)["aligned"] = {{"kernel", kernel.aligned}};
        for (const char *key :
             {"block", "block_m", "block_n", "dynamic_shared_memory",
              "block_mask", "persistent", "tile_counter", "tensor_maps"})
          (*info)["aligned"][key] = (*aligned)[key];
      }
      infos.push_back(*info);
    }
    if (emit != "mlir") {
      PassManager pm(context);
      configure(pm);
      flashlight::buildGPUToPTXPipeline(pm, options);
      printPipeline(pm, chip, "gpu-to-ptx");
      auto start = std::chrono::steady_clock::now();
      if (failed(pm.run(*kernels)))
        return failure();
      double ms = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
      std::string ptx;
      kernels->walk([&](gpu::BinaryOp binary) {
        auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
        ptx = object.getObject().getValue().str();
      });
      if (ptx.empty()) {
        fail("no PTX produced for " + chip);
        return failure();
      }
      if (failed(writeFile(outPath("." + chip + ".ptx"), ptx)) ||
          (first && failed(writeFile(outPath(".ptx"), ptx))))
        return failure();
      std::optional<std::string> report;
      double ptxasMs = 0;
      if (emit == "cubin") {
        auto start = std::chrono::steady_clock::now();
        FailureOr<std::string> assembled =
            assemble(ptxas, chip, outPath("." + chip + ".ptx"),
                     outPath("." + chip + ".cubin"));
        if (failed(assembled))
          return failure();
        report = *assembled;
        ptxasMs = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
      }
      for (auto [kernel, info] : llvm::zip(attentions, infos)) {
        info["ptx"] = name + "." + chip + ".ptx";
        info["lower_ms"] = ms;
        if (report) {
          ptxasInfo(*report, kernel.name, info);
          if (info.contains("aligned"))
            ptxasInfo(*report, kernel.aligned, info["aligned"]);
          info["cubin"] = name + "." + chip + ".cubin";
          info["ptxas_ms"] = ptxasMs;
        }
      }
    }
    for (auto [kernel, info] : llvm::zip(attentions, infos))
      kernel.archs[chip] = info;
  }
  return success();
}

/// Checks the options that do not need the program (fail() reports), and
/// finds ptxas for --emit=cubin.
LogicalResult checkOptions(std::string &ptxas) {
  auto refuse = [](const Twine &message) {
    fail(message);
    return failure();
  };
  if (savedStatistics && !gradient)
    return refuse("--saved-statistics is an option of --gradient");
  if (scoreCaptureGradients && !gradient)
    return refuse("--score-capture-gradients is an option of --gradient");
  if (returnLse && gradient)
    return refuse("--return-lse is for the forward, not --gradient");
  if (emit != "mlir" && emit != "ptx" && emit != "cubin")
    return refuse("--emit must be mlir, ptx or cubin, got '" + emit + "'");
  for (const std::string &chip : archs)
    if (!llvm::is_contained(kSupportedArchs, chip))
      return refuse("--arch=" + chip +
                    " is not supported: Flashlight generates "
                    "code for " +
                    llvm::join(kSupportedArchs, ", ") +
                    " (sm_80 PTX runs on newer GPUs through the driver's JIT)");
  if (emit != "cubin")
    return success();
  ptxas = findPtxas();
  if (ptxas.empty())
    return refuse(ptxasPath.empty()
                      ? Twine("ptxas not found (set CUDA_HOME, pass "
                              "--ptxas=<path>, or use --emit=ptx)")
                      : "ptxas not found at " + ptxasPath);
  return success();
}

/// An imported program is static (its runtime shapes come from a probe);
/// attn IR may say `?` for the batch and the sequence lengths.
LogicalResult checkStaticInputs(ModuleOp module) {
  bool attnIR = false;
  module->walk([&](flashlight::attn::AttentionOp) { attnIR = true; });
  if (attnIR)
    return success();
  for (auto func : module.getOps<func::FuncOp>())
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
      if (auto shaped = dyn_cast<ShapedType>(type);
          shaped && !shaped.hasStaticShape()) {
        Location loc = isa<UnknownLoc>(func.getLoc())
                           ? Location(FileLineColLoc::get(module.getContext(),
                                                          inputFile, 0, 0))
                           : func.getLoc();
        return emitError(loc)
               << "input " << i << " of '" << func.getName() << "' has type "
               << type
               << ": dynamic shapes are not imported; export the program at "
                  "static shapes (for kernels that take runtime shapes, also "
                  "at other shapes, and pass that with --runtime-shapes-from)";
      }
  return success();
}

/// The kernels' name: --name, else the input's stem (model.stablehlo.mlir
/// -> model).
std::string programName() {
  if (!nameOpt.empty())
    return nameOpt;
  StringRef stem = llvm::sys::path::stem(inputFile);
  for (StringRef kind :
       {".stablehlo", ".generic", ".torch", ".graph", ".linalg", ".tosa"})
    stem.consume_back(kind);
  return stem.str();
}

/// Re-shapes an attn program (--batch, --q-len, ...) before anything else
/// (its gradient program, --gradient, is built at the new shapes); an
/// imported one is refused.
LogicalResult reshapeProgram(ModuleOp module) {
  bool reshape = batch >= 0 || qHeads >= 0 || kvHeads >= 0 || qLen >= 0 ||
                 kvLen >= 0 || headDim >= 0 || !dtype.empty();
  if (!reshape)
    return success();
  bool imported = false;
  module->walk([&](Operation *op) {
    StringRef dialect = op->getName().getDialectNamespace();
    imported |= dialect == "stablehlo" || dialect == "torch" ||
                dialect == "tosa" || isa<linalg::LinalgOp>(op);
  });
  if (imported) {
    fail("--batch, --q-len, ... re-shape attn programs; export the "
         "imported program at the shapes wanted instead");
    return failure();
  }
  flashlight::attn::AttnSpecializeOptions sizes;
  sizes.batch = batch;
  sizes.qHeads = qHeads;
  sizes.kvHeads = kvHeads;
  sizes.qLen = qLen;
  sizes.kvLen = kvLen;
  sizes.headDim = headDim;
  sizes.elementType = dtype;
  PassManager pm(module.getContext());
  pm.addNestedPass<func::FuncOp>(flashlight::attn::createAttnSpecialize(sizes));
  return pm.run(module);
}

/// What the manifest says about attention kernel `kernelName` of `module`
/// before lowering: its parameters and program, and with runtime sequence
/// lengths a clone for lengths that whole tiles divide (which the runtimes
/// take where the call's lengths allow).
FailureOr<AttentionKernel> describeAttention(ModuleOp module,
                                             const std::string &kernelName) {
  auto func = module.lookupSymbol<func::FuncOp>(kernelName);
  if (!func) {
    fail("no kernel function " + kernelName);
    return failure();
  }
  if (failed(flashlight::nameDynamicExtents(func)))
    return failure();
  AttentionKernel kernel;
  kernel.name = kernelName;
  kernel.params = flashlight::describeParams(func);
  // The grid is (query tiles, H, B): CUDA caps its y and z at 65535.
  for (const json &p : kernel.params)
    if (p.value("name", "") == "q0" && p["shape"].size() == 4)
      for (int d : {0, 1})
        if (p["shape"][d].get<int64_t>() > 65535) {
          fail(Twine(d == 0 ? "batch" : "heads") + " = " +
               Twine(p["shape"][d].get<int64_t>()) +
               " exceeds the launch grid (at most 65535): split the "
               "batch or the heads over several calls");
          return failure();
        }
  FailureOr<json> program = flashlight::exportProgram(func);
  kernel.program = succeeded(program) ? *program : json();
  auto runtimeLength = [](const json &p) {
    const std::string role = p.value("name", "");
    return (role[0] == 'q' || role[0] == 'k' || role == "v") &&
           p["shape"].size() == 4 && p["shape"][2].get<int64_t>() < 0;
  };
  if (llvm::any_of(kernel.params, runtimeLength)) {
    OpBuilder b(func);
    b.setInsertionPointAfter(func);
    auto aligned = cast<func::FuncOp>(b.clone(*func));
    kernel.aligned = kernelName + "_aligned";
    aligned.setName(kernel.aligned);
    aligned.walk([&](flashlight::attn::AttentionOp op) {
      op->setAttr(flashlight::attn::kAlignedLengthsAttrName, b.getUnitAttr());
    });
  }
  return kernel;
}

/// The kernel plan's overrides (attn-plan decides the rest, per arch).
void setPlanOptions(flashlight::attn::AttnPlanOptions &plan) {
  plan.tensorCores = tensorCores;
  plan.wgmma = wgmma;
  plan.blockM = blockM;
  plan.blockN = blockN;
  plan.warpRows = warpRows;
  plan.blockMask = blockMask;
  plan.overlapSoftmax = overlapSoftmax;
  plan.decoupleWarpgroups = decoupleWarpgroups;
  plan.producerWarpgroup = producerWarpgroup;
  plan.pingPong = pingPong;
  plan.branchLookahead = branchLookahead;
  plan.staticStrides = staticStrides;
  plan.persistent = persistent;
  plan.tma = tma;
  plan.bulkKeySide = bulkKeySide;
  plan.tileCounter = tileCounter;
}

/// The compiled attentions in `manifest`: the first one's kernel at the
/// top level, with the first arch's launch geometry; a program with several
/// lists them all in `attentions`, which its entry's attention steps index.
void addAttentions(json &manifest, const std::string &name,
                   const std::vector<AttentionKernel> &attentions) {
  const AttentionKernel &first = attentions.front();
  manifest.update(json{{"kernel", first.name},
                       {"abi", "memref-descriptor"},
                       {"grid_rule", "x = ceil(M / block_m), y = Hq, z = B "
                                     "(from q0's shape)"},
                       {"params", first.params},
                       {"kernel_ir", name + ".mlir"},
                       {"program", first.program},
                       {"archs", first.archs}});
  // Kernels with runtime extents take them up to a bound the code
  // generators rely on (32-bit index differences).
  bool runtimeExtents = llvm::any_of(attentions, [](const AttentionKernel &k) {
    return llvm::any_of(k.params,
                        [](const json &p) { return p.contains("extents"); });
  });
  if (runtimeExtents)
    manifest["max_extent"] = flashlight::attn::kMaxRuntimeExtent;
  const json &lowest = first.archs[archs.front()];
  for (const char *key :
       {"block", "block_m", "block_n", "codegen", "dynamic_shared_memory",
        "pointer_alignment", "block_mask", "runtime_strides", "persistent",
        "tile_counter", "tensor_maps"})
    manifest[key] = lowest[key];
  if (attentions.size() < 2)
    return;
  manifest["manifest_version"] = flashlight::kManifestVersionAttentions;
  json list = json::array();
  for (const AttentionKernel &kernel : attentions)
    list.push_back({{"kernel", kernel.name},
                    {"params", kernel.params},
                    {"program", kernel.program},
                    {"archs", kernel.archs}});
  manifest["attentions"] = list;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // --help lists this tool's options, not every LLVM library's.
  cl::HideUnrelatedOptions(toolCategory);
  cl::ParseCommandLineOptions(argc, argv, "Flashlight attention compiler\n");
  // Both generators by default: mma.sync for Ampere and Ada (its PTX also
  // runs on newer GPUs through the driver's JIT), wgmma for Hopper.
  if (archs.empty()) {
    archs.push_back("sm_80");
    archs.push_back("sm_90a");
  }
  std::string ptxas;
  if (failed(checkOptions(ptxas)))
    return 1;

  DialectRegistry registry;
  registry.insert<
      flashlight::attn::AttnDialect, flashlight::shlo::StableHLODialect,
      flashlight::shlo::CHLODialect, flashlight::torchimport::TorchDialect,
      arith::ArithDialect, cf::ControlFlowDialect, func::FuncDialect,
      gpu::GPUDialect, linalg::LinalgDialect, LLVM::LLVMDialect,
      math::MathDialect, memref::MemRefDialect, NVVM::NVVMDialect,
      scf::SCFDialect, tensor::TensorDialect, tosa::TosaDialect>();
  flashlight::registerPipelineDependencies(registry);
  MLIRContext context(registry);
  // Diagnostics are for users: the location, not the op's IR.
  context.printOpOnDiagnostic(false);

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::string source;
  OwningOpRef<ModuleOp> module =
      parseProgram(inputFile, sourceMgr, &context, source);
  if (!module)
    return 1;
  // The probe: the same program at other shapes (--runtime-shapes-from).
  OwningOpRef<ModuleOp> probe;
  if (!runtimeShapesFrom.empty()) {
    std::string probeSource;
    probe = parseProgram(runtimeShapesFrom, sourceMgr, &context, probeSource);
    if (!probe)
      return 1;
  }
  if (failed(checkStaticInputs(*module)))
    return 1;

  std::string name = programName();
  if (auto ec = llvm::sys::fs::create_directories(outputDir))
    return fail("cannot create " + outputDir + ": " + ec.message());
  auto outPath = [&](StringRef suffix) {
    SmallString<256> p(outputDir);
    llvm::sys::path::append(p, name + suffix);
    return std::string(p);
  };
  if (failed(reshapeProgram(*module)))
    return 1;

  // Imported programs: StableHLO to linalg, then find the attentions.
  OwningOpRef<ModuleOp> hostModule;
  std::vector<std::string> attentionNames;
  if (failed(raiseAndOutline(*module)) ||
      (probe && failed(raiseAndOutline(*probe))))
    return 1;
  if (probe && failed(flashlight::generalizeShapes(
                   *module, *probe, llvm::sys::path::parent_path(inputFile),
                   llvm::sys::path::parent_path(runtimeShapesFrom))))
    return 1;
  FailureOr<json> entry =
      describeProgram(*module, name, bool(probe), hostModule, attentionNames);
  if (failed(entry))
    return 1;
  std::array<uint8_t, 32> hash = llvm::SHA256::hash(
      llvm::ArrayRef<uint8_t>((const uint8_t *)source.data(), source.size()));
  json manifest = {
      {"manifest_version", flashlight::kManifestVersion},
      {"compiler", "flashlight-compile 0.1 (MLIR " LLVM_VERSION_STRING ")"},
      {"source", inputFile.getValue()},
      {"input_sha256", llvm::toHex(hash, /*LowerCase=*/true)},
      {"name", name}};
  flashlight::PipelineOptions options;
  options.libdevice = flashlight::findLibdevice();
  // The reference path's kernels, when the program has any.
  auto compileHost = [&]() -> LogicalResult {
    if (!hostModule)
      return success();
    std::string hostIR;
    llvm::raw_string_ostream(hostIR) << *hostModule;
    if (failed(writeFile(outPath(".host.mlir"), hostIR)))
      return failure();
    (*entry)["kernel_ir"] = name + ".host.mlir";
    json artifacts = json::object();
    if (emit != "mlir") {
      FailureOr<json> compiled =
          compileHostKernels(*hostModule, name, ptxas, options);
      if (failed(compiled))
        return failure();
      artifacts = *compiled;
    }
    (*entry)["archs"] = artifacts;
    return success();
  };
  if (hostModule && module->getOps<func::FuncOp>().empty()) {
    // No attention: the entry's steps are the whole program.
    if (failed(compileHost()))
      return 1;
    manifest["kernel"] = nullptr;
    manifest["params"] = json::array();
    manifest["archs"] = json::object();
    manifest["entry"] = *entry;
    return failed(writeFile(outPath(".json"), manifest.dump(2) + "\n"));
  }

  SmallVector<func::FuncOp> funcs(module->getOps<func::FuncOp>());
  if (attentionNames.empty()) {
    if (funcs.size() != 1)
      return fail("expected exactly one function in " + inputFile + ", found " +
                  Twine(funcs.size()));
    attentionNames.push_back(funcs.front().getName().str());
  }
  std::vector<AttentionKernel> attentions;
  for (const std::string &kernelName : attentionNames) {
    FailureOr<AttentionKernel> kernel = describeAttention(*module, kernelName);
    if (failed(kernel))
      return 1;
    attentions.push_back(std::move(*kernel));
  }
  setPlanOptions(options.plan);
  if (explain) {
    PassManager pm(&context);
    pm.addPass(flashlight::attn::createAttnExplain());
    if (failed(pm.run(*module)))
      return 1;
  }
  if (failed(compileAttentions(*module, name, ptxas, options, attentions)))
    return 1;
  addAttentions(manifest, name, attentions);
  if (failed(compileHost()))
    return 1;
  if (!entry->is_null())
    manifest["entry"] = *entry;
  if (failed(writeFile(outPath(".json"), manifest.dump(2) + "\n")))
    return 1;
  return 0;
}
