//===- ElementExpr.h - Tensor programs as per-element expressions -*- C++
//-*-===//
//
// attn-raise does not match op sequences. It asks what one element of a
// tensor is, as a scalar expression of symbolic indices: layout ops
// (transpose, broadcast, reshape, slice, concat) only change the indices,
// elementwise linalg.generics contribute their scalar bodies, and reductions
// become `Reduce` nodes binding a fresh index variable. Attention is then
// recognized on that expression, whatever spelling produced it.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_DIALECT_ATTN_ANALYSIS_ELEMENTEXPR_H
#define FLASHLIGHT_DIALECT_ATTN_ANALYSIS_ELEMENTEXPR_H

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace flashlight::attn {

/// One node of an element expression. Index variables are the dims of
/// affine expressions (`d<k>` is variable k of the ElementGraph).
struct ENode {
  enum class Kind {
    /// An element of a tensor the graph does not look into (a function
    /// argument, a non-splat constant, an unknown producer): `tensor` at
    /// `indices`.
    Leaf,
    /// A scalar operation of a linalg body applied to `operands`.
    Op,
    /// A scalar constant `value`.
    Const,
    /// An index value (`linalg.index`), the affine expression `index`.
    Index,
    /// `combiner` folded over variable `var` (extent from the graph) of
    /// `operands[0]`, starting from `operands[1]`.
    Reduce,
    /// `tensor.extract` of `tensor` at computed indices `operands`.
    Extract,
    /// Pieces of a concatenation: `operands[p]` where `index` (the
    /// concatenated dim's index) lies in `[offsets[p], offsets[p+1])`.
    Concat,
  };
  Kind kind;
  mlir::Type type;
  mlir::Value tensor;
  llvm::SmallVector<mlir::AffineExpr> indices;
  mlir::Operation *op = nullptr;
  mlir::Attribute value;
  mlir::AffineExpr index;
  unsigned var = 0;
  llvm::SmallVector<int64_t> offsets;
  llvm::SmallVector<ENode *> operands;

  /// The combining op's name for a Reduce (e.g. "arith.addf").
  llvm::StringRef combinerName() const;
};

/// Builds element expressions of the tensors of one function.
class ElementGraph {
public:
  explicit ElementGraph(mlir::MLIRContext *ctx) : ctx(ctx) {}

  /// A new index variable of `extent`; extent 1 gives the constant 0.
  mlir::AffineExpr newVar(int64_t extent);
  int64_t extent(unsigned var) const { return extents[var]; }
  unsigned numVars() const { return extents.size(); }

  /// The element of `tensor` at `indices` (affine in the variables).
  ENode *element(mlir::Value tensor, llvm::ArrayRef<mlir::AffineExpr> indices);

  /// `node` as a Leaf reading the tensor a linalg.generic stored it in, when
  /// it is such an element (a Q computed by a projection); null otherwise.
  ENode *stored(ENode *node);

  /// Simplifies floor divisions and remainders using the variables'
  /// extents, e.g. `(h * 2 + g) floordiv 2 = h` when `g < 2`.
  mlir::AffineExpr simplify(mlir::AffineExpr e) const;

  /// The smallest and largest value of `e` over the variables' extents.
  std::optional<std::pair<int64_t, int64_t>> bounds(mlir::AffineExpr e) const;

  /// Whether `node` depends on variable `var`.
  bool dependsOn(ENode *node, unsigned var);
  /// Whether `needle` occurs in `node`.
  bool contains(ENode *node, ENode *needle);

  /// Whether `a` with variable `va` equals `b` with `vb` (alpha-equivalence).
  /// `pieces` resolves concatenations in `a` to one of their pieces.
  bool equivalent(ENode *a, ENode *b, unsigned va, unsigned vb,
                  const llvm::DenseMap<ENode *, unsigned> &pieces =
                      llvm::DenseMap<ENode *, unsigned>());

  /// Why the last `element` call stopped early (empty if it did not).
  const std::string &error() const { return lastError; }

  mlir::MLIRContext *getContext() const { return ctx; }

private:
  ENode *make(ENode::Kind kind, mlir::Type type);
  /// element() of an op's result by the op: nullptr (lastError says why)
  /// where it cannot be followed.
  ENode *elementOfInsertSlice(mlir::Operation *insertSlice, mlir::Value tensor,
                              llvm::ArrayRef<mlir::AffineExpr> indices,
                              mlir::Type elt);
  ENode *elementOfConcat(mlir::Operation *concat, mlir::Value tensor,
                         llvm::ArrayRef<mlir::AffineExpr> indices,
                         mlir::Type elt);
  /// A piece [begin, end) of a concatenation along one dim: `tensor` read
  /// at the index minus `shift`, or at 0 (`atZero`).
  struct ConcatPiece {
    int64_t begin, end;
    mlir::Value tensor;
    int64_t shift;
    bool atZero;
  };
  ENode *concatOfPieces(llvm::ArrayRef<ConcatPiece> pieces, unsigned dim,
                        llvm::ArrayRef<mlir::AffineExpr> indices,
                        mlir::Type elt);
  ENode *elementOfGeneric(mlir::Operation *generic, mlir::Value tensor,
                          llvm::ArrayRef<mlir::AffineExpr> indices,
                          mlir::Type elt);
  ENode *evalBody(mlir::Operation *generic,
                  llvm::ArrayRef<mlir::AffineExpr> loops, mlir::Value v,
                  llvm::DenseMap<mlir::Value, ENode *> &scalars);
  ENode *scalarOutside(mlir::Value v);
  /// `n` (an Op node) folded to a Const node when its operands all are
  /// constants and its op folds them; null otherwise.
  ENode *foldConstant(ENode *n);
  bool equivalentImpl(ENode *a, ENode *b,
                      llvm::DenseMap<unsigned, unsigned> &vars,
                      const llvm::DenseMap<ENode *, unsigned> &pieces);

  mlir::MLIRContext *ctx;
  std::vector<int64_t> extents;
  std::vector<std::unique_ptr<ENode>> nodes;
  std::map<std::pair<const void *, std::vector<const void *>>, ENode *> memo;
  llvm::DenseMap<std::pair<ENode *, unsigned>, bool> dependsMemo;
  std::string lastError;
  /// Where computed elements were first asked for: (tensor, indices).
  llvm::DenseMap<ENode *,
                 std::pair<mlir::Value, llvm::SmallVector<mlir::AffineExpr>>>
      origins;
};

} // namespace flashlight::attn

#endif // FLASHLIGHT_DIALECT_ATTN_ANALYSIS_ELEMENTEXPR_H
