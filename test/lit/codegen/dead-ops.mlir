// Ops whose results do not reach the yield are dropped from the CPU bytecode (here a
// muli of h), and the live ops keep their order.
// RUN: ingot-region-bc %s --eval-mask=6x6 --b=1 --operand=0=2x6:0,0,0,0,0,0,0,0,1,1,1,2 | FileCheck %s

// CHECK-LABEL: // attention #0 mask:
// CHECK-NEXT: mask region: 8 registers, 9 instructions, 1 operands
// CHECK-NEXT: operand #0: i32, rank 2
// CHECK-NEXT: %0 = arg b : index
// CHECK-NEXT: %1 = arg q : index
// CHECK-NEXT: %2 = arg kv : index
// CHECK-NEXT: %3 = cmpi ule, %2, %1 : index
// CHECK-NEXT: %4 = region_load #0[%0, %1] : i32
// CHECK-NEXT: %5 = region_load #0[%0, %2] : i32
// CHECK-NEXT: %6 = cmpi eq, %4, %5 : i32
// CHECK-NEXT: %7 = andi %3, %6 : i1
// CHECK-NEXT: yield %7 : i1
// CHECK-NEXT: // attention #0 mask at b=1 h=0
// CHECK-NEXT: 100000
// CHECK-NEXT: 110000
// CHECK-NEXT: 001000
// CHECK-NEXT: 001100
// CHECK-NEXT: 001110
// CHECK-NEXT: 000001
// CHECK-NOT: muli

func.func @document_mask(%q: tensor<?x64xf32>, %cache: !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %e0: tensor<?x?xi32>) -> tensor<?x64xf32> {
  %o = ingot.attention %q, %cache, %bt, %sl, %qs extra(%e0 : tensor<?x?xi32>)
         {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 2.500000e-01 : f32}
         : tensor<?x64xf32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>,
           tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
       mask {
       ^bb0(%b: index, %h: index, %qi: index, %kv: index):
         %unused = arith.muli %h, %h : index
         %causal = arith.cmpi ule, %kv, %qi : index
         %doc_q = ingot.region_load 0 [%b, %qi] : i32
         %doc_kv = ingot.region_load 0 [%b, %kv] : i32
         %same = arith.cmpi eq, %doc_q, %doc_kv : i32
         %visible = arith.andi %causal, %same : i1
         ingot.yield %visible : i1
       }
  return %o : tensor<?x64xf32>
}
