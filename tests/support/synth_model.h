// A model written by `bmad model synth` for a test: in a temporary folder removed when the test
// program exits (some are 100 MB), made once per program for each file name.
#pragma once

#include <string>
#include <vector>

namespace bmad::testing {

// `bmad model synth --out <temp folder>/<file_name> <flags>`; the path, or "" after a failed
// expectation naming what went wrong.
std::string SynthModel(const std::string& file_name, const std::vector<std::string>& flags);

}  // namespace bmad::testing
