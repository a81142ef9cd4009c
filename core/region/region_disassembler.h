// Human-readable text of region bytecode, for `ingot inspect`, tests and lit checks.
#pragma once

#include <string>

#include "core/region/region_program.h"
#include "schemas/region_bytecode.h"

namespace ingot {

/// Mnemonic of an opcode as in its MLIR op ("addi", "cmpf", "region_load"); "?" if unknown.
const char* regionOpcodeName(RegionOpcode opcode);

/// MLIR spelling of a type ("i1", "i32", "index", "f32"); "?" if invalid.
std::string regionTypeName(RegionType type);

/// Predicate names as MLIR prints them ("slt", "oge"); "?" if out of range.
const char* cmpIPredicateName(uint8_t predicate);
const char* cmpFPredicateName(uint8_t predicate);

/// Multi-line listing of a program: a header line, one line per extra operand, then one line
/// per instruction, e.g.
///   mask region: 4 registers, 4 instructions, 0 operands
///   %0 = arg q : index
///   %2 = cmpi ule %1, %0 : index
///   yield %2 : i1
std::string disassembleRegion(const RegionProgram& program);

}  // namespace ingot
