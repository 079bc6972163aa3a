//===- MaskScoreAnalysisTest.cpp - Tests of the mask/score analysis -------===//
//
// Every shipped example must be classified as its comment says, and each
// spelling the analysis claims to understand gets a case of its own.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <catch2/catch.hpp>

#include <string>

using namespace mlir;
using namespace flashlight::attn;

namespace {

/// Parses a module (from a file of examples/ or from a string) and runs the
/// analysis on its first attn op.
class Analyzed {
public:
  static Analyzed example(const std::string &name) {
    Analyzed a;
    std::string path = std::string(FLASHLIGHT_EXAMPLES_DIR) + "/" + name;
    a.module = parseSourceFile<ModuleOp>(path, a.config());
    a.analyze();
    return a;
  }
  static Analyzed source(const std::string &text) {
    Analyzed a;
    a.module = parseSourceString<ModuleOp>(text, a.config());
    a.analyze();
    return a;
  }
  const MaskScoreAnalysis &operator*() const { return *analysis; }
  const MaskScoreAnalysis *operator->() const { return &*analysis; }

private:
  Analyzed() {
    context = std::make_unique<MLIRContext>();
    context->loadDialect<AttnDialect, arith::ArithDialect, func::FuncDialect,
                         math::MathDialect, tensor::TensorDialect>();
  }
  ParserConfig config() { return ParserConfig(context.get()); }
  void analyze() {
    REQUIRE(module);
    Operation *found = nullptr;
    module->walk([&](Operation *op) {
      if (!found && isa<AttentionOp, OnlineStepOp, OnlineFinalizeOp>(op))
        found = op;
    });
    REQUIRE(found);
    analysis.emplace(found);
  }

  std::unique_ptr<MLIRContext> context;
  OwningOpRef<ModuleOp> module;
  std::optional<MaskScoreAnalysis> analysis;
};

/// A single-branch attention over 1x2x16x8 f16 tensors with the given
/// captures, score region body and mask region body. Region bodies see
/// %s (score only), %b, %h, %i, %j and captures %c0, %c1, ...
std::string attention(const std::string &captureTypes, const std::string &score,
                      const std::string &mask) {
  std::string t = "tensor<1x2x16x8xf16>";
  std::string args, captureOperands, captureArgs;
  std::vector<std::string> types;
  for (size_t pos = 0, i = 0; pos < captureTypes.size(); ++i) {
    size_t end = captureTypes.find(';', pos);
    if (end == std::string::npos)
      end = captureTypes.size();
    std::string type = captureTypes.substr(pos, end - pos);
    std::string n = std::to_string(i);
    args += ", %arg" + n + ": " + type;
    captureOperands += (i ? ", %arg" : "%arg") + n;
    captureArgs += ", %c" + n + ": " + type;
    types.push_back(type);
    pos = end + 1;
  }
  std::string typeList;
  for (size_t i = 0; i < types.size(); ++i)
    typeList += (i ? ", " : "") + types[i];
  std::string text = "func.func @f(%q: " + t + ", %k: " + t + ", %v: " + t +
                     args + ") -> " + t +
                     " {\n  %o = attn.attention q(%q : " + t + ") k(%k : " + t +
                     ") v(%v : " + t + ")";
  if (!types.empty())
    text += " captures(" + captureOperands + " : " + typeList + ")";
  text += " scale [0.5] normalizer softmax";
  if (!score.empty())
    text += " score {\n^bb0(%s: f32, %b: index, %h: index, %i: index, %j: "
            "index" +
            captureArgs + "):\n" + score + "\n}";
  if (!mask.empty())
    text += " mask {\n^bb0(%b: index, %h: index, %i: index, %j: index" +
            captureArgs + "):\n" + mask + "\n}";
  return text + " -> " + t + "\n  return %o : " + t + "\n}\n";
}

/// A mask-only attention without captures.
Analyzed mask(const std::string &body) {
  return Analyzed::source(attention("", "", body));
}

std::vector<IndexRole> roles(const CaptureAccess &access) {
  std::vector<IndexRole> out;
  for (const DimAccess &d : access.dims)
    out.push_back(d.role);
  return out;
}

using R = IndexRole;

} // namespace

//===----------------------------------------------------------------------===//
// The shipped examples
//===----------------------------------------------------------------------===//

TEST_CASE("example vanilla: no mask, identity score", "[examples]") {
  auto a = Analyzed::example("vanilla.mlir");
  CHECK(a->getMask().kind == MaskKind::None);
  CHECK(a->getScoreKind(0) == ScoreKind::Identity);
  CHECK(a->getCaptureAccesses().empty());
}

