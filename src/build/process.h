// Running an external program (the C++ compiler) without a shell: argv goes straight to
// posix_spawnp, so nothing in a path or a flag is ever interpreted. stdout and stderr are
// captured separately; stdin is /dev/null so a tool can never wait on the terminal.
#pragma once
#include <string>
#include <vector>

namespace coil::build {

struct ProcessResult {
  int exit_code = -1;  // -1 when the process was killed by a signal
  int signal = 0;      // the signal that killed it, else 0
  std::string out;     // everything written to stdout
  std::string err;     // everything written to stderr

  bool ok() const { return exit_code == 0; }
  // "exit status 1" or "killed by signal 9 (Killed)", for error messages.
  std::string status_text() const;
};

// Runs argv[0] (searched in $PATH when it has no '/') to completion. Throws coil::Error when
// the program cannot be started at all (not found, not executable); a program that starts and
// fails is reported through the result.
ProcessResult run_process(const std::vector<std::string>& argv);

// argv as one line a user can paste into a shell (arguments quoted where needed).
std::string command_line(const std::vector<std::string>& argv);

}  // namespace coil::build
