#!/usr/bin/env python3
"""The development set's scorer: runs torchleak on every case of fixtures/realworld/ and compares
its findings with the cases' labels (fixtures/realworld/README.md gives the format).

    score.py [--binary PATH] [--case SUBSTRING] [--verbose]      per-rule table
    score.py --ratchet tools/accuracy/ratchet.json                fail when a figure drops
    score.py --update-ratchet tools/accuracy/ratchet.json         raise the ratchet to today's figures
    score.py --write-docs docs/accuracy.md                        regenerate the tables there
    score.py --check-docs docs/accuracy.md                        fail when the tables there are stale
    score.py --coverage                                           the set's counts and targets

A finding matches a label of the same rule in the same file on the same line; for the loop-level
rules, anywhere in the innermost loop around the label's line (every finding of that rule in the
loop then counts as that one match). A finding that matches no label is a false positive; a label
that no finding matches is a miss.
"""
from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SET_DIR = ROOT / "fixtures" / "realworld"
LANGUAGES = {"python": (".py",), "cpp": (".cpp", ".cc", ".cxx", ".h", ".hpp")}
COMMENT = {"python": "#", "cpp": "//"}
RULES = [f"TL{n:03d}" for n in range(1, 14)]
LOOP_LEVEL = {"TL004", "TL006", "TL007", "TL008", "TL009", "TL010"}
HEADER_KEYS = ("rule", "source", "year", "expected", "note")
LABEL = re.compile(r"^(TL\d{3})@(\d+)$")
DOCS_BEGIN = "<!-- accuracy:devset -->"
DOCS_END = "<!-- /accuracy:devset -->"
# Coverage targets (issue 12); rules with too few public reports are listed in the set's README.
TARGET_CASES, TARGET_NEGATIVE_SHARE, TARGET_PER_KIND, TARGET_CPP = 120, 0.45, 6, 20


class CaseError(Exception):
    pass


@dataclass
class SourceFile:
    path: Path                # absolute
    rel: str                  # relative to the case's root (its directory, or the file's parent)
    labels: list[tuple[str, int]]
    loops: list[tuple[int, int]]  # (first line, last line) of every loop


@dataclass
class Case:
    name: str
    language: str
    root: Path                # the case's file or directory
    rule: str
    sources: list[str]
    year: int
    note: str
    files: list[SourceFile] = field(default_factory=list)

    @property
    def positive(self) -> bool:
        return any(f.labels for f in self.files)


# ---------------------------------------------------------------------------------------------
# Reading the cases


def read_header(path: Path, language: str) -> dict[str, list[str]]:
    """The leading comment block's `key: value` lines; continuation lines join the last key."""
    prefix = COMMENT[language]
    header: dict[str, list[str]] = {}
    last = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line.startswith(prefix):
            if line == "" and not header:
                continue
            break
        body = line[len(prefix):]
        m = re.match(r"^ ?([a-z]+):\s*(.*)$", body)
        if m and m.group(1) in HEADER_KEYS:
            last = m.group(1)
            header.setdefault(last, []).append(m.group(2).strip())
        elif last and body.startswith("  ") and body.strip():
            header[last][-1] += " " + body.strip()
        elif last is None and not body.strip():
            continue
        else:
            last = None
    return header


def parse_labels(path: Path, values: list[str]) -> list[tuple[str, int]]:
    if len(values) != 1:
        raise CaseError(f"{path}: needs exactly one `expected:` line (found {len(values)})")
    text = values[0].strip()
    if text == "none":
        return []
    out = []
    n_lines = len(path.read_text(encoding="utf-8").splitlines())
    for item in (s.strip() for s in text.split(",")):
        m = LABEL.match(item)
        if not m:
            raise CaseError(f"{path}: bad label `{item}` (want RULE@LINE, e.g. TL001@27, or none)")
        rule, line = m.group(1), int(m.group(2))
        if rule not in RULES:
            raise CaseError(f"{path}: unknown rule {rule}")
        if not 1 <= line <= n_lines:
            raise CaseError(f"{path}: label {item} is past the end of the file ({n_lines} lines)")
        out.append((rule, line))
    return out