TEST_CASE("example causal: causal mask with offset 0", "[examples]") {
  auto a = Analyzed::example("causal.mlir");
  CHECK(a->getMask().kind == MaskKind::Causal);
  CHECK(a->getMask().band.lo == 0);
  CHECK_FALSE(a->getMask().band.hi.has_value());
}

TEST_CASE("example sliding_window: band [0, 31]", "[examples]") {
  auto a = Analyzed::example("sliding_window.mlir");
  CHECK(a->getMask().kind == MaskKind::SlidingWindow);
  CHECK(a->getMask().band.lo == 0);
  CHECK(a->getMask().band.hi == 31);
}

TEST_CASE("example prefix_lm: prefix 16 plus causal", "[examples]") {
  auto a = Analyzed::example("prefix_lm.mlir");
  CHECK(a->getMask().kind == MaskKind::Prefix);
  CHECK(a->getMask().prefixLength == 16);
  CHECK(a->getMask().band.lo == 0);
  CHECK_FALSE(a->getMask().band.hi.has_value());
}

TEST_CASE("example document_mask: data-dependent, causal band", "[examples]") {
  auto a = Analyzed::example("document_mask.mlir");
  CHECK(a->getMask().kind == MaskKind::DataDependent);
  CHECK(a->getMask().band.lo == 0);
  auto accesses = a->getCaptureAccesses();
  REQUIRE(accesses.size() == 2);
  CHECK(accesses[0].region == "mask");
  CHECK(roles(accesses[0]) == std::vector<R>{R::Batch, R::Query});
  CHECK(roles(accesses[1]) == std::vector<R>{R::Batch, R::Key});
}

TEST_CASE("example alibi: additive bias from per-head slopes", "[examples]") {
  auto a = Analyzed::example("alibi.mlir");
  CHECK(a->getMask().kind == MaskKind::Causal);
  CHECK(a->getScoreKind(0) == ScoreKind::AdditiveBias);
  CHECK(a->scoreDependsOnlyOnIndices());
  CHECK(a->scoreReadsCaptures());
  REQUIRE(a->getCaptureAccesses().size() == 1);
  CHECK(roles(a->getCaptureAccesses()[0]) == std::vector<R>{R::Head});
}

TEST_CASE("example softcap: general score, causal", "[examples]") {
  auto a = Analyzed::example("softcap.mlir");
  CHECK(a->getMask().kind == MaskKind::Causal);
  CHECK(a->getScoreKind(0) == ScoreKind::General);
  CHECK_FALSE(a->scoreDependsOnlyOnIndices());
  CHECK_FALSE(a->scoreReadsCaptures());
}

TEST_CASE("example gqa: causal, identity score", "[examples]") {
  auto a = Analyzed::example("gqa.mlir");
  CHECK(a->getMask().kind == MaskKind::Causal);
  CHECK(a->getScoreKind(0) == ScoreKind::Identity);
}

TEST_CASE("example t5_relative_bias: table read at a computed bucket",
          "[examples]") {
  auto a = Analyzed::example("t5_relative_bias.mlir");
  CHECK(a->getMask().kind == MaskKind::None);
  CHECK(a->getScoreKind(0) == ScoreKind::AdditiveBias);
  REQUIRE(a->getCaptureAccesses().size() == 1);
  CHECK(roles(a->getCaptureAccesses()[0]) ==
        std::vector<R>{R::Head, R::Computed});
}

TEST_CASE("example evoformer: broadcast biases and an output gate",
          "[examples]") {
  auto a = Analyzed::example("evoformer.mlir");
  CHECK(a->getMask().kind == MaskKind::None);
  CHECK(a->getScoreKind(0) == ScoreKind::AdditiveBias);
  auto accesses = a->getCaptureAccesses();
  REQUIRE(accesses.size() == 3);
  CHECK(accesses[0].capture == 0);
  CHECK(roles(accesses[0]) ==
        std::vector<R>{R::Constant, R::Head, R::Query, R::Key});
  CHECK(accesses[0].dims[0].constant == 0);
  CHECK(accesses[1].capture == 1);
  CHECK(roles(accesses[1]) ==
        std::vector<R>{R::Batch, R::Constant, R::Constant, R::Key});
  CHECK(accesses[2].region == "epilogue");
  CHECK(roles(accesses[2]) ==
        std::vector<R>{R::Batch, R::Head, R::Query, R::Column});
}

TEST_CASE("example differential: two identity branches, lambda in epilogue",
          "[examples]") {
  auto a = Analyzed::example("differential.mlir");
  CHECK(a->getMask().kind == MaskKind::Causal);
  CHECK(a->getScoreKind(0) == ScoreKind::Identity);
  CHECK(a->getScoreKind(1) == ScoreKind::Identity);
  REQUIRE(a->getCaptureAccesses().size() == 1);
  CHECK(a->getCaptureAccesses()[0].region == "epilogue");
  CHECK(a->getCaptureAccesses()[0].dims.empty());
}

