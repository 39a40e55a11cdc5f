# The layers point one way: nothing under src/ (the engine, the frontends,
# the reporters, the language server) includes anything under checks/.
source "$(dirname "$0")/common.bash"

case_ "no file under src/ includes checks/"
OUT=$(cd "$SOURCE_DIR" && grep -rn --include='*.h' --include='*.cpp' -E '#\s*include\s+"checks/' src || true)
expect_out </dev/null

done_
