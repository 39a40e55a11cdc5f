#!/usr/bin/python3
"""Runtime oracle: measure that each torchleak rule's claim holds in PyTorch.

For every rule with a runtime fixture (fixtures/runtime/python/<rule>_<name>/)
this runs the leaking program (leak.py) and the fixed program (fixed.py) in
fresh subprocesses, with N and 2N iterations, reads the measurement line each
program prints through fixtures/runtime/python/_measure.py, and decides
whether the leaking program shows the rule's effect and the fixed one does
not.

Run it with an interpreter that has torch (Debian: /usr/bin/python3 with the
python3-torch package):

    /usr/bin/python3 tools/runtime/oracle.py --check
    /usr/bin/python3 tools/runtime/oracle.py --write-table docs/runtime-verdicts.md

A second phase applies torchleak's own fixes: every program that carries an
`# expect:` marker is copied, fixed with `torchleak check --no-cache --fix`
(and, for information, with `--unsafe-fixes`), and when it changed, the
original and the fixed program run under TORCHLEAK_TRAIN_PROBE=1; a safe fix
must keep every parameter's gradient and the sequence of losses.  The binary
comes from --torchleak, $TORCHLEAK_BINARY, build/dev or build/release; without
one the phase is skipped.

The same is done for LibTorch (C++) programs (fixtures/runtime/cpp/<rule>_<name>/
leak.cpp, fixed.cpp, measured through fixtures/runtime/cpp/_measure.h): they
are compiled with g++ against the installed LibTorch (tools/runtime/libtorch.py)
into a temporary directory, two at a time, then run and judged like the Python
programs, and torchleak's fixes of the marked ones are compiled and run too.
Without a compiler or LibTorch's headers the C++ programs are skipped, with the
reason.  --language python|cpp picks one kind.

--check exits 1 when a rule's leaking program does not show its effect or
its fixed program does, or when a safe fix changes what a program trains;
its last line is "N passed, M failed".
"""

import argparse
import concurrent.futures
import json
import math
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the repository
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import libtorch  # noqa: E402  (next to this file)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "fixtures", "runtime", "python")
CPP_FIXTURES = os.path.join(ROOT, "fixtures", "runtime", "cpp")
CPP_HELPER = "_measure.h"
MARK = "TORCHLEAK-MEASURE "

KIB = 1024
MIB = 1024 * 1024


# --------------------------------------------------------------------------
# Running programs


class Run(object):
    def __init__(self, program, n, returncode, stdout, stderr, seconds):
        self.program = program
        self.n = n
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds
        self.m = None
        for line in stdout.splitlines():
            if line.startswith(MARK):
                self.m = json.loads(line[len(MARK):])

    @property
    def ok(self):
        return self.returncode == 0 and self.m is not None

    def get(self, key, default=None):
        if self.m is None:
            return default
        return self.m.get(key, default)

    def error_line(self):
        lines = self.stderr.splitlines()
        for line in reversed(lines):
            # a C++ exception that ended the program: "  what():  <message>"
            if line.strip().startswith("what():"):
                return "C++ exception: " + line.split("what():", 1)[1].strip()
        for line in reversed(lines):
            if "Error" in line:
                return line.strip()
        return ""

    def describe_failure(self):
        if self.returncode != 0:
            return "{} {} exited {}: {}".format(
                self.program, self.n, self.returncode, self.error_line()[:200])
        return "{} {} printed no measurement".format(self.program, self.n)