TEST_CASE("example sigmoid: constant additive bias, causal", "[examples]") {
  auto a = Analyzed::example("sigmoid.mlir");
  CHECK(a->getMask().kind == MaskKind::Causal);
  CHECK(a->getScoreKind(0) == ScoreKind::AdditiveBias);
  CHECK_FALSE(a->scoreReadsCaptures());
}

TEST_CASE("example attention_sink: causal", "[examples]") {
  auto a = Analyzed::example("attention_sink.mlir");
  CHECK(a->getMask().kind == MaskKind::Causal);
  CHECK(a->getScoreKind(0) == ScoreKind::Identity);
}

//===----------------------------------------------------------------------===//
// Mask spellings
//===----------------------------------------------------------------------===//

TEST_CASE("causal written as kv < q + 1 (strict, swapped sides)", "[mask]") {
  auto a = mask(R"(%one = arith.constant 1 : index
    %e = arith.addi %i, %one : index
    %keep = arith.cmpi ult, %j, %e : index
    attn.yield %keep : i1)");
  CHECK(a->getMask().kind == MaskKind::Causal);
  CHECK(a->getMask().band.lo == 0);
}

TEST_CASE("bottom-right aligned causal has an offset", "[mask]") {
  auto a = mask(R"(%off = arith.constant 64 : index
    %e = arith.addi %i, %off : index
    %keep = arith.cmpi sle, %j, %e : index
    attn.yield %keep : i1)");
  CHECK(a->getMask().kind == MaskKind::Causal);
  CHECK(a->getMask().band.lo == -64);
}

TEST_CASE("causal written as not(kv > q)", "[mask]") {
  auto a = mask(R"(%t = arith.constant true
    %later = arith.cmpi sgt, %j, %i : index
    %keep = arith.xori %later, %t : i1
    attn.yield %keep : i1)");
  CHECK(a->getMask().kind == MaskKind::Causal);
  CHECK(a->getMask().band.lo == 0);
}

TEST_CASE("bidirectional window |q - kv| <= 8", "[mask]") {
  auto a = mask(R"(%w = arith.constant 8 : index
    %d1 = arith.subi %i, %j : index
    %d2 = arith.subi %j, %i : index
    %a = arith.cmpi sle, %d1, %w : index
    %b2 = arith.cmpi sle, %d2, %w : index
    %keep = arith.andi %a, %b2 : i1
    attn.yield %keep : i1)");
  CHECK(a->getMask().kind == MaskKind::SlidingWindow);
  CHECK(a->getMask().band.lo == -8);
  CHECK(a->getMask().band.hi == 8);
}

TEST_CASE("chunked attention q/32 == kv/32, causal inside chunks", "[mask]") {
  auto a = mask(R"(%c = arith.constant 32 : index
    %qi = arith.divui %i, %c : index
    %kj = arith.divui %j, %c : index
    %same = arith.cmpi eq, %kj, %qi : index
    %causal = arith.cmpi sge, %i, %j : index
    %keep = arith.andi %same, %causal : i1
    attn.yield %keep : i1)");
  CHECK(a->getMask().kind == MaskKind::Chunked);
  CHECK(a->getMask().chunkSize == 32);
  CHECK(a->getMask().band.lo == 0);
}

TEST_CASE("an all-true mask is no mask", "[mask]") {
  auto a = mask(R"(%t = arith.constant true
    attn.yield %t : i1)");
  CHECK(a->getMask().kind == MaskKind::None);
}

TEST_CASE("an unrecognized index-only mask is custom", "[mask]") {
  auto a = mask(R"(%s = arith.addi %i, %j : index
    %two = arith.constant 2 : index
    %r = arith.remui %s, %two : index
    %z = arith.constant 0 : index
    %keep = arith.cmpi eq, %r, %z : index
    attn.yield %keep : i1)");
  CHECK(a->getMask().kind == MaskKind::Custom);
}

TEST_CASE("a prefix or-ed with a non-band condition is custom", "[mask]") {
  auto a = mask(R"(%p = arith.constant 4 : index
    %in = arith.cmpi slt, %j, %p : index
    %odd = arith.cmpi ne, %i, %j : index
    %keep = arith.ori %in, %odd : i1
    attn.yield %keep : i1)");
  CHECK(a->getMask().kind == MaskKind::Custom);
  CHECK(a->getMask().band.isUnbounded());
}

