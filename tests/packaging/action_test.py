#!/usr/bin/env python3
"""Checks action.yml and runs its steps the way GitHub runs a composite action.

    python3 tests/packaging/action_test.py SOURCE_DIR WHEEL

Structure: a composite action whose inputs are described and defaulted, whose
`run` steps say `shell: bash`, whose `uses` steps pin a major version, and whose
expressions name only declared inputs and step ids. Behaviour: each step's `if`
is evaluated, `${{ ... }}` expressions are substituted, `run` scripts execute as
GitHub executes them (`bash --noprofile --norc -eo pipefail FILE`, with
GITHUB_OUTPUT, GITHUB_PATH and RUNNER_TEMP), and `uses` steps, which only GitHub
can run, are checked for the values they would receive (upload-sarif gets the
SARIF the run step wrote, which must validate against the SARIF schema). Three
workspaces: a leaking file (annotations, SARIF, exit code 1, the job fails), the
same with fail-on-findings false (the job passes), and a clean file.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

SOURCE, WHEEL = sys.argv[1], sys.argv[2]
ACTION = os.path.join(SOURCE, "action.yml")
failures = 0


def expect(name, condition, detail=""):
    global failures
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else f": {detail}"))
    if not condition:
        failures += 1


with open(ACTION, encoding="utf-8") as f:
    action = yaml.safe_load(f)

# --- structure ---------------------------------------------------------------------------------
expect("action.yml has a name and a description", bool(action.get("name")) and bool(action.get("description")))
expect("it is a composite action", action.get("runs", {}).get("using") == "composite")
inputs = action.get("inputs", {})
for name, spec in inputs.items():
    expect(f"input `{name}` is described and has a string default",
           bool(spec.get("description")) and isinstance(spec.get("default"), str))
steps = action["runs"]["steps"]
ids = {s["id"] for s in steps if "id" in s}
for i, step in enumerate(steps):
    label = step.get("name", f"step {i}")
    expect(f"`{label}` either runs a script or uses an action", ("run" in step) != ("uses" in step))
    if "run" in step:
        expect(f"`{label}` runs under bash", step.get("shell") == "bash")
    else:
        expect(f"`{label}` pins a major version", re.fullmatch(r"[\w.-]+/[\w./-]+@v\d+", step["uses"]) is not None,
               step["uses"])
text = open(ACTION, encoding="utf-8").read()
for expr in re.findall(r"\$\{\{(.*?)\}\}", text) + [s.get("if", "") for s in steps]:
    for ref in re.findall(r"\binputs\.([\w-]+)", expr):
        expect(f"`inputs.{ref}` is a declared input", ref in inputs)
    for ref in re.findall(r"\bsteps\.([\w-]+)\.", expr):
        expect(f"`steps.{ref}` is a declared step id", ref in ids)
for name, spec in action.get("outputs", {}).items():
    expect(f"output `{name}` has a value", "value" in spec)


# --- a small evaluator of the expressions the action uses ---------------------------------------
def evaluate(expr, context):
    """`a.b.c`, 'literals', ==, !=, &&, || (GitHub's precedence: == over && over ||)."""
    tokens = re.findall(r"'[^']*'|==|!=|&&|\|\||[\w.-]+", expr)
    pos = 0

    def atom():
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok.startswith("'"):
            return tok[1:-1]
        value = context
        for part in tok.split("."):
            value = value.get(part, "") if isinstance(value, dict) else ""
        return value

    def comparison():
        nonlocal pos
        left = atom()
        while pos < len(tokens) and tokens[pos] in ("==", "!="):
            op = tokens[pos]
            pos += 1
            right = atom()
            left = (str(left) == str(right)) if op == "==" else (str(left) != str(right))
        return left

    def conjunction():
        nonlocal pos
        left = comparison()
        while pos < len(tokens) and tokens[pos] == "&&":
            pos += 1
            right = comparison()
            left = right if left else left
        return left

    def disjunction():
        nonlocal pos
        left = conjunction()
        while pos < len(tokens) and tokens[pos] == "||":
            pos += 1
            right = conjunction()
            left = left if left else right
        return left

    return disjunction()


def substitute(value, context):
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(evaluate(m.group(1), context)), value)


