#include <algorithm>

#include "report/report.h"

namespace torchleak::report {

namespace {
template <typename Count>
uint32_t count_until(std::string_view line, uint32_t byte_column, Count units_of_lead) {
  uint32_t end = std::min<uint32_t>(byte_column, static_cast<uint32_t>(line.size()));
  uint32_t units = 0;
  for (uint32_t i = 0; i < end; ++i) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    if ((c & 0xC0) != 0x80) units += units_of_lead(c);  // count lead bytes only
  }
  return units + (byte_column > end ? byte_column - end : 0);
}
}  // namespace

uint32_t utf16_column(std::string_view line, uint32_t byte_column) {
  // A 4-byte sequence (lead byte 11110xxx) is a surrogate pair in UTF-16.
  return count_until(line, byte_column, [](unsigned char c) { return (c >> 3) == 0x1E ? 2u : 1u; });
}

uint32_t codepoint_column(std::string_view line, uint32_t byte_column) {
  return count_until(line, byte_column, [](unsigned char) { return 1u; });
}

}  // namespace torchleak::report
