//===- AttnDialect.td - The attn dialect ------------------*- tablegen -*-===//
//
// The `attn` dialect: attention programs as one op, from import to tiling.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_ATTN_DIALECT
#define FLASHLIGHT_ATTN_DIALECT

include "mlir/IR/OpBase.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let cppNamespace = "::flashlight::attn";
  let summary = "Attention programs: scores, masks, normalizers, epilogues";
  let description = [{
    The `attn` dialect represents an attention program as a single op whose
    regions hold the parts that vary between attention variants: a score
    modification (bias, softcap, relative position), a mask, and an output
    epilogue (gating, the linear combination of several logit branches).

    Two levels live here:

    * `attn.attention` -- the whole program, written by hand or (once the
      importers land) found in an imported graph by `attn-raise`. Its semantics are the textbook ones:
      materialize the scores, normalize them, multiply with V.
    * `attn.online_step` / `attn.online_finalize` -- the online-softmax form
      that the lowering (`attn-online-softmax`, then `attn-tile`; see
      docs/design.md for their status) produces: a running max, running sum
      and f32 accumulator per logit branch, updated one KV block at a time and
      normalized once at the end.

    The regions are isolated from above: every tensor they read is a captured
    operand of the op, so a kernel generator sees the complete list of global
    buffers the program touches.
  }];
  let useDefaultAttributePrinterParser = 1;
}

#endif // FLASHLIGHT_ATTN_DIALECT
