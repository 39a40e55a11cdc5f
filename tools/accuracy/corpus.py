#!/usr/bin/env python3
"""The audited corpus: torchleak run on real repositories nobody here wrote, every finding judged by
reading the code (tools/accuracy/corpus/verdicts.tsv).

    corpus.py run --trees DIR [--binary PATH]   re-run torchleak on the exported trees
                                                (DIR/<owner>__<name>/, one per line of repos.tsv)
                                                and record its findings in corpus/findings.tsv
    corpus.py report                            per-repository and per-rule tables of the recorded
                                                findings joined with their verdicts
    corpus.py report --write-docs docs/accuracy.md   the same tables into the docs

Not run in CI: the trees are not in the repository (docs/accuracy.md says how to export them).
A finding without a verdict is reported as `unjudged`; judge it and add a line to verdicts.tsv.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent / "corpus"
ROOT = Path(__file__).resolve().parents[2]
REPOS, FINDINGS, VERDICTS = HERE / "repos.tsv", HERE / "findings.tsv", HERE / "verdicts.tsv"
FINDING_FIELDS = ["repo", "path", "line", "column", "rule"]
VERDICT_FIELDS = FINDING_FIELDS + ["verdict", "mechanism"]
VERDICTS_ALLOWED = ("right", "wrong", "debatable")
BEGIN, END = "<!-- accuracy:corpus -->", "<!-- /accuracy:corpus -->"


def read_tsv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def write_tsv(path: Path, fields: list[str], rows: list[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fields, delimiter="\t", quoting=csv.QUOTE_NONE, lineterminator="\n",
                           extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def key(row: dict) -> tuple:
    return (row["repo"], row["path"], int(row["line"]), int(row["column"]), row["rule"])


def find_binary(given: str | None) -> str:
    for c in ([given] if given else [os.environ.get("TORCHLEAK"), ROOT / "build/release/torchleak",
                                     ROOT / "build/dev/torchleak"]):
        if c and Path(c).is_file():
            return str(Path(c).resolve())
    sys.exit("corpus: no torchleak binary: build one or pass --binary PATH")


def run(args) -> int:
    binary = find_binary(args.binary)
    rows = []
    for repo in read_tsv(REPOS):
        tree = Path(args.trees) / repo["repo"].replace("/", "__")
        if not tree.is_dir():
            print(f"corpus: {tree}: no exported tree for {repo['repo']} at {repo['commit']}",
                  file=sys.stderr)
            return 2
        # `{trees}` in the extra arguments stands for --trees (include directories of the trees).
        extra = shlex.split(repo["extra_args"].replace("{trees}", str(Path(args.trees).resolve())))
        cmd = [binary, "check", "--format", "json", "--exit-zero", *extra, "."]
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
        took = time.monotonic() - start
        report = json.loads(proc.stdout)
        for d in report["diagnostics"]:
            rows.append({"repo": repo["repo"], "path": d["path"], "line": d["start"]["line"],
                         "column": d["start"]["column"], "rule": d["rule"]})
        errors = report.get("errors", [])
        print(f"{repo['repo']}: {report['summary'].get('files_analyzed', '?')} files, "
              f"{len(report['diagnostics'])} findings, {len(errors)} errors, {took:.1f} s")
        for e in errors[: args.show_errors]:
            print(f"  error: {e['path']}: {e['message'][:200]}")
    rows.sort(key=key)
    write_tsv(FINDINGS, FINDING_FIELDS, rows)
    return 0


def tables() -> tuple[str, list[str]]:
    findings = read_tsv(FINDINGS)
    verdicts = {key(v): v for v in read_tsv(VERDICTS)}
    problems = [f"{v['repo']} {v['path']}:{v['line']} {v['rule']}: verdict `{v['verdict']}`"
                for v in verdicts.values() if v["verdict"] not in VERDICTS_ALLOWED]
    per_repo, per_rule = defaultdict(Counter), defaultdict(Counter)
    judged = []
    for f in findings:
        v = verdicts.get(key(f))
        verdict = v["verdict"] if v else "unjudged"
        per_repo[f["repo"]][verdict] += 1
        per_rule[f["rule"]][verdict] += 1
        judged.append((f, verdict, v["mechanism"] if v else ""))
        if not v:
            problems.append(f"{f['repo']} {f['path']}:{f['line']} {f['rule']}: no verdict")

    def rows(counts: dict[str, Counter], first: str) -> list[str]:
        out = [f"| {first} | findings | right | wrong | debatable | unjudged | right of judged |",
               "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        total = Counter()
        for name in sorted(counts):
            total.update(counts[name])
        for name, c in sorted(counts.items()) + [("**total**", total)]:
            n = sum(c.values())
            decided = c["right"] + c["wrong"]
            share = f"{100 * c['right'] / decided:.0f}%" if decided else "-"
            out.append(f"| {name} | {n} | {c['right']} | {c['wrong']} | {c['debatable']} | "
                       f"{c['unjudged']} | {share} |")
        return out

    repos = {r["repo"]: r for r in read_tsv(REPOS)}
    for name in repos:
        per_repo.setdefault(name, Counter())
    parts = [BEGIN, "", "Repositories (`right of judged` leaves the debatable ones out):", ""]
    parts += [f"- {r['repo']} at {r['commit']}" + (" (with include directories: see repos.tsv)"
                                                     if r["extra_args"] else "")
              for r in repos.values()]
    parts += [""] + rows(per_repo, "repository") + ["", "Per rule:", ""] + rows(per_rule, "rule")
    parts += ["", "Every finding, with its verdict and the mechanism:", "",
              "| finding | rule | verdict | mechanism |", "| --- | --- | --- | --- |"]
    for f, verdict, mech in judged:
        mech = mech.replace("|", "\\|")
        parts.append(f"| {f['repo']} `{f['path']}:{f['line']}:{f['column']}` | {f['rule']} | {verdict} | {mech} |")
    parts += ["", END]
    return "\n".join(parts), problems


def report(args) -> int:
    text, problems = tables()
    if args.write_docs:
        doc = Path(args.write_docs)
        old = doc.read_text(encoding="utf-8")
        start, end = old.find(BEGIN), old.find(END)
        if start < 0 or end < start:
            print(f"corpus: {doc}: no {BEGIN} ... {END} block", file=sys.stderr)
            return 2
        tmp = doc.with_suffix(".tmp")
        tmp.write_text(old[:start] + text + old[end + len(END):], encoding="utf-8")
        os.replace(tmp, doc)
    else:
        print(text)
    for p in problems:
        print(f"corpus: {p}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="re-run torchleak on the exported trees")
    r.add_argument("--trees", required=True, help="the directory holding <owner>__<name>/ trees")
    r.add_argument("--binary")
    r.add_argument("--show-errors", type=int, default=5, help="files it could not analyze, per repo")
    p = sub.add_parser("report", help="tables of the recorded findings and their verdicts")
    p.add_argument("--write-docs", help="fill the corpus block of this Markdown file")
    args = ap.parse_args(argv)
    return run(args) if args.command == "run" else report(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
