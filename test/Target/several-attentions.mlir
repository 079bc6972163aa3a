// A program that calls several attentions (a layer stack: each layer's
// output is the next one's query) compiles every one to a fused kernel;
// attentions that compute the same thing share one. The manifest (version
// 2) lists the kernels in `attentions`; the entry's attention steps index
// them, in program order.
// RUN: rm -rf %t && flashlight-compile %s -o %t --name=stack --emit=ptx --arch=sm_80,sm_90a --flashlight-explain 2>&1 | FileCheck %s
// RUN: python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print(m['manifest_version'], m['kernel'], [a['kernel'] for a in m['attentions']]); print([(s['op'], s.get('attention')) for s in m['entry']['steps']]); [print(sorted((c, i['codegen'], i['ptx']) for c, i in a['archs'].items())) for a in m['attentions']]" %t/stack.json | FileCheck %s --check-prefix=MANIFEST
// RUN: grep -c "^.visible .entry stack_attention" %t/stack.sm_90a.ptx | FileCheck %s --check-prefix=PTX

// CHECK: remark: the function calls 3 attentions (2 distinct kernels); its other operations take the reference path (one simple kernel each)
// CHECK-DAG: stack_attention0: code generator mma.sync, tiles {{.*}} for sm_80
// CHECK-DAG: stack_attention1: code generator mma.sync, tiles {{.*}} for sm_80
// CHECK-DAG: stack_attention0: code generator wgmma, tiles {{.*}} for sm_90a
// CHECK-DAG: stack_attention1: code generator wgmma, tiles {{.*}} for sm_90a

// MANIFEST: 2 stack_attention0 ['stack_attention0', 'stack_attention1']
// MANIFEST-NEXT: [('attention', 0), ('attention', 1), ('attention', 0)]
// MANIFEST-NEXT: {{^}}[('sm_80', 'mma.sync', 'stack.sm_80.ptx'), ('sm_90a', 'wgmma', 'stack.sm_90a.ptx')]
// MANIFEST-NEXT: {{^}}[('sm_80', 'mma.sync', 'stack.sm_80.ptx'), ('sm_90a', 'wgmma', 'stack.sm_90a.ptx')]
// PTX: 2
func.func @stack(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>, %v: tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16> {
  %a = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>) v(%v : tensor<1x2x128x64xbf16>) scale [0.125] normalizer softmax -> tensor<1x2x128x64xbf16>
  %b = attn.attention q(%a : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>) v(%v : tensor<1x2x128x64xbf16>) scale [0.25] normalizer softmax -> tensor<1x2x128x64xbf16>
  %c = attn.attention q(%b : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>) v(%v : tensor<1x2x128x64xbf16>) scale [0.125] normalizer softmax -> tensor<1x2x128x64xbf16>
  return %c : tensor<1x2x128x64xbf16>
}