def run_action(workspace, given):
    """Runs the steps in `workspace` with inputs `given`; the run's context and whether the job failed."""
    runner = tempfile.mkdtemp(prefix="runner-")
    context = {
        "inputs": {name: given.get(name, spec["default"]) for name, spec in inputs.items()},
        "github": {"action_path": SOURCE, "action_ref": "", "sha": "0" * 40},
        "runner": {"temp": runner, "os": "Linux", "arch": "X64"},
        "steps": {},
    }
    path = os.environ["PATH"]
    uses = {}
    failed = False
    for step in steps:
        condition = step.get("if")
        if condition is not None and not evaluate(condition, context):
            continue
        if "uses" in step:
            uses[step["uses"].split("@")[0]] = {k: substitute(str(v), context) for k, v in step.get("with", {}).items()}
            continue
        output = os.path.join(runner, "output")
        github_path = os.path.join(runner, "path")
        open(output, "w").close()
        open(github_path, "w").close()
        env = dict(os.environ, PATH=path, RUNNER_TEMP=runner, GITHUB_OUTPUT=output, GITHUB_PATH=github_path,
                   GITHUB_WORKSPACE=workspace, PIP_NO_INDEX="1")
        env.update({k: substitute(str(v), context) for k, v in step.get("env", {}).items()})
        script = os.path.join(runner, "step.sh")
        with open(script, "w", encoding="utf-8") as f:
            f.write(substitute(step["run"], context))
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", script], cwd=workspace, env=env,
                              capture_output=True, text=True)
        context["steps"].setdefault(step.get("id", ""), {})["stdout"] = proc.stdout
        if "id" in step:
            with open(output, encoding="utf-8") as f:
                context["steps"][step["id"]]["outputs"] = dict(
                    line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        with open(github_path, encoding="utf-8") as f:
            for line in f:
                path = line.strip() + os.pathsep + path
        if proc.returncode != 0:
            failed = True
            context["last_failure"] = proc.stdout + proc.stderr
            break
    return context, uses, failed


def workspace(source):
    d = tempfile.mkdtemp(prefix="workspace-")
    subprocess.run(["git", "init", "-q", d], check=True)
    with open(os.path.join(d, "train.py"), "w", encoding="utf-8") as f:
        f.write(source)
    return d


LEAKING = """def train(model, loader, optimizer, criterion):
    running = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss
    return running
"""

# --- a leaking file: annotations, SARIF uploaded under the category, the job fails ------------
ws = workspace(LEAKING)
context, uses, failed = run_action(ws, {"wheel": WHEEL})
run = context["steps"].get("run", {})
expect("the run step reports exit code 1 (findings)", run.get("outputs", {}).get("exit-code") == "1",
       context.get("last_failure", ""))
expect("the run step prints a workflow annotation for the finding",
       re.search(r"^::warning file=train\.py,line=8,", run.get("stdout", ""), re.M) is not None, run.get("stdout"))
sarif_path = os.path.join(ws, "torchleak.sarif")
expect("the run step writes the SARIF", os.path.exists(sarif_path))
if os.path.exists(sarif_path):
    sarif = json.load(open(sarif_path, encoding="utf-8"))
    results = sarif["runs"][0]["results"]
    expect("the SARIF holds the finding", [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
                                           for r in results] == [("TL001", 8)], results)
    validator = os.path.join(SOURCE, "tests", "sarif", "validate.js")
    proc = subprocess.run(["node", validator, sarif_path], capture_output=True, text=True)
    expect("the SARIF validates against the SARIF 2.1.0 schema", proc.returncode == 0, proc.stdout + proc.stderr)
upload = uses.get("github/codeql-action/upload-sarif")
expect("upload-sarif receives the SARIF and the category",
       upload == {"sarif_file": "torchleak.sarif", "category": "torchleak"}, upload)
expect("the job fails on findings", failed and "torchleak reported findings" in context.get("last_failure", ""))

# --- fail-on-findings: false, a custom category, upload off ----------------------------------------
context, uses, failed = run_action(workspace(LEAKING), {"wheel": WHEEL, "fail-on-findings": "false",
                                                      "upload-sarif": "false"})
expect("with fail-on-findings false the job passes", not failed, context.get("last_failure", ""))
expect("with upload-sarif false nothing is uploaded", "github/codeql-action/upload-sarif" not in uses)

# --- a clean file; extra arguments -------------------------------------------------------------------
context, uses, failed = run_action(workspace(LEAKING.replace("running += loss", "running += loss.item()")),
                                   {"wheel": WHEEL, "args": "--select TL001,TL002", "category": "torchleak-py"})
run = context["steps"].get("run", {})
expect("a clean workspace: exit code 0, the job passes",
       run.get("outputs", {}).get("exit-code") == "0" and not failed, context.get("last_failure", ""))
expect("the category input reaches the upload",
       uses.get("github/codeql-action/upload-sarif", {}).get("category") == "torchleak-py")

# --- a path that does not exist: the run step fails with an error annotation ---------------------------
context, uses, failed = run_action(workspace(LEAKING), {"wheel": WHEEL, "paths": "no/such/dir"})
expect("a missing path fails the run step with an error annotation",
       failed and "::error::torchleak could not analyze the paths" in context.get("last_failure", ""),
       context.get("last_failure", ""))

print(f"action: {failures} failed")
sys.exit(1 if failures else 0)