def python_loops(path: Path) -> list[tuple[int, int]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as e:
        raise CaseError(f"{path}: not valid Python: {e}") from e
    return [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
            if isinstance(n, (ast.For, ast.AsyncFor, ast.While))]


def strip_cpp(text: str) -> str:
    """C++ text with comments, string and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def cpp_loops(path: Path) -> list[tuple[int, int]]:
    """Spans of `for`/`while`/`do` statements whose body is a braced block."""
    text = strip_cpp(path.read_text(encoding="utf-8"))
    line_of = [0] * (len(text) + 1)
    line = 1
    for i, ch in enumerate(text):
        line_of[i] = line
        if ch == "\n":
            line += 1
    line_of[len(text)] = line
    spans = []
    for m in re.finditer(r"\b(for|while|do)\b", text):
        i = m.end()
        if m.group(1) != "do":
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text) or text[i] != "(":
                continue
            depth = 0
            while i < len(text):
                depth += text[i] == "("
                depth -= text[i] == ")"
                i += 1
                if depth == 0:
                    break
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text) or text[i] != "{":
            continue  # `while (...);` ending a do-loop, or a body without braces
        depth = 0
        j = i
        while j < len(text):
            depth += text[j] == "{"
            depth -= text[j] == "}"
            if depth == 0:
                break
            j += 1
        spans.append((line_of[m.start()], line_of[min(j, len(text))]))
    return spans


def case_files(root: Path, language: str) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in LANGUAGES[language])


def load_case(root: Path, language: str) -> Case:
    files = case_files(root, language)
    if not files:
        raise CaseError(f"{root}: a case directory without {language} sources")
    base = root if root.is_dir() else root.parent
    merged: dict[str, list[str]] = {}
    parsed = []
    for path in files:
        header = read_header(path, language)
        if "expected" not in header:
            raise CaseError(f"{path}: no `expected:` line in its header")
        labels = parse_labels(path, header["expected"])
        loops = python_loops(path) if language == "python" else cpp_loops(path)
        parsed.append(SourceFile(path, path.relative_to(base).as_posix(), labels, loops))
        for key, values in header.items():
            if key != "expected":
                merged.setdefault(key, []).extend(values)
    for key in ("rule", "source", "year", "note"):
        if not merged.get(key):
            raise CaseError(f"{root}: the case has no `{key}:` line")
    if len(set(merged["rule"])) != 1 or merged["rule"][0] not in RULES:
        raise CaseError(f"{root}: `rule:` must name one rule TL001..TL013 (found {merged['rule']})")
    for url in merged["source"]:
        if not re.match(r"^https?://\S+$", url):
            raise CaseError(f"{root}: `source:` is not a URL: {url}")
    try:
        year = int(merged["year"][0])
    except ValueError as e:
        raise CaseError(f"{root}: `year:` is not a year: {merged['year'][0]}") from e
    name = root.name if root.is_dir() else root.stem
    expected_prefix = merged["rule"][0].lower() + "_"
    if not name.startswith(expected_prefix):
        raise CaseError(f"{root}: a case about {merged['rule'][0]} is named {expected_prefix}...")
    return Case(name, language, root, merged["rule"][0], merged["source"], year,
                " ".join(merged["note"]), parsed)


def load_cases(set_dir: Path, only: str | None = None) -> list[Case]:
    cases, problems = [], []
    for language, exts in LANGUAGES.items():
        d = set_dir / language
        if not d.is_dir():
            continue
        for entry in sorted(d.iterdir()):
            if entry.name.startswith(".") or (entry.is_file() and entry.suffix not in exts):
                continue
            if only and only not in entry.name:
                continue
            try:
                cases.append(load_case(entry, language))
            except CaseError as e:
                problems.append(str(e))
    if problems:
        raise CaseError("\n".join(problems))
    return cases


# ---------------------------------------------------------------------------------------------
# Running torchleak


def run_case(binary: Path, case: Case, timeout: int) -> list[tuple[str, str, int]]:
    """(file relative to the case, rule, line) of every finding. Each case is analyzed alone, as
    one project, from a copy in a temporary directory so that no configuration file or other
    case reaches it."""
    with tempfile.TemporaryDirectory(prefix="torchleak-accuracy-") as tmp:
        work = Path(tmp) / "case"
        if case.root.is_dir():
            shutil.copytree(case.root, work)
        else:
            work.mkdir()
            shutil.copy2(case.root, work / case.root.name)
        proc = subprocess.run([str(binary), "check", "--format", "json", "--exit-zero", "."],
                              cwd=work, capture_output=True, text=True, timeout=timeout)
        try:
            report = json.loads(proc.stdout)
        except json.JSONDecodeError as e:
            raise CaseError(f"{case.root}: torchleak printed no JSON (exit {proc.returncode}): "
                            f"{proc.stderr.strip()[:400]}") from e
        if report.get("errors"):
            msgs = "; ".join(f"{e['path']}: {e['message']}" for e in report["errors"])
            raise CaseError(f"{case.root}: torchleak could not analyze it: {msgs}")
        return [(d["path"], d["rule"], d["start"]["line"]) for d in report["diagnostics"]]


@dataclass
class Outcome:
    case: Case
    tp: list[tuple[str, str, int]] = field(default_factory=list)   # matched labels
    fp: list[tuple[str, str, int]] = field(default_factory=list)   # unmatched findings
    fn: list[tuple[str, str, int]] = field(default_factory=list)   # unmatched labels


def innermost_loop(loops: list[tuple[int, int]], line: int) -> tuple[int, int] | None:
    around = [s for s in loops if s[0] <= line <= s[1]]
    return min(around, key=lambda s: s[1] - s[0]) if around else None


def match(case: Case, findings: list[tuple[str, str, int]]) -> Outcome:
    out = Outcome(case)
    by_file = {f.rel: f for f in case.files}
    remaining = list(findings)
    for f in case.files:
        for rule, line in sorted(f.labels, key=lambda l: (l[1], l[0])):
            exact = [x for x in remaining if x == (f.rel, rule, line)]
            if exact:
                remaining.remove(exact[0])
                out.tp.append((f.rel, rule, line))
                if rule not in LOOP_LEVEL:
                    continue
            loop = innermost_loop(f.loops, line) if rule in LOOP_LEVEL else None
            in_loop = [x for x in remaining if loop and x[0] == f.rel and x[1] == rule
                       and loop[0] <= x[2] <= loop[1]]
            for x in in_loop:
                remaining.remove(x)
            if exact:
                continue
            (out.tp if in_loop else out.fn).append((f.rel, rule, line))
    for x in remaining:
        if x[0] not in by_file:
            raise CaseError(f"{case.root}: torchleak reported a file the case does not hold: {x[0]}")
    out.fp = remaining
    return out


def score(binary: Path, cases: list[Case], jobs: int, timeout: int) -> list[Outcome]:
    # The C++ cases first: they take longest.
    ordered = sorted(cases, key=lambda c: c.language != "cpp")
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {c.name + c.language: pool.submit(run_case, binary, c, timeout) for c in ordered}
        return [match(c, futures[c.name + c.language].result()) for c in cases]


# ---------------------------------------------------------------------------------------------
# Tables


def ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def figures(outcomes: list[Outcome], language: str | None = None) -> dict[str, dict]:
    rows = {}
    for rule in RULES + ["total"]:
        tp = fp = fn = 0
        for o in outcomes:
            if language and o.case.language != language:
                continue
            tp += sum(1 for x in o.tp if rule in ("total", x[1]))
            fp += sum(1 for x in o.fp if rule in ("total", x[1]))
            fn += sum(1 for x in o.fn if rule in ("total", x[1]))
        rows[rule] = {"tp": tp, "fp": fp, "fn": fn,
                      "recall": ratio(tp, tp + fn), "precision": ratio(tp, tp + fp)}
    return rows


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def table(rows: dict[str, dict], markdown: bool) -> str:
    head = ["rule", "TP", "FP", "missed", "recall", "precision"]
    body = [[r, str(v["tp"]), str(v["fp"]), str(v["fn"]), pct(v["recall"]), pct(v["precision"])]
            for r, v in rows.items() if r == "total" or v["tp"] + v["fp"] + v["fn"]]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] + ["---:"] * 5) + " |"]
        lines += ["| " + " | ".join(f"**{c}**" if row[0] == "total" else c for c in row) + " |"
                  for row in body]
        return "\n".join(lines)
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    fmt = lambda row: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
    return "\n".join([fmt(head)] + [fmt(row) for row in body])


def coverage(cases: list[Case]) -> tuple[str, list[str]]:
    lines, short = [], []
    lines.append("| rule | Python +/- | C++ +/- | total +/- |")
    lines.append("| --- | ---: | ---: | ---: |")
    for rule in RULES:
        def count(lang, pos):
            return sum(1 for c in cases if c.rule == rule and c.positive == pos
                       and (lang is None or c.language == lang))
        p, n = count(None, True), count(None, False)
        lines.append(f"| {rule} | {count('python', True)}/{count('python', False)} | "
                     f"{count('cpp', True)}/{count('cpp', False)} | {p}/{n} |")
        if p < TARGET_PER_KIND or n < TARGET_PER_KIND:
            short.append(f"{rule}: {p} positives, {n} negatives (target {TARGET_PER_KIND} of each)")
    total = len(cases)
    neg = sum(1 for c in cases if not c.positive)
    cpp = sum(1 for c in cases if c.language == "cpp")
    years = sorted({c.year for c in cases})
    multi = sum(1 for c in cases if c.root.is_dir())
    lines.append("")
    lines.append(f"{total} cases ({total - neg} positive, {neg} negative = "
                 f"{100 * neg / max(total, 1):.0f}%), {cpp} LibTorch C++, {multi} of several files; "
                 f"sources from {years[0] if years else '-'} to {years[-1] if years else '-'}; "
                 f"{sum(len(f.labels) for c in cases for f in c.files)} labels.")
    if total < TARGET_CASES:
        short.append(f"{total} cases (target {TARGET_CASES})")
    if neg < TARGET_NEGATIVE_SHARE * total:
        short.append(f"{neg} negatives of {total} (target {TARGET_NEGATIVE_SHARE:.0%})")
    if cpp < TARGET_CPP:
        short.append(f"{cpp} LibTorch cases (target {TARGET_CPP})")
    return "\n".join(lines), short


def docs_block(outcomes: list[Outcome], cases: list[Case]) -> str:
    parts = [DOCS_BEGIN, "", "All cases:", "", table(figures(outcomes), True), ""]
    for lang, title in (("python", "Python"), ("cpp", "LibTorch C++")):
        parts += [f"{title} cases:", "", table(figures(outcomes, lang), True), ""]
    cov, _ = coverage(cases)
    parts += ["The set (positive/negative cases per rule the case is about):", "", cov, ""]
    misses = [(o.case, x) for o in outcomes for x in o.fn]
    fps = [(o.case, x) for o in outcomes for x in o.fp]
    parts += [f"Misses ({len(misses)}) and false positives ({len(fps)}), case by case:", ""]
    for o in outcomes:
        if not o.fn and not o.fp:
            continue
        items = [f"missed {r}@{l}" + (f" in {p}" if o.case.root.is_dir() else "") for p, r, l in o.fn]
        items += [f"false {r}@{l}" + (f" in {p}" if o.case.root.is_dir() else "") for p, r, l in o.fp]
        parts.append(f"- `{o.case.language}/{o.case.root.name}`: " + ", ".join(items))
    parts += ["", DOCS_END]
    return "\n".join(parts)


def replace_block(text: str, block: str, path: Path) -> str:
    start, end = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if start < 0 or end < start:
        raise CaseError(f"{path}: no {DOCS_BEGIN} ... {DOCS_END} block to fill")
    text = text[:start] + block + text[end + len(DOCS_END):]
    # The audited corpus's tables, from its recorded findings and verdicts, when the page has them.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import corpus  # noqa: E402 (tools/accuracy/corpus.py)
    start, end = text.find(corpus.BEGIN), text.find(corpus.END)
    if start >= 0 and end > start:
        text = text[:start] + corpus.tables()[0] + text[end + len(corpus.END):]
    return text


# ---------------------------------------------------------------------------------------------
# The ratchet


def check_ratchet(rows: dict[str, dict], path: Path) -> list[str]:
    best = json.loads(path.read_text(encoding="utf-8"))
    drops = []
    for rule, figs in best.items():
        for metric in ("recall", "precision"):
            if figs.get(metric) is None:
                continue
            now = rows.get(rule, {}).get(metric)
            now = 1.0 if now is None and metric == "precision" else (now or 0.0)
            if round(now, 4) + 1e-12 < figs[metric]:  # the file holds figures to 4 places
                drops.append(f"{rule} {metric} {pct(now)} is below the ratchet's {pct(figs[metric])}")
    return drops


def update_ratchet(rows: dict[str, dict], path: Path) -> None:
    best = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    for rule, v in rows.items():
        old = best.get(rule, {})
        new = {}
        for metric in ("recall", "precision"):
            now = v[metric]
            if now is None and metric == "precision" and v["tp"] + v["fn"]:
                now = 1.0  # no findings at all: no false positive yet
            candidates = [x for x in (old.get(metric), now) if x is not None]
            new[metric] = round(max(candidates), 4) if candidates else None
        best[rule] = new
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(best, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------


def find_binary(given: str | None) -> Path:
    candidates = [given] if given else [os.environ.get("TORCHLEAK"),
                                        ROOT / "build" / "release" / "torchleak",
                                        ROOT / "build" / "dev" / "torchleak"]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c).resolve()
    raise CaseError("no torchleak binary: build one (bash scripts/demo.sh) or pass --binary PATH")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", help="the torchleak to measure (default: $TORCHLEAK, "
                    "build/release/torchleak, build/dev/torchleak)")
    ap.add_argument("--set", type=Path, default=SET_DIR, help="the set's directory (default: "
                    "fixtures/realworld)")
    ap.add_argument("--case", help="only the cases whose name contains this text")
    ap.add_argument("--verbose", action="store_true", help="list every miss and false positive")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per case")
    ap.add_argument("--ratchet", type=Path, help="fail when a figure is below this file's")
    ap.add_argument("--update-ratchet", type=Path, help="raise this file's figures to today's")
    ap.add_argument("--write-docs", type=Path, help="regenerate the tables in this Markdown file")
    ap.add_argument("--check-docs", type=Path, help="fail when this file's tables are not today's")
    ap.add_argument("--coverage", action="store_true", help="print the set's counts, run nothing")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    try:
        cases = load_cases(args.set, args.case)
        if args.coverage:
            text, short = coverage(cases)
            print(text)
            for s in short:
                print(f"below target: {s}")
            return 0
        binary = find_binary(args.binary)
        outcomes = score(binary, cases, max(1, args.jobs), args.timeout)
    except (CaseError, subprocess.TimeoutExpired) as e:
        print(f"accuracy: error: {e}", file=sys.stderr)
        return 2
    rows = figures(outcomes)
    if args.json:
        print(json.dumps({"all": rows, "python": figures(outcomes, "python"),
                          "cpp": figures(outcomes, "cpp")}, indent=2))
    else:
        print(f"{len(cases)} cases")
        print(f"accuracy: measured {binary}", file=sys.stderr)
        print(table(rows, False))
    if args.verbose:
        for o in outcomes:
            for p, r, l in o.fn:
                print(f"missed  {o.case.language}/{o.case.root.name}: {p}:{l} {r}")
            for p, r, l in o.fp:
                print(f"false   {o.case.language}/{o.case.root.name}: {p}:{l} {r}")
    status = 0
    block = docs_block(outcomes, cases)
    if args.write_docs:
        text = args.write_docs.read_text(encoding="utf-8")
        new = replace_block(text, block, args.write_docs)
        tmp = args.write_docs.with_suffix(".tmp")
        tmp.write_text(new, encoding="utf-8")
        os.replace(tmp, args.write_docs)
    if args.check_docs:
        text = args.check_docs.read_text(encoding="utf-8")
        if replace_block(text, block, args.check_docs) != text:
            print(f"accuracy: {args.check_docs} is stale: run scripts/accuracy.sh --write-docs "
                  f"{args.check_docs}", file=sys.stderr)
            status = 1
    if args.update_ratchet:
        update_ratchet(rows, args.update_ratchet)
    if args.ratchet:
        drops = check_ratchet(rows, args.ratchet)
        for d in drops:
            print(f"accuracy: ratchet: {d}", file=sys.stderr)
        if drops:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
