// libFuzzer target for the Python path: bytes as a .py file, through the
// engine (parse, semantic model, every rule, suppressions, unused
// suppressions) and every reporter. Unanalyzable input (NUL bytes, invalid
// UTF-8) must come back as a file error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/engine.h"
#include "report/report.h"

using namespace torchleak;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<SourceFile> files{{"fuzz.py", std::string(reinterpret_cast<const char*>(data), size)}};
  Config config;  // every rule
  RunResult result = run_sources(files, config, 1, /*report_unused_suppressions=*/true);
  report::Options options;
  options.srcroot = "/";
  for (auto format : {report::Format::Text, report::Format::Json, report::Format::Sarif, report::Format::Github}) {
    std::string text = report::render(format, result, options);
    if (text.empty() && format != report::Format::Github) __builtin_trap();
  }
  options.statistics = true;
  report::render(report::Format::Text, result, options);
  return 0;
}
