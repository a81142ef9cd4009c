// Types of the ingot dialect: the paged KV cache.
#ifndef INGOT_TYPES_TD
#define INGOT_TYPES_TD

include "dialects/ingot/IngotDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Ingot_KvCacheType : TypeDef<Ingot_Dialect, "KvCache"> {
  let mnemonic = "kv_cache";
  let summary = "Paged key/value cache of all layers of a model";
  let description = [{
    The KV cache as one value: a runtime-sized pool of blocks, each holding
    `block_size` token slots of keys and values for `num_kv_heads` heads of
    `head_dim` elements, for each of `num_layers` layers. The number of blocks is
    dynamic (chosen by the runtime from free device memory). A request's KV slots
    are addressed through its block table: slot `s` lives in block
    `block_tables[b][s / block_size]` at offset `s % block_size`.

    `ingot.kv_write` produces a new cache value; `ingot.attention` reads one.

    ```mlir
    !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f16>
    !ingot.kv_cache<num_layers = 30, num_kv_heads = 3, head_dim = 64, block_size = 32, element_type = f8E4M3FN>
    ```
  }];
  let parameters = (ins
    "unsigned":$num_layers,
    "unsigned":$num_kv_heads,
    "unsigned":$head_dim,
    DefaultValuedParameter<"unsigned", "16">:$block_size,
    "::mlir::Type":$element_type
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // INGOT_TYPES_TD
