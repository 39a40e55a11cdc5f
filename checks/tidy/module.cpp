// The clang-tidy module: every C++ check of torchleak as torchleak-<name>,
// loadable into Debian's clang-tidy with
//
//   clang-tidy --load=libtorchleak-tidy.so -checks='-*,torchleak-*' file.cpp -- <flags>
//
// The checks are the same objects torchleak runs (checks/cpp); only the sink
// differs: findings become clang-tidy diagnostics with fix-its, so NOLINT,
// --fix and --export-fixes work as for any clang-tidy check.
#include <clang-tidy/ClangTidyCheck.h>
#include <clang-tidy/ClangTidyModule.h>
#include <clang-tidy/ClangTidyModuleRegistry.h>

#include <string>

#include "cpp/check.h"

namespace torchleak::tidy {

namespace {

using clang::ast_matchers::MatchFinder;

// clang-tidy reads a message as a format string: a literal % is written %%.
std::string escape(llvm::StringRef message) {
  std::string out;
  for (char c : message) {
    if (c == '%') out += '%';
    out += c;
  }
  return out;
}

class TorchleakCheck final : public clang::tidy::ClangTidyCheck, public cpp::Sink {
 public:
  TorchleakCheck(llvm::StringRef name, clang::tidy::ClangTidyContext* context, const cpp::RegisteredCheck& check)
      : ClangTidyCheck(name, context), check_(check) {
    options_.oversized_layer_bytes = Options.get("ThresholdBytes", options_.oversized_layer_bytes);
  }

  bool isLanguageVersionSupported(const clang::LangOptions& lang) const override { return lang.CPlusPlus; }

  void registerMatchers(MatchFinder* finder) override { check_.check->register_matchers(*finder, this); }

  void check(const MatchFinder::MatchResult& result) override { check_.check->run(result, options_, *this); }

  void storeOptions(clang::tidy::ClangTidyOptions::OptionMap& options) override {
    if (check_.rule_id == "TL011") Options.store(options, "ThresholdBytes", options_.oversized_layer_bytes);
  }

  void report(const MatchFinder::MatchResult&, cpp::Finding finding) override {
    {
      auto d = diag(finding.range.getBegin(), escape(finding.message));
      d << finding.range;
      for (const clang::FixItHint& hint : finding.fixes) d << hint;
    }
    if (!finding.help.empty())
      diag(finding.range.getBegin(), escape(finding.help), clang::DiagnosticIDs::Note);
  }

 private:
  const cpp::RegisteredCheck& check_;
  cpp::Options options_;
};

class TorchleakModule final : public clang::tidy::ClangTidyModule {
 public:
  void addCheckFactories(clang::tidy::ClangTidyCheckFactories& factories) override {
    for (const cpp::RegisteredCheck& c : cpp::registered_checks()) {
      const cpp::RegisteredCheck* check = &c;
      factories.registerCheckFactory("torchleak-" + c.name,
                                     [check](llvm::StringRef name, clang::tidy::ClangTidyContext* context) {
                                       return std::make_unique<TorchleakCheck>(name, context, *check);
                                     });
    }
  }
};

[[maybe_unused]] clang::tidy::ClangTidyModuleRegistry::Add<TorchleakModule> registration(
    "torchleak-module", "torchleak: PyTorch memory-leak idioms in LibTorch training code");

}  // namespace

}  // namespace torchleak::tidy