TEST_CASE("unsigned compare of a difference is not trusted", "[mask]") {
  // (q - kv) <u 8 also keeps every kv > q (the difference wraps), so it is
  // not a window.
  auto a = mask(R"(%w = arith.constant 8 : index
    %d = arith.subi %i, %j : index
    %keep = arith.cmpi ult, %d, %w : index
    attn.yield %keep : i1)");
  CHECK(a->getMask().kind == MaskKind::Custom);
}

TEST_CASE("a mask reading a dense boolean tensor is data-dependent", "[mask]") {
  auto a = Analyzed::source(
      attention("tensor<16x16xi1>", "",
                R"(%m = tensor.extract %c0[%i, %j] : tensor<16x16xi1>
    attn.yield %m : i1)"));
  CHECK(a->getMask().kind == MaskKind::DataDependent);
  CHECK(a->getMask().band.isUnbounded());
  REQUIRE(a->getCaptureAccesses().size() == 1);
  CHECK(roles(a->getCaptureAccesses()[0]) == std::vector<R>{R::Query, R::Key});
}

//===----------------------------------------------------------------------===//
// Score regions and capture indexing
//===----------------------------------------------------------------------===//

TEST_CASE("s * s is a general score", "[score]") {
  auto a = Analyzed::source(attention("", R"(%r = arith.mulf %s, %s : f32
    attn.yield %r : f32)",
                                      ""));
  CHECK(a->getScoreKind(0) == ScoreKind::General);
}

TEST_CASE("bias - s is not additive in s, s - bias is", "[score]") {
  auto general = Analyzed::source(attention("", R"(%c = arith.constant 1.0 : f32
    %r = arith.subf %c, %s : f32
    attn.yield %r : f32)",
                                            ""));
  CHECK(general->getScoreKind(0) == ScoreKind::General);
  auto additive =
      Analyzed::source(attention("", R"(%c = arith.constant 1.0 : f32
    %r = arith.subf %s, %c : f32
    attn.yield %r : f32)",
                                 ""));
  CHECK(additive->getScoreKind(0) == ScoreKind::AdditiveBias);
}

TEST_CASE("an index read from another capture is indirect", "[score]") {
  auto a =
      Analyzed::source(attention("tensor<16xi32>;tensor<8x8xf32>",
                                 R"(%p = tensor.extract %c0[%i] : tensor<16xi32>
    %pi = arith.index_cast %p : i32 to index
    %bias = tensor.extract %c1[%pi, %h] : tensor<8x8xf32>
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32)",
                                 ""));
  CHECK(a->getScoreKind(0) == ScoreKind::AdditiveBias);
  auto accesses = a->getCaptureAccesses();
  REQUIRE(accesses.size() == 2);
  CHECK(roles(accesses[0]) == std::vector<R>{R::Query});
  CHECK(accesses[1].capture == 1);
  CHECK(roles(accesses[1]) == std::vector<R>{R::Indirect, R::Head});
}

TEST_CASE("an affine index (q - kv + 15) is reported as affine", "[score]") {
  auto a = Analyzed::source(attention("tensor<31xf32>",
                                      R"(%c = arith.constant 15 : index
    %d = arith.subi %i, %j : index
    %e = arith.addi %d, %c : index
    %bias = tensor.extract %c0[%e] : tensor<31xf32>
    %r = arith.addf %bias, %s : f32
    attn.yield %r : f32)",
                                      ""));
  CHECK(a->getScoreKind(0) == ScoreKind::AdditiveBias);
  REQUIRE(a->getCaptureAccesses().size() == 1);
  CHECK(roles(a->getCaptureAccesses()[0]) == std::vector<R>{R::Affine});
}

TEST_CASE("mixing two branches' logits is general for that branch", "[score]") {
  std::string t = "tensor<1x2x16x8xf16>";
  auto a = Analyzed::source(
      "func.func @f(%q: " + t + ", %k: " + t + ", %v: " + t + ") -> " + t +
      " {\n %o = attn.attention q(%q, %q : " + t + ", " + t +
      ") k(%k, %k : " + t + ", " + t + ") v(%v : " + t +
      ") scale [1.0, 1.0] normalizer softmax score {\n"
      "^bb0(%s0: f32, %s1: f32, %b: index, %h: index, %i: index, %j: index):\n"
      "  %m = arith.addf %s0, %s1 : f32\n"
      "  attn.yield %m, %s1 : f32, f32\n}"
      " epilogue {\n^bb0(%o0: f32, %o1: f32, %b: index, %h: index, %i: "
      "index, %d: index):\n  %r = arith.subf %o0, %o1 : f32\n"
      "  attn.yield %r : f32\n} -> " +
      t + "\n return %o : " + t + "\n}\n");
  CHECK(a->getScoreKind(0) == ScoreKind::General);
  CHECK(a->getScoreKind(1) == ScoreKind::Identity);
}
