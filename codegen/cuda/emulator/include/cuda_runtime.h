// Stand-in for the CUDA toolkit's cuda_runtime.h in SIMT-emulated device code (the prelude has it all).
#pragma once
