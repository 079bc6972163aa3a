module {}
{-#
  dialect_resources: {
    builtin: {
      r: "0x0400