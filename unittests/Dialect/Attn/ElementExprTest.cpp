//===- ElementExprTest.cpp - Tests of the per-element expressions ---------===//
//
// attn-raise sees layouts only through index arithmetic, so the index
// simplification must undo what reshapes do, and the element of a layout
// op must be the element of its source at the right indices.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/Analysis/ElementExpr.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <catch2/catch.hpp>

using namespace mlir;
using namespace flashlight::attn;

namespace {

MLIRContext &context() {
  static MLIRContext ctx = [] {
    DialectRegistry registry;
    registry
        .insert<arith::ArithDialect, func::FuncDialect, linalg::LinalgDialect,
                math::MathDialect, tensor::TensorDialect>();
    return MLIRContext(registry);
  }();
  ctx.loadAllAvailableDialects();
  return ctx;
}

} // namespace

TEST_CASE("a split dim merged back is the dim", "[element-expr]") {
  ElementGraph g(&context());
  AffineExpr h = g.newVar(8); // query heads, 4 KV heads x 2
  // (h floordiv 2) * 2 + h mod 2 = h
  CHECK(g.simplify(h.floorDiv(2) * 2 + h % 2) == h);
  // (hk * 2 + g) floordiv 2 = hk and mod 2 = g, for g < 2
  AffineExpr hk = g.newVar(4), grp = g.newVar(2);
  CHECK(g.simplify((hk * 2 + grp).floorDiv(2)) == hk);
  CHECK(g.simplify((hk * 2 + grp) % 2) == grp);
  // Not when the low part can reach the divisor.
  AffineExpr wide = g.newVar(3);
  CHECK(g.simplify((hk * 2 + wide).floorDiv(2)) != hk);
}

TEST_CASE("bounds follow the variables' extents", "[element-expr]") {
  ElementGraph g(&context());
  AffineExpr i = g.newVar(128), j = g.newVar(128);
  auto range = g.bounds(i - j);
  REQUIRE(range);
  CHECK(range->first == -127);
  CHECK(range->second == 127);
  // A value below the divisor: floordiv is 0, mod is itself.
  AffineExpr h = g.newVar(4);
  CHECK(g.simplify(h.floorDiv(4)) == getAffineConstantExpr(0, &context()));
  CHECK(g.simplify(h % 4) == h);
  // Extent 1 is no variable at all.
  CHECK(g.newVar(1) == getAffineConstantExpr(0, &context()));
}

TEST_CASE("layout ops only move indices", "[element-expr]") {
  // out[b, h, i, d] = transpose of reshape of x[b, i, h*d]: the element of
  // `out` is a leaf of x at (b, i, h * 8 + d).
  const char *source = R"mlir(
    func.func @f(%x: tensor<2x16x32xf32>) -> tensor<2x4x16x8xf32> {
      %r = tensor.expand_shape %x [[0], [1], [2, 3]] output_shape [2, 16, 4, 8]
          : tensor<2x16x32xf32> into tensor<2x16x4x8xf32>
      %e = tensor.empty() : tensor<2x4x16x8xf32>
      %t = linalg.transpose ins(%r : tensor<2x16x4x8xf32>)
          outs(%e : tensor<2x4x16x8xf32>) permutation = [0, 2, 1, 3]
      return %t : tensor<2x4x16x8xf32>
    })mlir";
  ParserConfig config(&context());
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, config);
  REQUIRE(module);
  auto func = cast<func::FuncOp>(module->getBody()->front());
  // Named ops are generalized by attn-raise; the graph reads generics.
  IRRewriter rewriter(&context());
  func.walk([&](linalg::TransposeOp op) {
    rewriter.setInsertionPoint(op);
    (void)linalg::generalizeNamedOp(rewriter, op);
  });
  Value out = func.getBody().front().getTerminator()->getOperand(0);

  ElementGraph g(&context());
  AffineExpr b = g.newVar(2), h = g.newVar(4), i = g.newVar(16),
             d = g.newVar(8);
  ENode *n = g.element(out, {b, h, i, d});
  REQUIRE(n);
  REQUIRE(n->kind == ENode::Kind::Leaf);
  CHECK(n->tensor == func.getArgument(0));
  REQUIRE(n->indices.size() == 3);
  CHECK(n->indices[0] == b);
  CHECK(n->indices[1] == i);
  CHECK(n->indices[2] == h * 8 + d);
  CHECK(g.dependsOn(n, cast<AffineDimExpr>(h).getPosition()));
}
