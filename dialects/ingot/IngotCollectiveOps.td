// Tensor-parallel collectives of the ingot dialect: all_reduce and all_gather over the group.
#ifndef INGOT_COLLECTIVE_OPS_TD
#define INGOT_COLLECTIVE_OPS_TD

def Ingot_AllReduceOp : Ingot_Op<"all_reduce", [Pure, SameOperandsAndResultType]> {
  let summary = "Sum of a tensor over the tensor-parallel group";
  let description = [{
    Every rank of the group contributes `input`; every rank receives the
    elementwise sum of all contributions, of the same type. Inserted by
    `ingot-shard-tensor-parallel` after row-parallel linears (o and down
    projections), whose per-rank results are partial sums, and after the
    vocab-parallel embedding, whose per-rank rows are zero for tokens outside
    the rank's vocabulary slice. The group is the module's `ingot.tp` ranks.

    ```mlir
    %partial = ingot.linear %attn, %wo_shard : tensor<?x192xf32>, tensor<576x192xf32> -> tensor<?x576xf32>
    %sum = ingot.all_reduce %partial : tensor<?x576xf32>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$input);
  let results = (outs Ingot_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Ingot_AllGatherOp : Ingot_Op<"all_gather", [Pure]> {
  let summary = "Concatenation of a tensor over the tensor-parallel group, along its last dimension";
  let description = [{
    Every rank contributes `input`; every rank receives the contributions
    concatenated along the last dimension in rank order, so the result's last
    dimension is the input's times the group size (the module's `ingot.tp`,
    checked when the module has it) and the other dimensions are the input's.
    Inserted after the vocab-parallel output head: rank `r` computes the logits
    of its vocabulary slice, the gather gives every rank the whole row.

    ```mlir
    %local = ingot.logits %h, %head_shard, %rows : tensor<?x576xf32>, tensor<24576x576xf32>, tensor<?xi32> -> tensor<?x24576xf32>
    %logits = ingot.all_gather %local : tensor<?x24576xf32> -> tensor<?x49152xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32, F16, BF16]>:$input);
  let results = (outs RankedTensorOf<[F32, F16, BF16]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

#endif // INGOT_COLLECTIVE_OPS_TD
