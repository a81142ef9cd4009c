#!/bin/sh
# Prints what an artifact holds, leaving out what says where and when it was made (its path
# and size line, the layout line, whose offsets move with the provenance's length, and the
# provenance block): the manifest in human form, the tensors'
# checksums, a digest of every kernel binary. Two artifacts with the same output have the
# same tensors, kernels, programs, config and tokenizer.
# usage: artifact-content.sh INGOT ARTIFACT
"$1" inspect --verify "$2" | awk '
  /^artifact:/ { next }
  /^format:/ { next }
  /^provenance/ { skip = 1; next }
  skip && /^  / { next }
  { skip = 0; print }'
