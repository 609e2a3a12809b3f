//===- CommandLine.h - checks LLVM's command-line parser does not make ----===//
//
// Shared by the ppc driver (every subcommand) and the executables it builds.
//
//===----------------------------------------------------------------------===//
#ifndef PPCRT_COMMANDLINE_H
#define PPCRT_COMMANDLINE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <string>

namespace ppcrt {

/// The registered option an argument names ("-o", "--profile",
/// "--lr=1e-3"), or null: a value, a positional argument, or an unknown flag
/// (which the parser reports itself).
inline llvm::cl::Option *optionNamedBy(llvm::StringRef arg) {
  if (arg.size() < 2 || arg[0] != '-')
    return nullptr;
  llvm::StringRef name = arg.drop_front(arg.starts_with("--") ? 2 : 1).split('=').first;
  return name.empty() ? nullptr : llvm::cl::getRegisteredOptions().lookup(name);
}

/// An error where a flag that needs a value is followed by another flag,
/// which LLVM's parser takes as the value: `--profile --steps 5` would
/// write a trace named "--steps" and run every step, `-o --emit mlir` an
/// executable named "--emit". Empty where there is none. A value beginning
/// with '-' is still given as `--flag=VALUE`.
inline std::string flagTakenAsValue(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "--")
      break;
    llvm::cl::Option *option = optionNamedBy(arg);
    if (!option || arg.contains('=') || option->getValueExpectedFlag() != llvm::cl::ValueRequired)
      continue;
    llvm::StringRef next = argv[i + 1];
    if (optionNamedBy(next)) {
      std::string flag = arg.split('=').first.str();
      std::string value = option->ValueStr.empty() ? "VALUE" : option->ValueStr.str();
      return flag + " needs " + value + " but is followed by the flag " + next.str() + " (write " +
             flag + "=" + value + " for a value beginning with '-')";
    }
    ++i; // the option's value
  }
  return "";
}

} // namespace ppcrt

#endif // PPCRT_COMMANDLINE_H
