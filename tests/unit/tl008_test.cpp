// TL008 hidden-state-not-detached: what the fixture runner does not assert,
// the message naming a helper of another file that keeps the history.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/engine.h"
#include "disk_project.h"

using namespace torchleak;

namespace {

class TL008Project : public torchleak::testing::DiskProject {
 protected:
  RunResult run(const std::vector<SourceFile>& files) {
    Config c;
    c.select = {"TL008"};
    return DiskProject::run(files, c);
  }
};

const char* kHelpers = R"(def move(state, device):
    return state.to(device)


def cut(state):
    return state.detach()
)";

// A state kept through a helper of another file: the message says which,
// where it is defined.
TEST_F(TL008Project, TheMessageNamesTheHelperThatKeepsTheHistory) {
  const char* train = R"(from helpers import move, cut


def train(model, loader, optimizer, device):
    h = model.init_state()
    for x, y in loader:
        h = move(h, device)
        out, h = model(x, h)
        out.sum().backward()
        optimizer.step()
)";
  RunResult r = run({{"helpers.py", kHelpers}, {"train.py", train}});
  ASSERT_EQ(r.diagnostics.size(), 1u);
  const Diagnostic& d = r.diagnostics[0];
  EXPECT_EQ(d.rule_id, "TL008");
  EXPECT_EQ(d.start.line, 8u);
  const std::string suffix = "; `move` (helpers.py:1) does not detach it";
  ASSERT_GE(d.message.size(), suffix.size());
  EXPECT_EQ(d.message.substr(d.message.size() - suffix.size()), suffix) << d.message;
}

// Two states: `c` goes through that helper and is then detached, `h` is
// kept without any helper. Only `h` is reported, and no helper is named.
TEST_F(TL008Project, AFreedStateLendsNoHelperToTheMessage) {
  const char* train = R"(from helpers import move, cut


def train(model, loader, optimizer, device):
    h, c = model.init_state()
    for x, y in loader:
        c = move(c, device)
        c = cut(c)
        out, h, c = model(x, h, c)
        out.sum().backward()
        optimizer.step()
)";
  RunResult r = run({{"helpers.py", kHelpers}, {"train.py", train}});
  ASSERT_EQ(r.diagnostics.size(), 1u);
  const Diagnostic& d = r.diagnostics[0];
  EXPECT_EQ(d.start.line, 9u);
  EXPECT_NE(d.message.find("recurrent state `h` is fed back"), std::string::npos) << d.message;
  EXPECT_EQ(d.message.find("`c`"), std::string::npos) << d.message;
  EXPECT_EQ(d.message.find("does not detach it"), std::string::npos) << d.message;
}

// The helper `cut` first, then `move` on the same state: it is detached.
TEST_F(TL008Project, AHelperOfAnotherFileThatDetachesFreesTheState) {
  const char* train = R"(from helpers import move, cut


def train(model, loader, optimizer, device):
    h = model.init_state()
    for x, y in loader:
        h = move(cut(h), device)
        out, h = model(x, h)
        out.sum().backward()
        optimizer.step()
)";
  EXPECT_TRUE(run({{"helpers.py", kHelpers}, {"train.py", train}}).diagnostics.empty());
}

}  // namespace
