"""torchleak as a Bazel aspect, in the manner of aspect-build/rules_lint.

Each Python target is analyzed with the cross-file facts of its transitive dependencies: one
action writes the target's own facts (`torchleak facts`), another checks its sources with those of
its dependencies (`torchleak check --facts ...`). Both are ordinary actions, so Bazel's disk or
remote cache reuses them, and a target is checked again only when its sources or its
dependencies' facts change. The findings are the aspect's outputs, in the output group
`torchleak`: one text report per target (`<target>.torchleak.txt`), empty when there is nothing.

In your repository (docs/scaling.md):

    # tools/lint.bzl
    load("@torchleak//:torchleak.bzl", "torchleak_aspect")
    torchleak = torchleak_aspect(binary = "@//tools:torchleak")

    bazel build //... --aspects=//tools:lint.bzl%torchleak --output_groups=torchleak
"""

TorchleakFactsInfo = provider(
    doc = "The cross-file facts of a target and of its transitive dependencies.",
    fields = {"facts": "depset of the .facts files written by `torchleak facts`"},
)

def _python_sources(ctx):
    srcs = []
    for src in getattr(ctx.rule.attr, "srcs", []):
        for f in src.files.to_list():
            if f.is_source and f.extension in ("py", "pyi"):
                srcs.append(f)
    return srcs

def _torchleak_aspect_impl(target, ctx):
    deps = [
        dep[TorchleakFactsInfo].facts
        for dep in getattr(ctx.rule.attr, "deps", [])
        if TorchleakFactsInfo in dep
    ]
    srcs = _python_sources(ctx)
    if not srcs:
        return [
            TorchleakFactsInfo(facts = depset(transitive = deps)),
            OutputGroupInfo(torchleak = depset()),
        ]
    dependencies = depset(transitive = deps)

    facts = ctx.actions.declare_file(target.label.name + ".torchleak.facts")
    facts_args = ctx.actions.args()
    facts_args.add_all(["facts", "--no-gitignore", "-j", "1", "-o", facts])
    facts_args.add_all(srcs)
    ctx.actions.run(
        executable = ctx.executable._torchleak,
        arguments = [facts_args],
        inputs = srcs,
        outputs = [facts],
        mnemonic = "TorchleakFacts",
        progress_message = "torchleak facts %{label}",
    )

    report = ctx.actions.declare_file(target.label.name + ".torchleak.txt")
    check_args = ctx.actions.args()
    check_args.add_all(["check", "--exit-zero", "--no-cache", "--no-gitignore", "--quiet", "--color", "never", "-j", "1"])
    check_args.add("--output", report)
    check_args.add_all(dependencies, before_each = "--facts")
    check_args.add_all(srcs)
    ctx.actions.run(
        executable = ctx.executable._torchleak,
        arguments = [check_args],
        inputs = depset(srcs, transitive = [dependencies]),
        outputs = [report],
        mnemonic = "Torchleak",
        progress_message = "torchleak check %{label}",
    )
    return [
        TorchleakFactsInfo(facts = depset([facts], transitive = deps)),
        OutputGroupInfo(torchleak = depset([report])),
    ]

def torchleak_aspect(binary):
    """An aspect that runs torchleak on every Python target it reaches.

    Args:
        binary: the label of the torchleak executable: a file of the workspace
            (`exports_files(["torchleak"])`), or an executable target that runs it.

    Returns:
        The aspect; assign it to a global of a .bzl file.
    """
    return aspect(
        implementation = _torchleak_aspect_impl,
        attr_aspects = ["deps"],
        attrs = {
            "_torchleak": attr.label(default = binary, executable = True, allow_files = True, cfg = "exec"),
        },
    )
