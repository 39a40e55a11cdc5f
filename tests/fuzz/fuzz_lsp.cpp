// libFuzzer target for the language server: bytes through the
// Content-Length framing, every message body through the JSON-RPC handler,
// and any pending analysis run.
#include <cstddef>
#include <cstdint>
#include <string>

#include "lsp/server.h"

using namespace torchleak;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  lsp::Framer framer;
  lsp::Server server;
  // Fed in two pieces, as a pipe may deliver them.
  size_t half = size / 2;
  framer.feed(bytes.substr(0, half));
  for (int round = 0; round < 2; ++round) {
    std::string error;
    while (auto body = framer.next(&error)) {
      for (const auto& reply : server.handle(*body)) lsp::frame(reply);
      if (server.exited()) return 0;
    }
    if (round == 0) framer.feed(bytes.substr(half));
  }
  for (const auto& reply : server.tick(true)) lsp::frame(reply);
  return 0;
}
