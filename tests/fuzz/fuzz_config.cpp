// libFuzzer target for the configuration parser (torchleak.toml and
// pyproject.toml's [tool.torchleak]), the size parser and the suppression
// comment parser. A bad configuration must be a ConfigError, nothing else.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/catalogue.h"
#include "core/config_file.h"
#include "core/suppression.h"

using namespace torchleak;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const char* name : {"torchleak.toml", "pyproject.toml"}) {
    try {
      parse_config(text, name);
    } catch (const ConfigError&) {
    }
  }
  parse_size(text);

  // The same bytes as a comment, with a trailing-comment and an own-line form.
  std::string file = "x = 1  " + std::string(text);
  uint32_t end = static_cast<uint32_t>(file.size());
  if (may_hold_directive(text)) parse_comment(text);
  std::vector<Comment> comments;
  comments.push_back(comment_at(file, 7, end, 1, 7));
  FileSuppressions suppressions(std::move(comments), 1, Catalogue::builtin());
  (void)suppressions.skip_file();
  return 0;
}
