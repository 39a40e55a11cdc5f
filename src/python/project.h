// The project's other Python files, as the engine needs them when a file
// imports from them: the file an import names (found as the interpreter
// would find it from the importing file), and a model of that file, built on
// first need and kept for the thread's next files while the file is
// unchanged. Analyzing one file alone (a pre-commit hook, the editor) then
// sees the same helpers, classes and constants as analyzing the project.
#pragma once

#include <string>
#include <string_view>

#include "core/config.h"

namespace torchleak::python {

class Model;

// The file that `import <module>` (with `level` leading dots, as in `from
// ..pkg import x`) names when written in the file at `importer`: a module
// file `a/b.py` or a package `a/b/__init__.py`. A relative import resolves
// from the importer's package; an absolute one from the importer's directory
// (a script's sys.path[0]) and then from each enclosing directory up to the
// project's root, the first one holding .git, pyproject.toml, setup.py,
// setup.cfg or a torchleak configuration. Empty when no such file exists,
// or when it is the importer itself.
std::string find_module_file(std::string_view importer, std::string_view module, int level);

// A model of the Python file at `path`, read from disk with the settings of
// `config`, for answering the analysis of another file: null when the file
// cannot be read or is too large to be a source file (a file with syntax
// errors is modelled as far as the parser recovers). Models are kept per thread (at most a few dozen, the least recently
// used dropped first) and rebuilt when the file's size or time changes.
const Model* foreign_model(const std::string& path, const Config& config);

// Starts the analysis of a file on this thread: the kept models forget the
// answers computed for the previous file, so that what a file is told never
// depends on which files the thread analyzed before; what the file system
// said about directories is asked again when it is more than a second old.
void begin_file_analysis();

}  // namespace torchleak::python