def run_program(python, folder, program, n, env_extra, timeout, base=FIXTURES):
    """Run ``base/folder/program n`` in its folder; ``_measure`` comes from FIXTURES."""
    env = dict(os.environ)
    env.pop("PYTHONHOME", None)
    env["PYTHONPATH"] = FIXTURES
    env["OMP_NUM_THREADS"] = "1"
    env["MKL_NUM_THREADS"] = "1"
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONWARNINGS"] = "ignore"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(env_extra)
    path = os.path.join(base, folder, program)
    start = time.time()
    try:
        proc = subprocess.run([python, path, str(n)], cwd=os.path.join(base, folder),
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = -9, exc.stdout or "", "timed out after {} s".format(timeout)
        if isinstance(out, bytes):
            out = out.decode("utf-8", "replace")
    return Run(program, n, rc, out, err, time.time() - start)


def run_binary(compiled, folder, program, n, env_extra, timeout, base=CPP_FIXTURES):
    """Run a compiled LibTorch program (libtorch.Compiled) with ``n`` in ``base/folder``."""
    if compiled is None or not compiled.ok:
        why = "not compiled" if compiled is None else compiled.error
        return Run(program, n, -2, "", "CompileError: " + why, 0.0)
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["MKL_NUM_THREADS"] = "1"
    env.update(env_extra)
    start = time.time()
    try:
        proc = subprocess.run([compiled.exe, str(n)], cwd=os.path.join(base, folder), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = -9, exc.stdout or "", "timed out after {} s".format(timeout)
        if isinstance(out, bytes):
            out = out.decode("utf-8", "replace")
    return Run(program, n, rc, out, err, time.time() - start)


# --------------------------------------------------------------------------
# Formatting helpers


def fmt_bytes(b):
    if b is None:
        return "?"
    sign = "-" if b < 0 else ""
    b = abs(b)
    if b >= 1024 ** 3:
        return "{}{:.1f} GiB".format(sign, b / 1024.0 ** 3)
    if b >= MIB:
        return "{}{:.1f} MiB".format(sign, b / float(MIB))
    if b >= KIB:
        return "{}{:.1f} KiB".format(sign, b / float(KIB))
    return "{}{} B".format(sign, int(b))


def fmt_delta(b):
    return ("+" if b >= 0 else "") + fmt_bytes(b)


def rss_mib(run):
    v = run.get("maxrss_kb")
    return "?" if v is None else "{:.0f}".format(v / 1024.0)


class Outcome(object):
    """Result of one rule: figures for the table and the verdict."""

    def __init__(self, leak_figure, fixed_figure, leak_shows, fixed_clean,
                 notes=(), measurable=True):
        self.leak_figure = leak_figure
        self.fixed_figure = fixed_figure
        self.leak_shows = leak_shows
        self.fixed_clean = fixed_clean
        self.notes = list(notes)
        self.measurable = measurable
        self.names = ("leak.py", "fixed.py")  # the rule's programs, set by run_rules

    @property
    def passed(self):
        return self.measurable and self.leak_shows and self.fixed_clean

    @property
    def verdict(self):
        if not self.measurable:
            return "not measurable on CPU"
        if self.passed:
            return "holds"
        parts = []
        if not self.leak_shows:
            parts.append("{} does not show the effect".format(self.names[0]))
        if not self.fixed_clean:
            parts.append("{} shows the effect".format(self.names[1]))
        return "FAILS: " + "; ".join(parts)


# --------------------------------------------------------------------------
# Rules


class Rule(object):
    """One rule's runtime experiment.

    Every program in ``programs`` runs with ``n * k`` iterations for each k in
    ``sizes`` (``repeats`` times), plus the ``extra`` (program, n) runs, with
    ``env`` added to the environment.  ``evaluate`` turns the finished runs
    into an Outcome.  ``timing`` rules run one program at a time, after the
    others, so that the oracle's own runs do not compete while they are timed.
    """

    def __init__(self, rule_id, name, folder, n, claim, measured, evaluate,
                 programs=None, env=None, timing=False,
                 repeats=1, timeout=180, sizes=(1, 2), extra=(), language="python"):
        self.language = language
        if programs is None:
            programs = ("leak.cpp", "fixed.cpp") if language == "cpp" else ("leak.py", "fixed.py")
        self.rule_id = rule_id
        self.name = name
        self.folder = folder
        self.n = n
        self.claim = claim
        self.measured = measured
        self.evaluate_fn = evaluate
        self.programs = programs
        self.env = env or {}
        self.timing = timing
        self.repeats = repeats
        self.timeout = timeout
        self.sizes = sizes
        self.extra = extra  # further (program, n) runs

    @property
    def root(self):
        """The folder holding this rule's program folder."""
        return CPP_FIXTURES if self.language == "cpp" else FIXTURES

    @property
    def key(self):
        """Unique among all rules: a rule id has a Python and a C++ experiment."""
        return self.rule_id + ("/cpp" if self.language == "cpp" else "")

    @property
    def label(self):
        return "{} {}{}".format(self.rule_id, self.name, " (C++)" if self.language == "cpp" else "")

    def sources(self):
        """The C++ sources this rule's runs need (none for a Python rule)."""
        if self.language != "cpp":
            return []
        names = list(self.programs) + [p for p, _ in self.extra]
        return [os.path.join(self.root, self.folder, p) for p in dict.fromkeys(names)]

    def jobs(self):
        out = []
        for rep in range(self.repeats):
            for n in (k * self.n for k in self.sizes):
                for program in self.programs:
                    out.append((program, n, rep))
        out.extend((program, n, 0) for program, n in self.extra)
        return out


class Results(object):
    def __init__(self, rule):
        self.rule = rule
        self.runs = {}

    def add(self, program, n, rep, run):
        self.runs.setdefault((program, n), []).append(run)

    def one(self, program, n):
        return self.runs[(program, n)][0]

    def all(self, program, n):
        return self.runs[(program, n)]


def require_ok(runs):
    bad = [r for r in runs if not r.ok]
    return None if not bad else "; ".join(r.describe_failure() for r in bad)


# Tolerance for "flat" live-heap figures.  The programs are deterministic and
# their heap in use after the loop is usually equal to within a few KiB between
# N and 2N, but now and then (depending on timing, seen on a loaded machine)
# one run holds an extra allocation of about 130 KiB.  FLAT sits above that
# noise and below the growth each leaking program shows between N and 2N.
FLAT = 256 * KIB


def eval_growth(res, what):
    """TL001 / TL002: graph retained per step -> nodes and heap grow with N."""
    n = res.rule.n
    L1, L2 = res.one("leak.py", n), res.one("leak.py", 2 * n)
    F1, F2 = res.one("fixed.py", n), res.one("fixed.py", 2 * n)
    err = require_ok([L1, L2, F1, F2])
    if err:
        return Outcome(err, "", False, False)
    dl_nodes = L2.get("graph_nodes") - L1.get("graph_nodes")
    dl_heap = L2.get("malloc_in_use_bytes") - L1.get("malloc_in_use_bytes")
    df_nodes = F2.get("graph_nodes") - F1.get("graph_nodes")
    df_heap = F2.get("malloc_in_use_bytes") - F1.get("malloc_in_use_bytes")
    dl_held = L2.get("held_bytes") - L1.get("held_bytes")
    leak_fig = ("graph nodes {} → {} ({:.1f}/step); live heap {} ({:.1f} KiB/step); "
                "tensor bytes {}; saved activations held {} / {}; peak RSS {} → {} MiB").format(
        L1.get("graph_nodes"), L2.get("graph_nodes"), dl_nodes / float(n),
        fmt_delta(dl_heap), dl_heap / float(n) / KIB, fmt_delta(dl_held),
        fmt_bytes(L1.get("graph_bytes")), fmt_bytes(L2.get("graph_bytes")),
        rss_mib(L1), rss_mib(L2))
    fixed_fig = "graph nodes {} → {}; live heap {}; peak RSS {} → {} MiB".format(
        F1.get("graph_nodes"), F2.get("graph_nodes"), fmt_delta(df_heap), rss_mib(F1), rss_mib(F2))
    leak_shows = dl_nodes >= n and dl_heap >= FLAT
    fixed_clean = df_nodes == 0 and abs(df_heap) < FLAT
    notes = [
        "Saved activations are NOT what accumulates in a training loop: `loss.backward()` "
        "frees each step's saved tensors (measured: {} held after the loop). What {} keeps is "
        "the chain of autograd nodes, about {:.0f} bytes of heap per step here; peak RSS grows "
        "much faster ({} → {} MiB) because the small, long-lived node allocations fragment "
        "the heap between the large activation buffers.".format(
            fmt_bytes(L2.get("graph_bytes")), what, dl_heap / float(n), rss_mib(L1), rss_mib(L2)),
    ]
    if "leak_private_total.py" in res.rule.programs:
        T1, T2 = res.one("leak_private_total.py", n), res.one("leak_private_total.py", 2 * n)
        err = require_ok([T1, T2])
        if err:
            return Outcome(err, fixed_fig, False, fixed_clean, notes)
        dt_nodes = T2.get("graph_nodes") - T1.get("graph_nodes")
        dt_heap = T2.get("malloc_in_use_bytes") - T1.get("malloc_in_use_bytes")
        leak_fig += ("; leak_private_total.py (a zero-tensor total, local to the epoch "
                     "function): graph nodes {} → {}, live heap {}").format(
            T1.get("graph_nodes"), T2.get("graph_nodes"), fmt_delta(dt_heap))
        leak_shows = leak_shows and dt_nodes >= n and dt_heap >= FLAT
        notes.append(
            "A total started as a tensor (`epoch_loss = torch.zeros(())`, leak_private_total.py) "
            "keeps the graphs the same way ({:.1f} nodes and {:.1f} KiB of heap per step) until "
            "the function that owns it returns and its caller drops the result.".format(
                dt_nodes / float(n), dt_heap / float(n) / KIB))
    if "leak_validation.py" in res.rule.programs:
        V1, V2 = res.one("leak_validation.py", n), res.one("leak_validation.py", 2 * n)
        err = require_ok([V1, V2])
        if err:
            return Outcome(err, fixed_fig, False, fixed_clean, notes)
        dv = V2.get("graph_bytes") - V1.get("graph_bytes")
        leak_fig += ("; leak_validation.py (no backward): saved activations held {} → {} "
                     "({} per batch)").format(fmt_bytes(V1.get("graph_bytes")),
                                             fmt_bytes(V2.get("graph_bytes")),
                                             fmt_bytes(dv / float(n)))
        leak_shows = leak_shows and dv >= n * 256 * KIB
        notes.append(
            "The activations are retained when no `backward()` runs on the accumulated "
            "values: leak_validation.py (`total_loss += criterion(model(x), y)` in a validation "
            "loop without `torch.no_grad()`) holds {} of saved activations per batch, {} after "
            "{} batches. That is the large, fast leak the rule text describes.".format(
                fmt_bytes(dv / float(n)), fmt_bytes(V2.get("graph_bytes")), 2 * n))
    return Outcome(leak_fig, fixed_fig, leak_shows, fixed_clean, notes)


def eval_module_cache(res):
    n = res.rule.n
    L1, L2 = res.one("leak.py", n), res.one("leak.py", 2 * n)
    F1, F2 = res.one("fixed.py", n), res.one("fixed.py", 2 * n)
    err = require_ok([L1, L2, F1, F2])
    if err:
        return Outcome(err, "", False, False)
    heap_vs_fixed = L2.get("malloc_in_use_bytes") - F2.get("malloc_in_use_bytes")
    dl_heap = L2.get("malloc_in_use_bytes") - L1.get("malloc_in_use_bytes")
    df_heap = F2.get("malloc_in_use_bytes") - F1.get("malloc_in_use_bytes")
    leak_fig = ("graph nodes after loop {} → {}; saved activations held {} / {}; "
                "tensor bytes {} / {}; live heap {} from N to 2N, {} more than fixed").format(
        L1.get("graph_nodes"), L2.get("graph_nodes"), fmt_bytes(L1.get("graph_bytes")),
        fmt_bytes(L2.get("graph_bytes")), fmt_bytes(L1.get("held_bytes")),
        fmt_bytes(L2.get("held_bytes")), fmt_delta(dl_heap), fmt_bytes(heap_vs_fixed))
    fixed_fig = "graph nodes {} → {}; tensor bytes {} / {}; live heap {}".format(
        F1.get("graph_nodes"), F2.get("graph_nodes"), fmt_bytes(F1.get("held_bytes")),
        fmt_bytes(F2.get("held_bytes")), fmt_delta(df_heap))
    leak_shows = (L1.get("graph_nodes") > 0
                  and L1.get("graph_nodes") == L2.get("graph_nodes")
                  and abs(dl_heap) < FLAT)
    fixed_clean = F1.get("graph_nodes") == 0 and F2.get("graph_nodes") == 0 and abs(df_heap) < FLAT
    notes = [
        "The claim is weaker than \"retains memory\": the cached tensor keeps only the last "
        "forward's autograd graph, it does not grow with the number of steps, and since "
        "`backward()` already freed that graph's saved activations ({} held), the extra memory "
        "is the node chain ({} nodes; the heap measured {} more than the fixed program, "
        "within a few KiB of noise). The cached "
        "tensor's own data is held by both versions (`.detach()` shares storage). A full graph "
        "with its activations is retained only when the module's forward is not followed by "
        "`backward()` with grad enabled (inference without `torch.no_grad()`).".format(
            fmt_bytes(L2.get("graph_bytes")), L2.get("graph_nodes"), fmt_bytes(heap_vs_fixed)),
    ]
    return Outcome(leak_fig, fixed_fig, leak_shows, fixed_clean, notes)


def eval_worker_seed(res):
    n = res.rule.n
    runs = {p: (res.one(p, n), res.one(p, 2 * n)) for p in res.rule.programs}
    err = require_ok([r for pair in runs.values() for r in pair])
    if err:
        return Outcome(err, "", False, False)

    def fig(pair):
        return ("{:.1f}% / {:.1f}% of an epoch's samples repeat another worker's noise; epoch 2 "
                "replays {:.1f}% / {:.1f}% of epoch 1 ({} / {} samples per epoch)").format(
            100 * pair[0].get("repeated_fraction"), 100 * pair[1].get("repeated_fraction"),
            100 * pair[0].get("replayed_next_epoch_fraction"),
            100 * pair[1].get("replayed_next_epoch_fraction"),
            pair[0].get("samples"), pair[1].get("samples"))

    def clean(pair):
        return all(r.get("repeated_fraction") == 0 and r.get("replayed_next_epoch_fraction") == 0
                   for r in pair)

    leak, fixed, glob = runs["leak.py"], runs["fixed.py"], runs["global_rng.py"]
    leak_shows = all(r.get("repeated_fraction") >= 0.45
                     and r.get("replayed_next_epoch_fraction") >= 0.99 for r in leak)
    notes = [
        "With 2 workers and a generator object created in `__init__`, both workers draw the "
        "same sequence (half of all samples duplicate another sample's noise), and since the "
        "workers are started again from the main process's untouched copy every epoch, epoch "
        "2 replays epoch 1 exactly. global_rng.py (NumPy's global generator, "
        "`np.random.normal` in `__getitem__`, no worker_init_fn): {} -- PyTorch >= 1.9 seeds "
        "NumPy's global generator per worker and per epoch, which is why the rule only flags "
        "generator objects.".format(fig(glob)),
    ]
    fixed_fig = fig(fixed) + "; global np.random without worker_init_fn: {:.1f}% / {:.1f}%".format(
        100 * glob[1].get("repeated_fraction"), 100 * glob[1].get("replayed_next_epoch_fraction"))
    return Outcome(fig(leak), fixed_fig, leak_shows, clean(fixed) and clean(glob), notes)


def eval_pad_packed(res):
    n = res.rule.n
    L, F = res.one("leak.py", n), res.one("fixed.py", n)
    err = require_ok([L, F])
    if err:
        return Outcome(err, "", False, False, measurable=False)

    def fig(r):
        return ("runs {} steps; DataParallel replicas: {}; batches whose output length differs "
                "from the padded input's: {}; last loss {:.4f}").format(
            r.get("steps"), r.get("replicas"), r.get("mismatched_batches"), r.get("final_loss"))

    notes = [
        "`nn.DataParallel` splits a batch only across CUDA devices; without one it has no "
        "replicas ({} here) and calls the module once on the whole batch, which the data "
        "loader padded to its longest sequence, so `pad_packed_sequence` without "
        "`total_length` pads back to the input's length and both programs compute the same "
        "(last loss {:.4f} / {:.4f}). The length mismatch between replicas that the rule is "
        "about needs two or more GPUs; the verdict needs them. That torchleak's safe "
        "`total_length=` fix leaves this program's training unchanged is checked below, in "
        "the safe-fix table.".format(L.get("replicas"), L.get("final_loss"), F.get("final_loss")),
    ]
    return Outcome(fig(L), fig(F), True, True, notes, measurable=False)


def eval_eval_no_grad(res):
    n = res.rule.n
    L1, L2 = res.one("leak.py", n), res.one("leak.py", 2 * n)
    F1, F2 = res.one("fixed.py", n), res.one("fixed.py", 2 * n)
    err = require_ok([L1, L2, F1, F2])
    if err:
        return Outcome(err, "", False, False)
    lp1, lp2 = L1.get("graph_peak_bytes"), L2.get("graph_peak_bytes")
    single = res.one("leak.py", 1)
    one_batch = single.get("graph_peak_bytes") if single.ok else None
    leak_fig = "peak saved activations {} / {}; held after loop {}; peak RSS {} / {} MiB".format(
        fmt_bytes(lp1), fmt_bytes(lp2), fmt_bytes(L2.get("graph_bytes")), rss_mib(L1), rss_mib(L2))
    fixed_fig = "peak saved activations {} / {}; peak RSS {} / {} MiB".format(
        fmt_bytes(F1.get("graph_peak_bytes")), fmt_bytes(F2.get("graph_peak_bytes")),
        rss_mib(F1), rss_mib(F2))
    leak_shows = lp1 >= MIB and abs(lp2 - lp1) <= 0.1 * lp1
    fixed_clean = F1.get("graph_peak_bytes") == 0 and F2.get("graph_peak_bytes") == 0
    notes = [
        "The peak is higher but does not grow with the number of batches: each batch's graph "
        "is freed when `logits` is rebound. One batch's graph holds {} (a 1-batch run), the "
        "peak is {:.2f} times that, because the previous batch's graph is still referenced "
        "by `logits` while the next forward runs. Peak RSS: {} MiB without vs {} MiB with "
        "no_grad.".format(fmt_bytes(one_batch), lp2 / float(one_batch or 1), rss_mib(L2),
                          rss_mib(F2)),
    ]
    return Outcome(leak_fig, fixed_fig, leak_shows, fixed_clean, notes)


def eval_retain_graph(res):
    n = res.rule.n
    L1, L2 = res.one("leak.py", n), res.one("leak.py", 2 * n)
    F1, F2 = res.one("fixed.py", n), res.one("fixed.py", 2 * n)
    err = require_ok([L1, L2, F1, F2])
    if err:
        return Outcome(err, "", False, False)
    leak_fig = "saved activations held after loop {} / {}; peak {} / {}; live heap {}".format(
        fmt_bytes(L1.get("graph_bytes")), fmt_bytes(L2.get("graph_bytes")),
        fmt_bytes(L1.get("graph_peak_bytes")), fmt_bytes(L2.get("graph_peak_bytes")),
        fmt_delta(L2.get("malloc_in_use_bytes") - L1.get("malloc_in_use_bytes")))
    fixed_fig = "held after loop {} / {}; peak {} / {}; live heap {}".format(
        fmt_bytes(F1.get("graph_bytes")), fmt_bytes(F2.get("graph_bytes")),
        fmt_bytes(F1.get("graph_peak_bytes")), fmt_bytes(F2.get("graph_peak_bytes")),
        fmt_delta(F2.get("malloc_in_use_bytes") - F1.get("malloc_in_use_bytes")))
    one_graph = F2.get("graph_peak_bytes")
    leak_shows = (L1.get("graph_bytes") >= MIB
                  and L1.get("graph_bytes") == L2.get("graph_bytes")
                  and L2.get("graph_peak_bytes") >= 1.8 * one_graph)
    fixed_clean = F1.get("graph_bytes") == 0 and F2.get("graph_bytes") == 0
    notes = [
        "No growth: each step's graph is released when `loss` is rebound on the next step. "
        "The cost is one graph's saved activations ({}) kept alive between steps and after "
        "the loop, so the peak is two graphs ({}) instead of one ({}).".format(
            fmt_bytes(L2.get("graph_bytes")), fmt_bytes(L2.get("graph_peak_bytes")),
            fmt_bytes(one_graph)),
    ]
    return Outcome(leak_fig, fixed_fig, leak_shows, fixed_clean, notes)


def completed_steps(run):
    return len(re.findall(r"^step \d+:", run.stdout, re.M))


def eval_hidden_state(res):
    n = res.rule.n
    L = [res.one("leak.py", n), res.one("leak.py", 2 * n)]
    R = [res.one("leak_retain_graph.py", n), res.one("leak_retain_graph.py", 2 * n)]
    F1, F2 = res.one("fixed.py", n), res.one("fixed.py", 2 * n)
    err = require_ok([F1, F2])
    if err:
        return Outcome("", err, False, False)
    second_time = "backward through the graph a second time"
    inplace = "modified by an inplace operation"
    leak_shows = all(r.returncode != 0 and second_time in r.stderr and completed_steps(r) == 1
                     for r in L)
    retain_fails = all(r.returncode != 0 and inplace in r.stderr and completed_steps(r) == 1
                       for r in R)
    leak_fig = ("RuntimeError \"Trying to backward through the graph a second time\" at step 2 "
                "(completed {} / {} steps)").format(completed_steps(L[0]), completed_steps(L[1]))
    if not leak_shows:
        leak_fig = "exit {} / {}, completed {} / {} steps: {}".format(
            L[0].returncode, L[1].returncode, completed_steps(L[0]), completed_steps(L[1]),
            L[0].error_line()[:160])
    fixed_fig = "completes {} / {} steps; graph nodes {} → {}; live heap {}".format(
        completed_steps(F1), completed_steps(F2), F1.get("graph_nodes"), F2.get("graph_nodes"),
        fmt_delta(F2.get("malloc_in_use_bytes") - F1.get("malloc_in_use_bytes")))
    fixed_clean = (completed_steps(F1) == n and completed_steps(F2) == 2 * n
                   and F1.get("graph_nodes") == F2.get("graph_nodes")
                   and abs(F2.get("malloc_in_use_bytes") - F1.get("malloc_in_use_bytes")) < FLAT)
    notes = [
        "In a training loop with `backward()` every step the undetached hidden state is not a "
        "silent leak: the second `backward()` reaches the previous chunk's graph, whose saved "
        "tensors were freed, and PyTorch raises at once.",
        "leak_retain_graph.py adds the common workaround `backward(retain_graph=True)`: "
        "{}. The graphs would then chain and grow (memory and backward time linear in the "
        "number of chunks) only if no optimizer step modified the weights between the "
        "`backward()` calls.".format(
            "it fails at step 2 too, with \"one of the variables needed for gradient "
            "computation has been modified by an inplace operation\" (optimizer.step() changed "
            "the weights saved in the retained graph)" if retain_fails else
            "unexpected outcome: " + R[0].error_line()[:160]),
    ]
    return Outcome(leak_fig, fixed_fig, leak_shows and retain_fails, fixed_clean, notes)


def eval_empty_cache(res):
    n = res.rule.n
    L, F = res.one("leak.py", n), res.one("fixed.py", n)
    err = require_ok([L, F])
    if err:
        return Outcome(err, "", False, False, measurable=False)
    leak_fig = "runs; median step {:.2f} ms CPU; CUDA initialised: {}".format(
        1e3 * L.get("median_step_cpu_s"), L.get("cuda_initialized"))
    fixed_fig = "median step {:.2f} ms CPU".format(1e3 * F.get("median_step_cpu_s"))
    notes = [
        "`torch.cuda.empty_cache()` returns immediately when CUDA is not initialised, so the "
        "cost the rule describes (releasing and re-acquiring cached device blocks, with a "
        "device synchronisation) does not exist on a CPU-only machine. Both programs run; "
        "the verdict needs a GPU.",
    ]
    return Outcome(leak_fig, fixed_fig, True, True, notes, measurable=False)


def eval_zero_grad(res):
    n = res.rule.n
    leak, fixed = res.rule.programs[:2]
    L1, L2 = res.one(leak, n), res.one(leak, 2 * n)
    F1, F2 = res.one(fixed, n), res.one(fixed, 2 * n)
    err = require_ok([L1, L2, F1, F2])
    if err:
        return Outcome(err, "", False, False)

    def probe(r, key):
        return (r.get("grad_probe") or {}).get(key)

    def fig(r1, r2, key):
        return ("`.grad` vs {}: relative difference {:.1e} / {:.1e}; |grad| / |last step's "
                "grad| = {:.1f} / {:.1f}; loss after training {:.2f} / {:.2f}").format(
            "sum of all step gradients" if key.endswith("sum_of_step_grads") else
            "last step's gradient", probe(r1, key), probe(r2, key),
            probe(r1, "grad_to_last_step_ratio"), probe(r2, "grad_to_last_step_ratio"),
            r1.get("final_loss"), r2.get("final_loss"))

    leak_fig = fig(L1, L2, "rel_diff_grad_vs_sum_of_step_grads") + "; live heap {}".format(
        fmt_delta(L2.get("malloc_in_use_bytes") - L1.get("malloc_in_use_bytes")))
    fixed_fig = fig(F1, F2, "rel_diff_grad_vs_last_step_grad") + "; live heap {}".format(
        fmt_delta(F2.get("malloc_in_use_bytes") - F1.get("malloc_in_use_bytes")))
    def flat(r1, r2):
        return abs(r2.get("malloc_in_use_bytes") - r1.get("malloc_in_use_bytes")) < FLAT

    leak_shows = flat(L1, L2) and all(
        probe(r, "rel_diff_grad_vs_sum_of_step_grads") <= 1e-5
        and probe(r, "rel_diff_grad_vs_last_step_grad") >= 0.5 for r in (L1, L2))
    fixed_clean = flat(F1, F2) and all(
        probe(r, "rel_diff_grad_vs_last_step_grad") <= 1e-6 for r in (F1, F2))
    notes = [
        "The effect is wrong updates, not memory: without `zero_grad()` the `.grad` used by "
        "step k is exactly the sum of the k per-step gradients (measured through gradient "
        "hooks), and memory is flat in both versions. Loss after {} / {} steps: {:.2f} / {:.2f} "
        "leaking vs {:.2f} / {:.2f} fixed{}.".format(
            n, 2 * n, L1.get("final_loss"), L2.get("final_loss"), F1.get("final_loss"),
            F2.get("final_loss"),
            " -- the summed gradient acts like momentum 1: with this small learning rate it "
            "first gets ahead of the fixed run, then overshoots"
            if L1.get("final_loss") < F1.get("final_loss") and L2.get("final_loss") > L1.get("final_loss")
            else ""),
    ]
    return Outcome(leak_fig, fixed_fig, leak_shows, fixed_clean, notes)


def mem_total_bytes():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def eval_oversized(res):
    n = res.rule.n
    L1, L2 = res.one("leak.py", n), res.one("leak.py", 2 * n)
    F1, F2 = res.one("fixed.py", n), res.one("fixed.py", 2 * n)
    err = require_ok([L1, L2, F1, F2])
    if err:
        return Outcome(err, "", False, False)
    ram = mem_total_bytes()

    def ratio(r):
        return r.get("run_measured_bytes") / float(r.get("run_estimate_bytes"))

    def fig(r1, r2):
        if r1.get("scale") != 1:
            run = "trained copy at 1/{} scale".format(r1.get("scale"))
        else:
            run = "trained at full size"
        return ("{:,} parameters → estimate {} (params × 4 B × (1 + 1 + 2)); {}: measured {} "
                "= {:.4f} × its estimate at {} steps, {:.4f} × at {}").format(
            r1.get("planned_params"), fmt_bytes(r1.get("planned_estimate_bytes")), run,
            fmt_bytes(r1.get("run_measured_bytes")), ratio(r1), n, ratio(r2), 2 * n)

    formula_ok = all(abs(ratio(r) - 1) < 1e-3 for r in (L1, L2, F1, F2))
    steady = (L1.get("run_measured_bytes") == L2.get("run_measured_bytes")
              and F1.get("run_measured_bytes") == F2.get("run_measured_bytes"))
    leak_shows = formula_ok and steady and ram is not None and L1.get("planned_estimate_bytes") > ram
    fixed_clean = formula_ok and steady and ram is not None and F1.get("planned_estimate_bytes") < ram / 4
    notes = [
        "Not run at full size: the weight alone would be {} ({} with gradients and Adam state) "
        "against {} of RAM. The estimate is computed from a `meta`-device model, and the "
        "formula is checked against the bytes really held (parameters + `.grad` + Adam "
        "`exp_avg`/`exp_avg_sq`) by a trained copy; activations and the input batch come on "
        "top of it.".format(
            fmt_bytes(L1.get("planned_params") * 4), fmt_bytes(L1.get("planned_estimate_bytes")),
            fmt_bytes(ram)),
    ]
    return Outcome(fig(L1, L2), fig(F1, F2), leak_shows, fixed_clean, notes)


def eval_anomaly(res):
    n = res.rule.n
    ratios = {}
    parts = {}
    leak_program, fixed_program = res.rule.programs[:2]
    for k in (n, 2 * n):
        leak = [r for r in res.all(leak_program, k)]
        fixed = [r for r in res.all(fixed_program, k)]
        err = require_ok(leak + fixed)
        if err:
            return Outcome(err, "", False, False)
        # Machine load only ever adds time to a run, so the fastest run of
        # each program is the best estimate of its own cost (a per-run
        # median of step times, then the minimum over the repeated runs).
        lc = min(r.get("median_step_cpu_s") for r in leak)
        fc = min(r.get("median_step_cpu_s") for r in fixed)
        lw = min(r.get("median_step_s") for r in leak)
        fw = min(r.get("median_step_s") for r in fixed)
        ratios[k] = lc / fc
        parts[k] = (lc, fc, lw, fw)
    leak_fig = "median step {:.2f} / {:.2f} ms CPU ({:.0f} / {:.0f} steps/s wall) = {:.2f}× / {:.2f}× the fixed program".format(
        1e3 * parts[n][0], 1e3 * parts[2 * n][0], 1 / parts[n][2], 1 / parts[2 * n][2],
        ratios[n], ratios[2 * n])
    fixed_fig = "median step {:.2f} / {:.2f} ms CPU ({:.0f} / {:.0f} steps/s wall)".format(
        1e3 * parts[n][1], 1e3 * parts[2 * n][1], 1 / parts[n][3], 1 / parts[2 * n][3])
    leak_shows = ratios[n] >= 1.25 and ratios[2 * n] >= 1.25
    # The fixed program is the baseline; it "shows the effect" only if its own
    # step time drifts like a slowdown between N and 2N.
    fixed_clean = parts[2 * n][1] <= 1.25 * parts[n][1]
    notes = [
        "Slowdown is per autograd operation (a Python stack trace is captured for every "
        "forward op and every backward node's output is checked), so the ratio is largest for "
        "models made of many small operations, like this one; it does not grow with the number "
        "of steps. Per-step CPU time with one intra-op thread: the median step of each run, "
        "the fastest of {} runs of each program.".format(
            res.rule.repeats),
    ]
    if res.rule.language == "cpp":
        notes = [
            "In LibTorch the cost is far larger than in Python ({:.0f}× here): with anomaly mode "
            "on, every autograd node created in the forward pass stores a symbolised C++ "
            "backtrace (`c10::get_backtrace()`), and every backward node's output is checked "
            "for NaNs. It does not grow with the number of steps. Per-step CPU time with one "
            "intra-op thread: the median step of each run, the fastest of {} runs of each "
            "program.".format(ratios[2 * n], res.rule.repeats),
        ]
    return Outcome(leak_fig, fixed_fig, leak_shows, fixed_clean, notes)


def eval_collect(res):
    n = res.rule.n
    L1, L2 = res.one("leak.py", n), res.one("leak.py", 2 * n)
    F1, F2 = res.one("fixed.py", n), res.one("fixed.py", 2 * n)
    err = require_ok([L1, L2, F1, F2])
    if err:
        return Outcome(err, "", False, False)
    dl = L2.get("held_bytes") - L1.get("held_bytes")
    df = F2.get("held_bytes") - F1.get("held_bytes")
    leak_fig = "tensor bytes held after loop {} → {} ({} per batch); peak RSS {} → {} MiB".format(
        fmt_bytes(L1.get("held_bytes")), fmt_bytes(L2.get("held_bytes")), fmt_bytes(dl / float(n)),
        rss_mib(L1), rss_mib(L2))
    fixed_fig = "tensor bytes held {} → {}; peak RSS {} → {} MiB".format(
        fmt_bytes(F1.get("held_bytes")), fmt_bytes(F2.get("held_bytes")), rss_mib(F1), rss_mib(F2))
    leak_shows = dl >= n * 128 * KIB and L2.get("graph_peak_bytes") == 0
    fixed_clean = abs(df) < FLAT
    notes = [
        "CPU analogue. No autograd graph is involved (under `torch.no_grad()`, {} saved); "
        "memory grows with the evaluation set because every batch's logits stay in the list. "
        "On a GPU the rule's fix `.cpu()` moves that growth to host memory; on the CPU `.cpu()` "
        "is a no-op, so fixed.py instead reduces each batch to an integer count with "
        "`.item()`, which is flat on both.".format(fmt_bytes(L2.get("graph_peak_bytes"))),
    ]
    return Outcome(leak_fig, fixed_fig, leak_shows, fixed_clean, notes)


RULES = [
    Rule("TL001", "accumulate-undetached", "TL001_accumulate", 50,
         "`total_loss += loss` keeps every step's autograd graph reachable: retained memory grows "
         "with the number of steps.",
         "autograd nodes reachable from live tensors and live heap bytes (glibc mallinfo2) after "
         "the loop; saved-activation bytes; peak RSS",
         lambda res: eval_growth(res, "`total_loss`"),
         programs=("leak.py", "fixed.py", "leak_validation.py", "leak_private_total.py")),
    Rule("TL002", "append-undetached", "TL002_append", 80,
         "`losses.append(loss)` keeps every step's loss and its autograd graph alive: retained "
         "memory grows with the number of steps.",
         "autograd nodes reachable from live tensors and live heap bytes after the loop; "
         "saved-activation bytes; peak RSS",
         lambda res: eval_growth(res, "the list")),
    Rule("TL003", "module-tensor-cache", "TL003_module_cache", 20,
         "A non-detached tensor cached on the module in `forward` keeps the last forward's "
         "autograd graph alive after the loop; it does not grow.",
         "autograd nodes and saved-activation bytes reachable after the loop, at N and 2N; live "
         "heap vs the fixed program",
         eval_module_cache),
    Rule("TL004", "missing-worker-init-fn", "TL004_worker_seed", 16,
         "A generator object created in the dataset's `__init__` is copied into every "
         "DataLoader worker, so the workers draw identical random numbers, and every epoch "
         "replays the first.",
         "over 2 epochs with 2 workers: fraction of samples whose augmentation noise repeats "
         "another sample's, and fraction of epoch 2 replaying epoch 1; same for NumPy's global "
         "generator (global_rng.py)",
         eval_worker_seed, programs=("leak.py", "fixed.py", "global_rng.py")),
    Rule("TL005", "pad-packed-no-total-length", "TL005_pad_packed", 20,
         "Under `nn.DataParallel`, `pad_packed_sequence` without `total_length` pads each "
         "replica's output to the longest sequence of that replica's slice of the batch, so the "
         "gathered outputs disagree in length with the padded input and targets.",
         "exit status, output length against the padded input's, and loss, on the CPU "
         "(DataParallel without CUDA calls the module on the whole batch)",
         eval_pad_packed, sizes=(1,)),
    Rule("TL006", "eval-without-no-grad", "TL006_eval_no_grad", 10,
         "Evaluating without `torch.no_grad()` records a graph per batch and keeps its "
         "activations: higher peak memory than with `no_grad` (no growth with the number of "
         "batches).",
         "peak bytes of activations saved for backward during the loop; peak RSS",
         eval_eval_no_grad, extra=(("leak.py", 1),)),
    Rule("TL007", "retain-graph-in-loop", "TL007_retain_graph", 20,
         "`backward(retain_graph=True)` every step keeps the step's saved activations alive "
         "until the next step replaces the graph: one graph held after the loop, peak of two "
         "graphs, no growth.",
         "saved-activation bytes held after the loop and their peak, at N and 2N",
         eval_retain_graph),
    Rule("TL008", "hidden-state-not-detached", "TL008_hidden_state", 5,
         "Carrying an RNN hidden state across training steps without `.detach()` makes the next "
         "`backward()` run into the previous step's freed graph: RuntimeError at step 2.",
         "exit status, error and completed steps; for fixed.py graph nodes and live heap at N "
         "and 2N",
         eval_hidden_state, programs=("leak.py", "leak_retain_graph.py", "fixed.py")),
    Rule("TL009", "empty-cache-in-loop", "TL009_empty_cache", 50,
         "`torch.cuda.empty_cache()` every step releases and re-acquires cached GPU memory, "
         "slowing training.",
         "median CPU time per step (CPU only: the call is a no-op)",
         eval_empty_cache, env={"TORCHLEAK_MEASURE": "off"}, timing=True, sizes=(1,)),
    Rule("TL010", "missing-zero-grad", "TL010_zero_grad", 20,
         "Without `zero_grad()` gradients accumulate across steps: each update uses the sum of "
         "all gradients so far. Memory does not grow.",
         "`.grad` compared with the per-step gradients recorded by hooks; gradient norm; final "
         "loss; live heap",
         eval_zero_grad, env={"TORCHLEAK_GRAD_PROBE": "1"}),
    Rule("TL011", "oversized-layer", "TL011_oversized_layer", 2,
         "`nn.Linear(100000, 100000)` needs more memory than a machine has: params × 4 B × "
         "(1 weight + 1 grad + 2 Adam moments).",
         "parameter count of a `meta`-device model; bytes really held by parameters, gradients "
         "and Adam state of a trained copy vs the formula; machine RAM",
         eval_oversized),
    Rule("TL012", "anomaly-detection-enabled", "TL012_anomaly", 100,
         "`torch.autograd.set_detect_anomaly(True)` left on slows every training step.",
         "median CPU time per training step, leak vs fixed, the fastest of repeated runs, "
         "one intra-op thread",
         eval_anomaly, timing=True, repeats=3,
         # one intra-op thread: a second OpenMP thread spinning while the
         # machine is loaded adds CPU time that is not the program's work
         env={"TORCHLEAK_MEASURE": "off", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}),
    Rule("TL013", "device-tensors-collected", "TL013_collect_outputs", 20,
         "Collecting every batch's outputs in a list during evaluation grows memory with the "
         "size of the evaluation set (CPU analogue of device memory).",
         "bytes of tensor storage held after the loop at N and 2N batches; peak RSS",
         eval_collect),
]


# --------------------------------------------------------------------------
# LibTorch (C++) rules
#
# The programs print the same measurement line through
# fixtures/runtime/cpp/_measure.h.  C++ has no garbage collector to list the
# live tensors, so `graph_nodes` counts the nodes reachable from the tensors
# a program names in its report call (its total, its vector), and
# `held_bytes` is the bytes of every CPU tensor storage alive, counted by an
# allocator that wraps LibTorch's own.  There is no `graph_bytes`.


def eval_cpp_growth(res, what):
    """TL001 / TL002 in C++: graph nodes and live heap grow with N."""
    n = res.rule.n
    L1, L2 = res.one("leak.cpp", n), res.one("leak.cpp", 2 * n)
    F1, F2 = res.one("fixed.cpp", n), res.one("fixed.cpp", 2 * n)
    err = require_ok([L1, L2, F1, F2])
    if err:
        return Outcome(err, "", False, False)

    def delta(a, b, key):
        return b.get(key) - a.get(key)

    dl_nodes = delta(L1, L2, "graph_nodes")
    dl_heap = delta(L1, L2, "malloc_in_use_bytes")
    df_heap = delta(F1, F2, "malloc_in_use_bytes")
    leak_fig = ("graph nodes {} → {} ({:.1f}/step); live heap {} ({:.1f} KiB/step); "
                "tensor bytes {}; peak RSS {} → {} MiB").format(
        L1.get("graph_nodes"), L2.get("graph_nodes"), dl_nodes / float(n), fmt_delta(dl_heap),
        dl_heap / float(n) / KIB, fmt_delta(delta(L1, L2, "held_bytes")), rss_mib(L1), rss_mib(L2))
    fixed_fig = "graph nodes {} → {}; live heap {}; tensor bytes {}; peak RSS {} → {} MiB".format(
        F1.get("graph_nodes"), F2.get("graph_nodes"), fmt_delta(df_heap),
        fmt_delta(delta(F1, F2, "held_bytes")), rss_mib(F1), rss_mib(F2))
    leak_shows = dl_nodes >= n and dl_heap >= FLAT
    fixed_clean = F1.get("graph_nodes") == 0 and F2.get("graph_nodes") == 0 and abs(df_heap) < FLAT
    notes = [
        "As in Python: `loss.backward()` frees each step's saved activations (the bytes of all "
        "live CPU tensor storages grow by only {} from {} to {} steps), and what {} keeps is "
        "the chain of autograd nodes, {:.1f} per step and about {:.0f} bytes of heap per step; "
        "peak RSS grows faster ({} → {} MiB) than the heap in use.".format(
            fmt_bytes(delta(L1, L2, "held_bytes")), n, 2 * n, what, dl_nodes / float(n),
            dl_heap / float(n), rss_mib(L1), rss_mib(L2)),
    ]
    if "leak_private_total.cpp" in res.rule.programs:
        T1, T2 = res.one("leak_private_total.cpp", n), res.one("leak_private_total.cpp", 2 * n)
        err = require_ok([T1, T2])
        if err:
            return Outcome(err, fixed_fig, False, fixed_clean, notes)
        dt_nodes = delta(T1, T2, "graph_nodes")
        dt_heap = delta(T1, T2, "malloc_in_use_bytes")
        leak_fig += ("; leak_private_total.cpp (`epoch_loss += loss` on a zero tensor local to "
                     "the epoch function): graph nodes {} → {}, live heap {}").format(
            T1.get("graph_nodes"), T2.get("graph_nodes"), fmt_delta(dt_heap))
        leak_shows = leak_shows and dt_nodes >= n and dt_heap >= FLAT
        notes.append(
            "A total local to the epoch function (leak_private_total.cpp) keeps the graphs the "
            "same way ({:.1f} nodes and {:.1f} KiB of heap per step), through the mean it "
            "returns, until the caller drops it; torchleak's `.detach()` fix is safe there, and "
            "the fixes section below runs it.".format(dt_nodes / float(n), dt_heap / float(n) / KIB))
    return Outcome(leak_fig, fixed_fig, leak_shows, fixed_clean, notes)


def eval_cpp_module_cache(res):
    n = res.rule.n
    L1, L2 = res.one("leak.cpp", n), res.one("leak.cpp", 2 * n)
    F1, F2 = res.one("fixed.cpp", n), res.one("fixed.cpp", 2 * n)
    err = require_ok([L1, L2, F1, F2])
    if err:
        return Outcome(err, "", False, False)
    dl_heap = L2.get("malloc_in_use_bytes") - L1.get("malloc_in_use_bytes")
    df_heap = F2.get("malloc_in_use_bytes") - F1.get("malloc_in_use_bytes")
    heap_vs_fixed = L2.get("malloc_in_use_bytes") - F2.get("malloc_in_use_bytes")
    leak_fig = ("graph nodes reachable from the member after the loop {} → {}; tensor bytes "
                "{} / {}; live heap {} from N to 2N, {} more than fixed").format(
        L1.get("graph_nodes"), L2.get("graph_nodes"), fmt_bytes(L1.get("held_bytes")),
        fmt_bytes(L2.get("held_bytes")), fmt_delta(dl_heap), fmt_bytes(heap_vs_fixed))
    fixed_fig = "graph nodes {} → {}; tensor bytes {} / {}; live heap {}".format(
        F1.get("graph_nodes"), F2.get("graph_nodes"), fmt_bytes(F1.get("held_bytes")),
        fmt_bytes(F2.get("held_bytes")), fmt_delta(df_heap))
    leak_shows = (L1.get("graph_nodes") > 0
                  and L1.get("graph_nodes") == L2.get("graph_nodes")
                  and abs(dl_heap) < FLAT)
    fixed_clean = F1.get("graph_nodes") == 0 and F2.get("graph_nodes") == 0 and abs(df_heap) < FLAT
    notes = [
        "As in Python the claim is weaker than \"retains memory\": the member keeps only the "
        "last forward's graph ({} nodes), which does not grow with the number of steps; "
        "`backward()` already freed its saved activations, so both programs hold the same "
        "tensor bytes ({} / {}) and the leaking one {} more heap, the node chain.".format(
            L2.get("graph_nodes"), fmt_bytes(L2.get("held_bytes")), fmt_bytes(F2.get("held_bytes")),
            fmt_bytes(heap_vs_fixed)),
    ]
    return Outcome(leak_fig, fixed_fig, leak_shows, fixed_clean, notes)


def eval_cpp_collect(res):
    n = res.rule.n
    L1, L2 = res.one("leak.cpp", n), res.one("leak.cpp", 2 * n)
    F1, F2 = res.one("fixed.cpp", n), res.one("fixed.cpp", 2 * n)
    err = require_ok([L1, L2, F1, F2])
    if err:
        return Outcome(err, "", False, False)
    dl = L2.get("held_bytes") - L1.get("held_bytes")
    df = F2.get("held_bytes") - F1.get("held_bytes")
    leak_fig = ("tensor bytes held after loop {} → {} ({} per batch); graph nodes {}; peak RSS "
                "{} → {} MiB").format(
        fmt_bytes(L1.get("held_bytes")), fmt_bytes(L2.get("held_bytes")), fmt_bytes(dl / float(n)),
        L2.get("graph_nodes"), rss_mib(L1), rss_mib(L2))
    fixed_fig = "tensor bytes held {} → {}; peak RSS {} → {} MiB".format(
        fmt_bytes(F1.get("held_bytes")), fmt_bytes(F2.get("held_bytes")), rss_mib(F1), rss_mib(F2))
    leak_shows = dl >= n * 128 * KIB and L2.get("graph_nodes") == 0
    fixed_clean = abs(df) < FLAT
    notes = [
        "CPU analogue, as in Python: under `torch::NoGradGuard` the collected logits have no "
        "graph ({} nodes); memory grows with the evaluation set because every batch's logits "
        "(and labels) stay in the vectors. fixed.cpp reduces each batch to a count with "
        "`.item<int64_t>()`, since `.cpu()` is a no-op on the CPU.".format(L2.get("graph_nodes")),
    ]
    return Outcome(leak_fig, fixed_fig, leak_shows, fixed_clean, notes)


CPP_RULES = [
    Rule("TL001", "accumulate-undetached", "TL001_accumulate", 50,
         "`total_loss = total_loss + loss` (or `+=`) on a tensor total keeps every step's "
         "autograd graph reachable: retained memory grows with the number of steps.",
         "autograd nodes reachable from the total after the loop; live heap bytes (glibc "
         "mallinfo2); bytes of all live CPU tensor storages; peak RSS",
         lambda res: eval_cpp_growth(res, "`total_loss`"), language="cpp",
         programs=("leak.cpp", "fixed.cpp", "leak_private_total.cpp")),
    Rule("TL002", "append-undetached", "TL002_append", 80,
         "`losses.push_back(loss)` into a `std::vector<torch::Tensor>` keeps every step's loss "
         "and its autograd graph alive: retained memory grows with the number of steps.",
         "autograd nodes reachable from the vector after the loop; live heap bytes; bytes of "
         "all live CPU tensor storages; peak RSS",
         lambda res: eval_cpp_growth(res, "the vector"), language="cpp"),
    Rule("TL003", "module-tensor-cache", "TL003_module_cache", 20,
         "A member tensor assigned a non-detached value in `forward` keeps the last forward's "
         "autograd graph alive after the loop; it does not grow.",
         "autograd nodes reachable from the member after the loop, at N and 2N; tensor bytes; "
         "live heap vs the fixed program",
         eval_cpp_module_cache, language="cpp"),
    Rule("TL010", "missing-zero-grad", "TL010_zero_grad", 20,
         "Without `zero_grad()` gradients accumulate across steps: each update uses the sum of "
         "all gradients so far. Memory does not grow.",
         "`.grad()` compared with the per-step gradients recorded by hooks; gradient norm; final "
         "loss; live heap",
         eval_zero_grad, env={"TORCHLEAK_GRAD_PROBE": "1"}, language="cpp"),
    Rule("TL012", "anomaly-detection-enabled", "TL012_anomaly", 5,
         "`torch::autograd::AnomalyMode::set_enabled(true)` left on slows every training step.",
         "median CPU time per training step, leak vs fixed, the fastest of repeated runs, one "
         "intra-op thread",
         eval_anomaly, timing=True, repeats=2, language="cpp",
         env={"TORCHLEAK_MEASURE": "off", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}),
    Rule("TL013", "device-tensors-collected", "TL013_collect_outputs", 20,
         "Collecting every batch's outputs in a `std::vector` during evaluation grows memory "
         "with the size of the evaluation set (CPU analogue of device memory).",
         "bytes of all live CPU tensor storages after the loop at N and 2N batches; graph nodes "
         "reachable from the vector; peak RSS",
         eval_cpp_collect, language="cpp"),
]

ALL_RULES = RULES + CPP_RULES


# --------------------------------------------------------------------------
# Fixes applied by torchleak and run
#
# For every program that carries an `# expect:` marker, torchleak's fixes are
# applied to a copy of the program's folder, once with the safe fixes only
# (`check --no-cache --fix`) and once with the unsafe ones too
# (`--unsafe-fixes`).  When a copy changed, the original and the fixed
# program run with the same iteration count under TORCHLEAK_TRAIN_PROBE=1,
# which records the parameters that received a gradient and the value of
# every scalar that backward() was called on.  A safe fix must keep both;
# the unsafe fixes are run for information only.

TRAIN_PROBE_ENV = {"TORCHLEAK_TRAIN_PROBE": "1", "TORCHLEAK_MEASURE": "off"}
LOSS_RTOL = 1e-5  # same seeds: the losses should be equal, not just close
LOSS_RTOL_TEXT = "1e-5"


def default_torchleak():
    env = os.environ.get("TORCHLEAK_BINARY")
    if env:
        return env
    for preset in ("dev", "release"):
        path = os.path.join(ROOT, "build", preset, "torchleak")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def marked_programs(rule):
    """The programs of a rule's folder that carry an `# expect:` (C++: `// expect:`) marker."""
    folder = os.path.join(rule.root, rule.folder)
    ext, marker = (".cpp", "// expect:") if rule.language == "cpp" else (".py", "# expect:")
    out = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(ext) or name == "fixed" + ext:
            continue
        with open(os.path.join(folder, name)) as f:
            if marker in f.read():
                out.append(name)
    return out


def parse_findings(report):
    """(rule, line, fix title, fix safety) of every finding of a JSON report."""
    out = []
    for d in json.loads(report).get("diagnostics", []):
        fix = d.get("fix") or {}
        out.append((d.get("rule"), d.get("start", {}).get("line"), fix.get("title"),
                    fix.get("safety")))
    return out


def torchleak_findings(binary, path):
    """(rule, line, fix title, fix safety) of every finding torchleak reports on path."""
    proc = subprocess.run([binary, "check", "--no-cache", "--exit-zero", "--output-format", "json",
                           path], cwd=os.path.dirname(path), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError("torchleak exited {}: {}".format(proc.returncode,
                                                            proc.stderr.strip()[:200]))
    return parse_findings(proc.stdout)


class Applied(object):
    """torchleak's fixes applied to one copy of a program."""

    def __init__(self, unsafe):
        self.unsafe = unsafe
        self.changed = False
        self.fixes = []  # (rule, title, safety) of the fixes applied
        self.error = None
        self.base = None  # the copy's root, for run_program
        self.text = None
        self.offered = None  # the findings before the fixes: (rule, line, title, safety)


def copy_program_folder(rule, dest_base):
    """Copy a rule's program folder (and, for C++, the shared helper) under dest_base."""
    dest = os.path.join(dest_base, rule.folder)
    shutil.copytree(os.path.join(rule.root, rule.folder), dest,
                    ignore=shutil.ignore_patterns("__pycache__", ".torchleak_cache"))
    if rule.language == "cpp":
        # the programs include "../_measure.h"
        shutil.copy2(os.path.join(rule.root, CPP_HELPER), os.path.join(dest_base, CPP_HELPER))
    return dest


def apply_fixes(binary, rule, program, unsafe, tmp_root, offered=None):
    """Fix a copy of ``program`` with torchleak; ``offered``: its findings, if known."""
    applied = Applied(unsafe)
    applied.base = os.path.join(tmp_root, "unsafe" if unsafe else "safe")
    dest = copy_program_folder(rule, applied.base)
    path = os.path.join(dest, program)
    with open(path) as f:
        before = f.read()
    # The report after --fix lists the findings that remain.
    cmd = ([binary, "check", "--no-cache", "--fix"] + (["--unsafe-fixes"] if unsafe else [])
           + ["--output-format", "json", path])
    try:
        if offered is None:
            offered = torchleak_findings(binary, path)
        applied.offered = offered
        proc = subprocess.run(cmd, cwd=dest, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=300)
        # 0: nothing remains, 1: findings remain; anything else is an error
        if proc.returncode not in (0, 1):
            raise RuntimeError("`torchleak check --fix{}` exited {}: {}".format(
                " --unsafe-fixes" if unsafe else "", proc.returncode,
                (proc.stderr or proc.stdout).strip()[:200]))
        remaining = [(r, t) for r, _, t, _ in parse_findings(proc.stdout)]
    except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
        applied.error = str(exc)
        return applied
    with open(path) as f:
        applied.text = f.read()
    applied.changed = applied.text != before
    for rule, line, title, safety in offered:
        if title is None or (safety != "safe" and not unsafe):
            continue
        if (rule, title) in remaining:
            remaining.remove((rule, title))
        else:
            applied.fixes.append((rule, title, safety))
    return applied


class FixCase(object):
    def __init__(self, rule, program):
        self.rule = rule
        self.program = program
        self.safe = None
        self.unsafe = None
        self.original = None  # Run under the training probe
        self.safe_run = None
        self.unsafe_run = None

    @property
    def name(self):
        return "{}/{}".format(self.rule.folder, self.program)


def probe(run):
    return run.get("train_probe") or {}


PRINTED_NUMBER = re.compile(r"-?\d+(?:\.(\d+))?(?:[eE][-+]?\d+)?")


def printed_lines(run):
    return [l for l in run.stdout.splitlines() if not l.startswith(MARK)]


def printed_agree(a, b):
    """Whether two runs print the same text, numbers equal to their printed precision."""
    la, lb = printed_lines(a), printed_lines(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if PRINTED_NUMBER.sub("#", x) != PRINTED_NUMBER.sub("#", y):
            return False
        for mx, my in zip(PRINTED_NUMBER.finditer(x), PRINTED_NUMBER.finditer(y)):
            vx, vy = float(mx.group(0)), float(my.group(0))
            decimals = max(len(mx.group(1) or ""), len(my.group(1) or ""))
            tol = max(LOSS_RTOL * max(abs(vx), abs(vy)), 1.001 * 10.0 ** -decimals if decimals else 0)
            if abs(vx - vy) > tol:
                return False
    return True


def losses_close(a, b):
    if math.isnan(a) and math.isnan(b):
        return True
    return math.isclose(a, b, rel_tol=LOSS_RTOL, abs_tol=1e-12)


class Comparison(object):
    """The original program's training against the fixed program's."""

    def __init__(self, original, fixed):
        self.preserved = False
        self.params = ""
        self.losses = ""
        self.problems = []
        self.trains = False
        if not original.ok or not fixed.ok:
            for label, r in (("original", original), ("fixed", fixed)):
                if r.returncode != 0:
                    error = r.error_line()
                    if len(error) > 110:
                        error = error[:110].rstrip() + "…"
                    self.problems.append("{} program exits {} ({})".format(
                        label, r.returncode, error))
                elif not r.ok:
                    self.problems.append("{} program printed no measurement".format(label))
            self.params = self.losses = "—"
            return
        po, pf = probe(original), probe(fixed)
        got_o = set(k for k, c in po.get("params", {}).items() if c > 0)
        got_f = set(k for k, c in pf.get("params", {}).items() if c > 0)
        lost, gained = sorted(got_o - got_f), sorted(got_f - got_o)
        total = len(set(po.get("params", {})) | set(pf.get("params", {})))
        self.params = "{} → {} of {}".format(len(got_o), len(got_f), total)
        if lost:
            self.problems.append("{} parameter(s) no longer receive a gradient: {}".format(
                len(lost), ", ".join(short_param(k) for k in lost[:4])))
            self.params += "; lost: " + ", ".join(short_param(k) for k in lost[:4])
        if gained:
            self.problems.append("{} parameter(s) receive a gradient only after the fix: {}".format(
                len(gained), ", ".join(short_param(k) for k in gained[:4])))
            self.params += "; gained: " + ", ".join(short_param(k) for k in gained[:4])
        if not lost and not gained:
            self.params += ", none lost"
        lo, lf = po.get("losses", []), pf.get("losses", [])
        if len(lo) != len(lf):
            self.problems.append("{} backward() losses before, {} after".format(len(lo), len(lf)))
            self.losses = "{} → {} backward() calls".format(len(lo), len(lf))
        elif not lo:
            # Nothing trains (an evaluation program): what it computes is
            # what it prints.
            if printed_agree(original, fixed):
                self.losses = "no backward(); printed results agree ({})".format(
                    " / ".join(printed_lines(fixed))[:120])
            else:
                self.problems.append("printed results differ")
                self.losses = "no backward(); printed results differ: {} vs {}".format(
                    " / ".join(printed_lines(original))[:100],
                    " / ".join(printed_lines(fixed))[:100])
        else:
            bad = [i for i, (a, b) in enumerate(zip(lo, lf)) if not losses_close(a, b)]
            worst = max(abs(a - b) / max(abs(a), abs(b), 1e-30) for a, b in zip(lo, lf))
            if bad:
                i = bad[0]
                self.problems.append("losses differ from step {} on ({:.6g} vs {:.6g})".format(
                    i + 1, lo[i], lf[i]))
                self.losses = ("{} losses; {} differ, first at step {} ({:.6g} vs {:.6g}); "
                               "last {:.4f} vs {:.4f}").format(
                    len(lo), len(bad), i + 1, lo[i], lf[i], lo[-1], lf[-1])
            else:
                self.losses = "{} losses, equal (largest relative difference {:.1e})".format(
                    len(lo), worst)
        self.trains = bool(lo)
        self.preserved = not self.problems


def short_param(key):
    # "__main__.SmallCNN#0.features.0.weight" -> "SmallCNN#0.features.0.weight"
    head, _, rest = key.partition("#")
    return head.rsplit(".", 1)[-1] + ("#" + rest if rest else "")


def fixes_text(fixes, safety=None):
    parts = ["{} {}{}".format(rule, title, "" if safety else " ({})".format(s))
             for rule, title, s in fixes if safety is None or s == safety]
    return "; ".join(parts) if parts else "—"


def run_fix_phase(rules, python, binary, jobs, log, builder=None):
    """Apply torchleak's fixes to every marked program and run them; a list of FixCase.

    C++ programs (only with a ``builder``) are compiled after their fixes are
    applied; the original program's executable comes from the rules' runs
    when they compiled it."""
    cases = [FixCase(rule, program) for rule in rules for program in marked_programs(rule)
             if rule.language != "cpp" or builder is not None]
    tmp_root = tempfile.mkdtemp(prefix="torchleak-oracle-fixes-")
    try:
        def fix(case):
            tmp = os.path.join(tmp_root, "{}-{}-{}".format(
                case.rule.language, case.rule.folder, os.path.splitext(case.program)[0]))
            case.safe = apply_fixes(binary, case.rule, case.program, False, tmp)
            # the findings of the unchanged copy are the same for the second copy
            case.unsafe = apply_fixes(binary, case.rule, case.program, True, tmp,
                                      case.safe.offered)
            return case

        # torchleak analyses C++ files for a second or two each: fix several at once.
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for case in pool.map(fix, cases):
                log("  fixes {} {}: safe {}, unsafe {}".format(
                    case.rule.label, case.program,
                    "error" if case.safe.error else "changed" if case.safe.changed else "no change",
                    "error" if case.unsafe.error else
                    "changed" if case.unsafe.changed else "no change"))
        jobs_list = []
        for case in cases:
            if not (case.safe.changed or case.unsafe.changed):
                continue
            jobs_list.append((case, "original", case.rule.root))
            if case.safe.changed:
                jobs_list.append((case, "safe", case.safe.base))
            if case.unsafe.changed and case.unsafe.text != case.safe.text:
                jobs_list.append((case, "unsafe", case.unsafe.base))

        def source(item):
            case, which, base = item
            return os.path.join(base, case.rule.folder, case.program)

        compiled = {}
        cpp_items = [item for item in jobs_list if item[0].rule.language == "cpp"]
        if cpp_items:
            labels = {source(item): "{}/{}{}".format(
                item[0].rule.folder, item[0].program,
                "" if item[1] == "original" else " ({} fixes)".format(item[1]))
                for item in cpp_items}
            compiled = builder.build([source(item) for item in cpp_items], labels=labels)

        def go(item):
            case, which, base = item
            if case.rule.language == "cpp":
                return item, run_binary(compiled.get(source(item)), case.rule.folder, case.program,
                                        case.rule.n, TRAIN_PROBE_ENV, case.rule.timeout, base=base)
            return item, run_program(python, case.rule.folder, case.program, case.rule.n,
                                     TRAIN_PROBE_ENV, case.rule.timeout, base=base)

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for (case, which, base), run in pool.map(go, jobs_list):
                setattr(case, "original" if which == "original" else which + "_run", run)
                log("  fixes {} {} ({}) {:>4}: exit {} in {:.1f} s".format(
                    case.rule.label, case.program, which, case.rule.n, run.returncode,
                    run.seconds))
        for case in cases:
            if case.unsafe.changed and case.unsafe_run is None:
                case.unsafe_run = case.safe_run  # the unsafe fixes changed nothing more
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    return cases


def safe_verdict(case):
    """(status, text) of a program's safe fixes: PASS, FAIL or None (no safe fix applied)."""
    if case.safe.error:
        return "FAIL", "torchleak failed: " + case.safe.error
    if not case.safe.changed:
        return None, "no safe fix"
    c = Comparison(case.original, case.safe_run)
    if c.preserved:
        return "PASS", ("safe: training unchanged" if c.trains else
                        "safe: no backward(), printed results unchanged")
    return "FAIL", "FAILS: " + "; ".join(c.problems)


def unsafe_summary(case):
    if case.unsafe.error:
        return "torchleak failed: " + case.unsafe.error
    c = Comparison(case.original, case.unsafe_run)
    if c.preserved:
        return ("training preserved here" if c.trains else
                "no backward(); printed results preserved here")
    if not case.original.ok:
        return "not comparable: " + "; ".join(c.problems)
    return "changes training: " + "; ".join(c.problems)


def has_unsafe(case):
    return case.unsafe is not None and any(s != "safe" for _, _, s in case.unsafe.fixes)


# --------------------------------------------------------------------------
# Driver


def torch_versions(python):
    try:
        out = subprocess.run(
            [python, "-c", "import torch, numpy; print(torch.__version__, numpy.__version__)"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.split()


def run_rules(rules, python, jobs, log, builder=None, expected_compiles=None):
    """Run every rule's programs and evaluate them: (outcomes, results by rule key).

    The C++ programs are compiled (with ``builder``) while the Python programs
    run; compiling needs no quiet machine, the memory figures do not depend on
    it, and the timing rules run alone afterwards."""
    results = {r.key: Results(r) for r in rules}
    python_parallel = [(r, j) for r in rules if r.language != "cpp" and not r.timing
                       for j in r.jobs()]
    cpp_parallel = [(r, j) for r in rules if r.language == "cpp" and not r.timing for j in r.jobs()]
    serial = []
    for r in rules:
        if r.timing:
            # interleave leak and fixed runs so that drifting machine load
            # affects both alike
            serial.extend((r, j) for j in r.jobs())

    compiled = {}
    sources = [src for r in rules for src in r.sources()]
    build_thread = None
    if sources and builder is not None:
        labels = {src: os.path.relpath(src, CPP_FIXTURES) for src in sources}

        def build():
            try:
                compiled.update(builder.build(sources, labels=labels,
                                              expected_total=expected_compiles))
            except Exception as exc:  # reported as each program's failure to compile
                for src in sources:
                    compiled.setdefault(src, libtorch.Compiled(src, None, repr(exc), 0.0))

        build_thread = threading.Thread(target=build)
        build_thread.start()

    def go(item):
        rule, (program, n, rep) = item
        if rule.language == "cpp":
            return item, run_binary(compiled.get(os.path.join(rule.root, rule.folder, program)),
                                    rule.folder, program, n, rule.env, rule.timeout)
        return item, run_program(python, rule.folder, program, n, rule.env, rule.timeout)

    def record(item, run):
        rule, (program, n, rep) = item
        results[rule.key].add(program, n, rep, run)
        log("  {} {} {:>4}: exit {} in {:.1f} s".format(rule.rule_id, program, n,
                                                         run.returncode, run.seconds))

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for item, run in pool.map(go, python_parallel):
                record(item, run)
    finally:
        if build_thread is not None:
            build_thread.join()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for item, run in pool.map(go, cpp_parallel):
            record(item, run)
    for item in serial:
        record(*go(item))
    outcomes = []
    for rule in rules:
        try:
            outcome = rule.evaluate_fn(results[rule.key])
        except Exception as exc:  # a missing figure is a failed rule, not a crash
            outcome = Outcome("evaluation error: {!r}".format(exc), "", False, False)
        outcome.names = tuple(rule.programs[:2])
        outcomes.append((rule, outcome))
    return outcomes, results


def md_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def fix_tables(fix_phase):
    """The markdown sections on torchleak's fixes (fix_phase: cases, or a reason it was skipped)."""
    lines = ["", "## Safe fixes, applied by torchleak and run", ""]
    if isinstance(fix_phase, str):
        return lines + ["Not run: {}.".format(fix_phase), ""]
    lines += [
        "Every program above that carries an `# expect:` marker (`// expect:` in C++) is "
        "copied and fixed with `torchleak check --no-cache --fix` (safe fixes only); a fixed "
        "C++ copy is compiled like the original. When the file changed, the "
        "original and the fixed program run with the same N under `TORCHLEAK_TRAIN_PROBE=1`, "
        "which records which parameters received a gradient in any `backward()` and the value "
        "of every scalar `backward()` was called on. A safe fix must leave every parameter "
        "that received a gradient still receiving one, the losses equal (relative tolerance "
        "{}, same seeds) and both programs exiting 0; a program with no `backward()` trains "
        "nothing and must print the same results, each number to its printed precision. A safe "
        "fix that fails this fails `--check`.".format(LOSS_RTOL_TEXT),
        "",
        "| Program (N) | Safe fixes applied | Parameters receiving a gradient (original → fixed) "
        "| Losses (original vs fixed) | Verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    none = []
    for case in fix_phase:
        status, text = safe_verdict(case)
        if status is None:
            none.append(case.name)
            continue
        if case.safe.error:
            lines.append("| {} | — | — | — | {} |".format(md_cell(case.name), md_cell("**" + text + "**")))
            continue
        c = Comparison(case.original, case.safe_run)
        lines.append("| {} | {} | {} | {} | {} |".format(
            md_cell("{} ({})".format(case.name, case.rule.n)),
            md_cell(fixes_text(case.safe.fixes, "safe")), md_cell(c.params), md_cell(c.losses),
            md_cell("**{}**".format(text))))
    if none:
        lines += ["", "No safe fix applies to: {}.".format(", ".join("`{}`".format(n) for n in none))]
    lines += [
        "",
        "## Unsafe fixes, for information",
        "",
        "The same with `--fix --unsafe-fixes`, for the programs where an unsafe fix applies "
        "(the safe fixes are applied too). This never fails `--check`: it shows what the "
        "unsafe fixes change in these programs. Where they change nothing here, what makes "
        "them unsafe is code these programs do not have (a second `backward()` through a "
        "retained graph, a reader that differentiates through a stored value, later code "
        "that needs a tensor on its device).",
        "",
        "| Program (N) | Fixes applied | Parameters receiving a gradient (original → fixed) "
        "| Losses (original vs fixed) | Training |",
        "| --- | --- | --- | --- | --- |",
    ]
    for case in fix_phase:
        if case.unsafe.error:
            lines.append("| {} | — | — | — | {} |".format(
                md_cell(case.name), md_cell("torchleak failed: " + case.unsafe.error)))
            continue
        if not has_unsafe(case) or not case.unsafe.changed:
            continue
        c = Comparison(case.original, case.unsafe_run)
        lines.append("| {} | {} | {} | {} | {} |".format(
            md_cell("{} ({})".format(case.name, case.rule.n)), md_cell(fixes_text(case.unsafe.fixes)),
            md_cell(c.params), md_cell(c.losses), md_cell(unsafe_summary(case))))
    lines.append("")
    return lines


def rule_rows(outcomes):
    lines = [
        "| Rule | Claim (as measured) | What is measured | Leaking program | Fixed program | Verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for rule, o in outcomes:
        lines.append("| {} | {} | {} | {} | {} | {} |".format(
            md_cell("{} {} (N = {})".format(rule.rule_id, rule.name, rule.n)),
            md_cell(rule.claim), md_cell(rule.measured), md_cell(o.leak_figure),
            md_cell(o.fixed_figure), md_cell("**{}**".format(o.verdict))))
    return lines


def write_table(path, outcomes, versions, seconds, cpu_seconds, fix_phase, cpp=None):
    """Write the verdicts; ``cpp``: how the C++ programs were built, or why they were not."""
    cpp = cpp or {}
    python_outcomes = [(r, o) for r, o in outcomes if r.language != "cpp"]
    cpp_outcomes = [(r, o) for r, o in outcomes if r.language == "cpp"]
    versions = versions or ("?", "?")
    built = ""
    if cpp.get("toolchain") and cpp.get("count"):
        built = (" Compiling the {} LibTorch programs (two at a time{}, the first ones while "
                 "the Python programs ran) took {:.0f} s of it.".format(
                     cpp["count"],
                     ", after precompiling `<torch/torch.h>` in {:.0f} s".format(cpp["pch_seconds"])
                     if cpp.get("pch_seconds") else "", cpp["seconds"]))
    lines = [
        "# Runtime verdicts",
        "",
        "Generated by `/usr/bin/python3 tools/runtime/oracle.py --write-table "
        "docs/runtime-verdicts.md`; do not edit by hand. Method: "
        "[runtime-oracle.md](runtime-oracle.md).",
        "",
        "Measured on CPU with PyTorch {} and NumPy {} (Python {}, {} CPU cores){}. The programs "
        "used {:.0f} s of CPU time; the oracle took {:.0f} s of wall-clock time, which depends on "
        "what else the machine was running.{}".format(
            versions[0], versions[1], platform.python_version(), os.cpu_count(),
            "; the C++ programs were compiled with {} (`{}`)".format(
                cpp["toolchain"], " ".join(libtorch.STANDARD_FLAGS)) if cpp.get("toolchain") else "",
            cpu_seconds, seconds, built),
        "Figures are given for N and 2N iterations as `N → 2N` or `N / 2N`; N is the number "
        "in the rule column.",
        "",
    ]
    lines += rule_rows(python_outcomes)
    lines += [
        "",
        "## LibTorch (C++) programs",
        "",
    ]
    if cpp.get("skipped"):
        lines.append("Not run: {}.".format(cpp["skipped"]))
    elif cpp_outcomes:
        lines += [
            "The same claims, measured on LibTorch programs (`fixtures/runtime/cpp/`), compiled "
            "and run the same way. \"Tensor bytes\" are the bytes of every CPU tensor storage "
            "alive, counted by an allocator that wraps LibTorch's; graph nodes are counted from "
            "the tensors the program keeps after the loop (its total, its vector, its member).",
            "",
        ]
        lines += rule_rows(cpp_outcomes)
    else:
        lines.append("Not selected.")
    lines += ["", "## Findings", ""]
    for rule, o in python_outcomes + cpp_outcomes:
        for note in o.notes:
            lines.append("- **{}{}**: {}".format(rule.rule_id,
                                                 " (C++)" if rule.language == "cpp" else "", note))
    lines += fix_tables(fix_phase)
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless every measurable rule's claim holds")
    parser.add_argument("--write-table", metavar="PATH",
                        help="write the markdown verdict table to PATH")
    parser.add_argument("--json", metavar="PATH", help="dump every run's measurements to PATH")
    parser.add_argument("--rules", help="comma-separated rule ids (default: all)")
    parser.add_argument("--jobs", type=int, default=2,
                        help="programs run (memory rules) or compiled (C++) at once (default 2)")
    parser.add_argument("--python", default=os.environ.get("TORCHLEAK_PYTHON", "/usr/bin/python3"),
                        help="interpreter with torch for the programs (default /usr/bin/python3)")
    parser.add_argument("--torchleak", metavar="PATH", default=default_torchleak(),
                        help="the torchleak binary whose fixes are applied and run (default: "
                             "$TORCHLEAK_BINARY, else build/dev/torchleak, else "
                             "build/release/torchleak); without one that phase is skipped")
    parser.add_argument("--fixes-only", action="store_true",
                        help="only apply torchleak's fixes and run them, not the rules' claims")
    parser.add_argument("--language", choices=("python", "cpp"),
                        help="only the Python programs or only the LibTorch (C++) ones "
                             "(default: both)")
    parser.add_argument("--cxx", default=os.environ.get("TORCHLEAK_CXX", "g++"),
                        help="C++ compiler for the LibTorch programs (default: $TORCHLEAK_CXX, "
                             "else g++)")
    parser.add_argument("--quiet", action="store_true", help="do not log each run")
    args = parser.parse_args(argv)
    if not args.check and not args.write_table and not args.json:
        args.check = True
    if args.fixes_only and args.write_table:
        parser.error("--write-table needs the whole run, not --fixes-only")

    rules = [r for r in ALL_RULES if args.language in (None, r.language)]
    if args.rules:
        wanted = set(x.strip().upper() for x in args.rules.split(","))
        unknown = wanted - set(r.rule_id for r in rules)
        if unknown:
            parser.error("unknown rule ids{}: {}".format(
                " for --language " + args.language if args.language else "",
                ", ".join(sorted(unknown))))
        rules = [r for r in rules if r.rule_id in wanted]

    versions = None
    if any(r.language == "python" for r in rules):
        versions = torch_versions(args.python)
        if versions is None:
            print("{} cannot import torch and numpy; install python3-torch and python3-numpy "
                  "(or run only the C++ programs: --language cpp)".format(args.python))
            return 77

    def log(msg):
        if not args.quiet:
            print(msg, flush=True)

    start = time.time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_start = children.ru_utime + children.ru_stime
    cpp = {}
    builder = None
    if any(r.language == "cpp" for r in rules):
        toolchain, reason = libtorch.find_toolchain(args.cxx)
        if toolchain is None:
            cpp["skipped"] = reason
            rules = [r for r in rules if r.language != "cpp"]
        else:
            cpp["toolchain"] = toolchain.description
            builder = libtorch.Builder(toolchain, args.jobs, log)
    log("runtime oracle: " + ", ".join(
        (["torch {} numpy {}".format(*versions)] if versions else [])
        + (["C++: " + cpp["toolchain"]] if "toolchain" in cpp else [])
        + ["{} rules".format(len(rules))]))
    if "skipped" in cpp:
        log("C++ programs skipped: " + cpp["skipped"])
    outcomes, results = [], {}
    try:
        if not args.fixes_only:
            # every program, and about one fixed copy per marked program
            expected = sum(len(r.sources()) + len(marked_programs(r))
                           for r in rules if r.language == "cpp")
            outcomes, results = run_rules(rules, args.python, args.jobs, log, builder, expected)
        binary = args.torchleak
        if not binary:
            fix_phase = ("no torchleak binary (pass --torchleak, set TORCHLEAK_BINARY or build "
                         "build/dev)")
        elif not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            fix_phase = "no torchleak binary at {}".format(binary)
        else:
            log("fixes: {}".format(binary))
            fix_phase = run_fix_phase(rules, args.python, os.path.abspath(binary), args.jobs, log,
                                      builder)
    finally:
        if builder is not None:
            cpp.update(count=builder.count, seconds=builder.seconds,
                       pch_seconds=builder.pch_seconds if builder.pch_dir else 0.0)
            builder.close()
    seconds = time.time() - start
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = children.ru_utime + children.ru_stime - cpu_start

    if args.write_table:
        path = args.write_table
        if not os.path.isabs(path):
            path = os.path.join(os.getcwd(), path)
        write_table(path, outcomes, versions, seconds, cpu_seconds, fix_phase, cpp)
        log("wrote " + args.write_table)
    if args.json:
        dump = {}
        for rule_id, res in results.items():
            dump[rule_id] = [
                {"program": p, "n": n, "returncode": r.returncode, "seconds": round(r.seconds, 2),
                 "measure": r.m} for (p, n), runs in sorted(res.runs.items()) for r in runs]
        if not isinstance(fix_phase, str):
            dump["fixes"] = []
            for case in fix_phase:
                entry = {"program": case.name, "n": case.rule.n}
                for label, applied, run in (("safe", case.safe, case.safe_run),
                                            ("unsafe", case.unsafe, case.unsafe_run)):
                    entry[label] = {"changed": applied.changed, "error": applied.error,
                                    "fixes": [list(f) for f in applied.fixes],
                                    "measure": run.m if run else None}
                entry["original"] = case.original.m if case.original else None
                dump["fixes"].append(entry)
        with open(args.json, "w") as f:
            json.dump(dump, f, indent=1, sort_keys=True)

    passed = failed = skipped = 0
    for rule, o in outcomes:
        if not o.measurable:
            skipped += 1
            status = "SKIP"
        elif o.passed:
            passed += 1
            status = "PASS"
        else:
            failed += 1
            status = "FAIL"
        print("{} {}: {}".format(status, rule.label, o.verdict))
        if status == "FAIL":
            print("    leak:  " + o.leak_figure)
            print("    fixed: " + o.fixed_figure)
    if "skipped" in cpp:
        print("SKIP C++ programs: " + cpp["skipped"])
    if isinstance(fix_phase, str):
        print("SKIP safe fixes: " + fix_phase)
    else:
        without = []
        for case in fix_phase:
            status, text = safe_verdict(case)
            if status is None:
                without.append(case.name)
                continue
            if status == "PASS":
                passed += 1
            else:
                failed += 1
            print("{} safe fix {}: {} ({})".format(status, case.name, text,
                                                  fixes_text(case.safe.fixes, "safe")))
        for case in fix_phase:
            if case.unsafe.error or (has_unsafe(case) and case.unsafe.changed):
                print("INFO unsafe fix {}: {} ({})".format(
                    case.name, unsafe_summary(case), fixes_text(case.unsafe.fixes)))
        if without:
            print("no safe fix applies to {} of {} marked programs".format(
                len(without), len(fix_phase)))
    print("{} not measurable on CPU; {:.0f} s wall-clock, {:.0f} s CPU{}".format(
        skipped, seconds, cpu_seconds,
        "; compiled {} C++ programs in {:.0f} s".format(cpp["count"], cpp["seconds"])
        if cpp.get("count") else ""))
    print("{} passed, {} failed".format(passed, failed))
    if args.check and failed:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
