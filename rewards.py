"""Verifiers for RL from verifiable rewards: math answers and code. Used by delta.py and eval.py.

    extract_answer(response) -> str | None       last \\boxed{...} after the last </think>
    math_reward(response, gold) -> float         1.0 if that answer equals the gold answer, else 0.0
    code_reward(response, tests, timeout) -> float   1.0 if the last ```python block passes every test
    score_batch(responses, golds, kind="math" | "code") -> list[float]

Every check runs in a pool of worker processes with a wall-clock limit per item: a worker that
overruns is killed and replaced and the item scores 0, so callers never hang and never see an
exception. Model text is never executed by the math path (no sympify/parse_expr on raw strings:
LaTeX goes through math-verify's LaTeX parser). Model code runs in a sandbox (see _sandbox_run).
"""
import atexit
import json
import logging
import multiprocessing as mp
import multiprocessing.connection
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from fractions import Fraction

MATH_TIMEOUT = 5.0  # seconds of wall clock per math item, parsing and sympy included
CODE_TIMEOUT = 10.0  # seconds per code item, all its tests together


# =====================================================================================
# Math: extraction
# =====================================================================================
_BOX = re.compile(r"\\(?:boxed|fbox)\b")


def extract_answer(response):
    """The last brace-matched \\boxed{...} (or \\fbox{...}, or `\\boxed x`) after the last </think>.
    None when it is missing, empty or unclosed."""
    if not isinstance(response, str):
        return None
    if "</think>" in response:
        response = response.rsplit("</think>", 1)[1]
    starts = [m.end() for m in _BOX.finditer(response)]
    if not starts:
        return None
    i = starts[-1]
    while i < len(response) and response[i] == " ":
        i += 1
    if i < len(response) and response[i] == "{":
        depth = 0
        for j in range(i, len(response)):
            c = response[j]
            if c == "{" and response[j - 1] != "\\":
                depth += 1
            elif c == "}" and response[j - 1] != "\\":
                depth -= 1
                if depth == 0:
                    ans = response[i + 1:j].strip()
                    return ans or None
        return None  # unclosed
    if i == starts[-1]:  # neither `\boxed{` nor `\boxed x`
        return None
    m = re.match(r"[^\s$]+", response[i:])  # `\boxed 5`: the next word
    return (m.group(0).rstrip(".") or None) if m else None


# =====================================================================================
# Math: equivalence (runs inside a worker process)
# =====================================================================================
_UNITS = ("cm", "mm", "m", "km", "in", "inch", "inches", "ft", "feet", "foot", "yd", "yards", "miles", "mph",
          "g", "kg", "s", "sec", "seconds", "min", "minutes", "hours", "hour", "days", "day", "units", "unit",
          "degrees", "degree", "dollars", "cents", "meters", "meter", "sq", "square", "cubic", "liters", "ml",
          "people", "ways", "students", "points", "times")
_TEXT_CMDS = r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}"


def _clean(s):
    """Light, content-preserving normalisation of a LaTeX answer."""
    s = str(s).strip()
    s = re.sub(r"^\$+|\$+$", "", s).strip()
    s = re.sub(r"^\\\(|\\\)$|^\\\[|\\\]$", "", s).strip()
    s = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg)(?![a-zA-Z])", "", s)
    s = re.sub(r"(?<!\\)\\[,!;: ]|\\(?:displaystyle|quad|qquad)(?![a-zA-Z])|~", " ", s)
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = re.sub(r"\^\s*\{?\\circ\}?|°|\\degree", "", s)  # degrees
    s = s.replace("\\%", "").replace("%", "")
    s = re.sub(r"\\(?:text|mbox)\s*\{\s*(" + "|".join(_UNITS) + r")(\^?\d)?\s*\}", "", s)  # \text{ cm}
    for _ in range(3):
        s = re.sub(_TEXT_CMDS, r"\1", s)
    s = re.sub(r"(\d)\{,\}(\d)", r"\1,\2", s)  # 1{,}000
    s = re.sub(r"\s+", " ", s).strip().rstrip(".").strip()
    s = re.sub(r"(?<=\d)\s*(?:" + "|".join(_UNITS) + r")(\^?\d)?$", "", s)  # 5 cm
    return s.strip()


def _strip_lhs(s):
    """`x = 3` -> `3` (a single variable or function name on the left)."""
    m = re.match(r"^\s*[a-zA-Z](?:_\{?\w+\}?)?(?:\([a-zA-Z]\))?\s*=(?!=)(.*)$", s, re.S)
    return m.group(1).strip() if m else s


def _rational(s):
    """Exact value of an integer, decimal or simple fraction written in any usual way; else None."""
    t = s.replace(" ", "")
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?", t):
        t = t.replace(",", "")
    if len(t) > 4000:
        return None
    if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)", t):
        return Fraction(t)
    m = re.fullmatch(r"([+-]?)\\frac\{([+-]?\d+)\}\{([+-]?\d+)\}", t) or \
        re.fullmatch(r"([+-]?)\\frac(\d)(\d)", t) or re.fullmatch(r"([+-]?)(\d+)/(\d+)", t)
    if m and int(m.group(3)) != 0:
        return Fraction(int(m.group(2)), int(m.group(3))) * (-1 if m.group(1) == "-" else 1)
    return None


def _split_top(s, seps=(",",)):
    """Split at separators outside any bracket, iteratively (no recursion, any nesting depth)."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(s):
        if s.startswith("\\{", i) or s.startswith("\\}", i):
            depth += 1 if s[i + 1] == "{" else -1
            cur.append(s[i:i + 2])
            i += 2
            continue
        c = s[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        hit = next((sep for sep in seps if depth == 0 and s.startswith(sep, i)), None)
        if hit:
            parts.append("".join(cur).strip())
            cur, i = [], i + len(hit)
            continue
        cur.append(c)
        i += 1
    parts.append("".join(cur).strip())
    return parts


_MATRIX = re.compile(r"^\\begin\{(p|b|B|v|V|small|)matrix\}(.*)\\end\{\1matrix\}$", re.S)


def _structure(s):
    """('set' | 'list' | '(]' brackets | 'matrix', [elements]) for compound answers, else ('atom', s)."""
    m = _MATRIX.match(s)
    if m:
        kind = "det" if m.group(1) in ("v", "V") else "matrix"
        return kind, [[c.strip() for c in row.split("&")] for row in re.split(r"\\\\", m.group(2)) if row.strip()]
    if s.startswith("\\{") and s.endswith("\\}"):
        return "set", _split_top(s[2:-2])
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]" and _balanced_inside(s):
        return s[0] + s[-1], _split_top(s[1:-1])
    if "\\pm" in s and s.count("\\pm") == 1 and "," not in s:
        a, b = s.split("\\pm")
        return "set", [f"{a}+{b}".strip("+"), f"{a}-{b}" if a.strip() else f"-{b}"]
    for sep in ("\\cup",):
        if sep in s and len(_split_top(s, (sep,))) > 1:
            return "union", _split_top(s, (sep,))
    if not re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?", s.replace(" ", "")):
        parts = _split_top(s, (",", "\\text{ and }", " and ", ";"))
        if len(parts) > 1:
            return "set", parts
    return "atom", s


def _balanced_inside(s):
    """The outer brackets of s enclose everything: (a, b) but not (a)+(b)."""
    depth = 0
    for i, c in enumerate(s):
        depth += c in "([{"
        depth -= c in ")]}"
        if depth == 0 and i < len(s) - 1:
            return False
    return True


def _sympy(s):
    """LaTeX -> sympy through math-verify's LaTeX parser (never sympify on raw text); None if it fails."""
    from math_verify import LatexExtractionConfig, parse

    out = parse(f"${s}$", extraction_config=[LatexExtractionConfig()], parsing_timeout=None)
    return out[0] if out else None


def _scalar_equal(a, b):
    if a == b:
        return True
    ra, rb = _rational(a), _rational(b)
    if ra is not None and rb is not None:
        return ra == rb  # exact: 0.333 != 1/3, huge integers digit by digit
    if re.fullmatch(r"[A-Za-z][A-Za-z ]+", a) or re.fullmatch(r"[A-Za-z][A-Za-z ]+", b):
        return a.lower().replace(" ", "") == b.lower().replace(" ", "")  # words, not products of symbols
    import sympy

    x, y = _sympy(a), _sympy(b)
    if x is None or y is None or not isinstance(x, sympy.Basic) or not isinstance(y, sympy.Basic):
        return False
    if isinstance(x, sympy.Eq) or isinstance(y, sympy.Eq):
        return isinstance(x, sympy.Eq) and isinstance(y, sympy.Eq) and (
            sympy.simplify((x.lhs - x.rhs) - (y.lhs - y.rhs)) == 0 or sympy.simplify((x.lhs - x.rhs) + (y.lhs - y.rhs)) == 0)
    if not x.free_symbols and not y.free_symbols:  # numeric tolerance, then exact symbolic
        try:
            fx, fy = complex(sympy.N(x, 30)), complex(sympy.N(y, 30))
            if abs(fx - fy) <= 1e-9 * max(1.0, abs(fx), abs(fy)):
                return True
        except (TypeError, ValueError, OverflowError):
            pass
    try:
        return bool(sympy.simplify(x - y) == 0)
    except Exception:
        return False


def _equal(pred, gold):
    p, g = _clean(pred), _clean(gold)
    if p == g:
        return True
    if "=" in p and "=" not in g:
        p = _strip_lhs(p)
    if "=" in g and "=" not in p:
        g = _strip_lhs(g)
    if p == g:
        return True
    (kp, ep), (kg, eg) = _structure(p), _structure(g)
    if kp != kg:
        return False
    if kp == "atom":
        return _scalar_equal(ep, eg)
    if kp in ("matrix", "det"):
        return len(ep) == len(eg) and all(len(r) == len(s) and all(_equal(x, y) for x, y in zip(r, s))
                                          for r, s in zip(ep, eg))
    if len(ep) != len(eg):
        return False
    if kp == "set":  # unordered: match every element once
        left = list(eg)
        for x in ep:
            hit = next((i for i, y in enumerate(left) if _equal(x, y)), None)
            if hit is None:
                return False
            left.pop(hit)
        return True
    return all(_equal(x, y) for x, y in zip(ep, eg))  # tuples, intervals (bracket types matched), unions


def _gold_text(gold):
    """Gold answers may be int, float or str; keep all of their content."""
    if isinstance(gold, bool):
        return str(gold)
    if isinstance(gold, int):
        return str(gold)
    if isinstance(gold, float):
        return repr(gold) if not gold.is_integer() else str(int(gold))
    gold = str(gold).strip()
    if re.fullmatch(r"\$?\\boxed\{.*\}\$?", gold, re.S):  # a gold that is one boxed expression
        return extract_answer(gold) or gold
    return gold


def _math_check(response, gold):
    """Runs in a worker: 1.0 or 0.0, never raises."""
    try:
        pred = extract_answer(response)
        if pred is None:
            return 0.0
        return 1.0 if _equal(pred, _gold_text(gold)) else 0.0
    except Exception:
        return 0.0


# =====================================================================================
# Code: sandboxed execution
# =====================================================================================
_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.S | re.I)

# The driver runs inside the sandbox: it executes the solution on every test and writes one JSON
# verdict with a nonce to the fd it saved before the solution ran. Exiting early (sys.exit, os._exit)
# before all tests ran leaves no verdict, so the item fails.
_DRIVER = r'''
import io, json, os, sys
spec = json.load(open("spec.json"))
out = os.fdopen(os.dup(1), "w")
src = open("solution.py").read()
code = compile(src, "solution.py", "exec")
ok = True
def run_stdin(inp):
    with open("in.txt", "w") as f:
        f.write(inp)
    fin, fout = os.open("in.txt", os.O_RDONLY), os.open("out.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fin, 0); os.dup2(fout, 1)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    try:
        exec(code, {"__name__": "__main__"})
    except SystemExit as e:
        if e.code not in (None, 0):
            return None
    finally:
        sys.stdout.flush()
    return open("out.txt").read()
lines = lambda s: [l.rstrip() for l in s.strip().splitlines()]
if "inputs" in spec and "fn_name" not in spec:
    for inp, exp in zip(spec["inputs"], spec["outputs"]):
        got = run_stdin(inp)
        ok = ok and got is not None and lines(got) == lines(exp)
        if not ok:
            break
elif "fn_name" in spec:
    g = {"__name__": "solution"}
    exec(code, g)
    f = getattr(g["Solution"](), spec["fn_name"]) if "Solution" in g else g[spec["fn_name"]]
    for args, exp in zip(spec["inputs"], spec["outputs"]):
        got = f(*args)
        ok = ok and json.loads(json.dumps(got)) == exp
        if not ok:
            break
else:
    g = {"__name__": "__main__"}
    exec(compile(src + "\n\n" + spec["assert"] + "\n", "solution.py", "exec"), g)
out.write(json.dumps({"nonce": spec["nonce"], "ok": bool(ok)}))
out.flush()
'''

# Inside the namespaces: the work dir stays writable, every other mount becomes read-only.
_MOUNT_SCRIPT = r'''
W="$1"; shift
mount --bind "$W" "$W" || exit 97
cd "$W" || exit 97
for m in $(cut -d' ' -f2 /proc/self/mounts); do
  case "$m" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/pts|/dev/mqueue|"$W") ;;
    *) mount -o remount,bind,ro "$m" 2>/dev/null ;; esac
done
exec "$@"
'''

LIMITS = {  # resource limits of a sandboxed program
    "address_space": 1 << 30, "file_size": 16 << 20, "open_files": 64, "processes": 64, "output": 1 << 20}
_NAMESPACES = None


def _namespaces_available():
    """Linux user/net/pid/mount namespaces through `unshare`; checked once, warned once if missing."""
    global _NAMESPACES
    if _NAMESPACES is None:
        ok = shutil.which("unshare") is not None
        if ok:
            try:
                ok = subprocess.run(["unshare", "--user", "--map-root-user", "--net", "--pid", "--mount", "--fork",
                                     "--mount-proc", "true"], capture_output=True, timeout=10).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
        if not ok:
            warnings.warn("unshare with user namespaces is unavailable: code runs without network and filesystem "
                          "isolation (separate interpreter, temp dir, resource limits and process-group kill remain)")
        _NAMESPACES = ok
    return _NAMESPACES


_CGROUP_ROOT = None


def _new_pids_cgroup():
    """A fresh pids cgroup capped at LIMITS["processes"]: it bounds a fork bomb even for root, whom
    RLIMIT_NPROC does not bind. None where this process may not make one (then a warning, once)."""
    global _CGROUP_ROOT
    if _CGROUP_ROOT is None:
        _CGROUP_ROOT = ""
        for root in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
            probe = os.path.join(root, f"rlvr-probe-{os.getpid()}")
            try:
                os.mkdir(probe)
                ok = os.path.exists(os.path.join(probe, "pids.max"))
                os.rmdir(probe)
            except OSError:
                continue
            if ok:
                _CGROUP_ROOT = root
                break
        if not _CGROUP_ROOT:
            warnings.warn("no writable pids cgroup: a fork bomb is bounded by RLIMIT_NPROC (not for root), "
                          "the timeout and the PID namespace only")
    if not _CGROUP_ROOT:
        return None
    path = os.path.join(_CGROUP_ROOT, f"rlvr-{os.getpid()}-{os.urandom(4).hex()}")
    os.mkdir(path)
    with open(os.path.join(path, "pids.max"), "w") as f:
        f.write(str(LIMITS["processes"]))
    return path


def _limit_resources(cpu_seconds, cgroup):
    def apply():
        if cgroup:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        os.setsid()  # own session: a timeout kills the whole process group
        for what, value in ((resource.RLIMIT_AS, LIMITS["address_space"]), (resource.RLIMIT_FSIZE, LIMITS["file_size"]),
                            (resource.RLIMIT_NOFILE, LIMITS["open_files"]), (resource.RLIMIT_NPROC, LIMITS["processes"]),
                            (resource.RLIMIT_CPU, int(cpu_seconds) + 1), (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(what, (value, value))
    return apply


def _kill_tree(proc, cgroup, namespaced):
    """With namespaces, kill the namespace's init (unshare's child) first: the kernel then ends every
    process in the PID namespace, and unshare exits only once they are gone. Then the process group and
    whatever the cgroup still holds."""
    if namespaced:
        try:
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            children = []
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    if cgroup:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(os.path.join(cgroup, "cgroup.procs")) as f:
                left = [int(p) for p in f.read().split()]
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        try:
            os.rmdir(cgroup)
        except OSError:
            pass


def _sandbox_run(files, timeout):
    """Run driver.py over `files` in a fresh temp dir; returns the verdict channel's text ('' on timeout).

    Layers: separate interpreter (python -I -B), fresh temp working directory, minimal environment,
    resource limits (address space, CPU time, file size, open files, processes; a pids cgroup where one
    can be made), its own session killed as a group at the deadline, capped output; where Linux namespaces are available, no network, its own
    PID namespace (everything in it dies with it) and every mount but the temp dir read-only.
    """
    work = tempfile.mkdtemp(prefix="rlvr-code-")
    try:
        for name, text in files.items():
            with open(os.path.join(work, name), "w") as f:
                f.write(text)
        cmd = [sys.executable, "-I", "-B", "driver.py"]
        namespaced = _namespaces_available()
        if namespaced:
            cmd = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--mount", "--fork", "--mount-proc",
                   "--kill-child", "sh", "-c", _MOUNT_SCRIPT, "sandbox", work] + cmd
        env = {"PATH": "/usr/bin:/bin", "HOME": work, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
        cgroup = _new_pids_cgroup()
        with tempfile.TemporaryFile() as verdict:
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=verdict,
                                    stderr=subprocess.DEVNULL, preexec_fn=_limit_resources(timeout, cgroup))
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
            finally:
                _kill_tree(proc, cgroup, namespaced)
            verdict.seek(0)
            return verdict.read(LIMITS["output"]).decode("utf-8", "replace")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def extract_code(response):
    blocks = _FENCE.findall(response) if isinstance(response, str) else []
    return blocks[-1] if blocks else None


def code_reward(response, tests, timeout=CODE_TIMEOUT):
    """1.0 when the last fenced python block passes every test, else 0.0. `tests` (dict or JSON string):
    {"inputs": [stdin], "outputs": [stdout]} | {"fn_name", "inputs": [arg lists], "outputs"} | {"assert": src}."""
    try:
        code = extract_code(response)
        if code is None:
            return 0.0
        spec = json.loads(tests) if isinstance(tests, str) else dict(tests)
        if not ("assert" in spec or ("inputs" in spec and "outputs" in spec)):
            return 0.0
        spec["nonce"] = os.urandom(16).hex()
        text = _sandbox_run({"solution.py": code, "driver.py": _DRIVER, "spec.json": json.dumps(spec)}, timeout)
        verdict = json.loads(text) if text.startswith("{") else {}
        return 1.0 if verdict.get("nonce") == spec["nonce"] and verdict.get("ok") is True else 0.0
    except Exception:
        return 0.0


# =====================================================================================
# Worker pool with per-item deadlines
# =====================================================================================
def _worker_loop(conn):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    logging.disable(logging.WARNING)  # math-verify logs every disabled timeout
    fns = {"math": _math_check, "code": code_reward}
    while True:
        try:
            kind, args = conn.recv()
        except EOFError:
            return
        conn.send(fns[kind](*args))


_POOL = []  # [(process, connection)]


def _start_worker():
    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_worker_loop, args=(child,), daemon=True)
    proc.start()
    child.close()
    return proc, parent


def _stop_worker(worker):
    proc, conn = worker
    proc.kill()
    proc.join()
    conn.close()


@atexit.register
def _shutdown():
    while _POOL:
        _stop_worker(_POOL.pop())


def score_batch(responses, golds, kind="math", timeout=None, workers=None):
    """Verdicts (1.0 / 0.0) for many responses in parallel worker processes.

    golds: gold answers (math) or test specs (code). `timeout` is the wall-clock limit of one item
    (default MATH_TIMEOUT, or CODE_TIMEOUT for the sandboxed program, whose worker gets 5 s more to clean
    up). A worker that overruns is killed and replaced; the item scores 0.
    """
    if kind not in ("math", "code"):
        raise ValueError(f"kind must be 'math' or 'code', got {kind!r}")
    if len(responses) != len(golds):
        raise ValueError(f"{len(responses)} responses but {len(golds)} golds")
    limit = timeout or (MATH_TIMEOUT if kind == "math" else CODE_TIMEOUT)
    deadline_after = limit if kind == "math" else limit + 5.0
    workers = workers or max(1, min(4, os.cpu_count() or 1))
    while len(_POOL) < workers:
        _POOL.append(_start_worker())
    results = [0.0] * len(responses)
    todo = list(range(len(responses)))[::-1]
    busy = {}  # pool slot -> (item, deadline)
    while todo or busy:
        for slot in range(workers):
            if slot not in busy and todo:
                item = todo.pop()
                args = (responses[item], golds[item]) if kind == "math" else (responses[item], golds[item], limit)
                try:
                    _POOL[slot][1].send((kind, args))
                    busy[slot] = (item, time.monotonic() + deadline_after)
                except (OSError, ValueError):  # dead worker: replace it, item scores 0
                    _stop_worker(_POOL[slot])
                    _POOL[slot] = _start_worker()
        now = time.monotonic()
        ready = mp.connection.wait([_POOL[s][1] for s in busy], timeout=max(0.0, min(d for _, d in busy.values()) - now))
        for slot in list(busy):
            item, deadline = busy[slot]
            conn = _POOL[slot][1]
            if conn in ready:
                try:
                    results[item] = float(conn.recv())
                except (EOFError, OSError):
                    _stop_worker(_POOL[slot])
                    _POOL[slot] = _start_worker()
                del busy[slot]
            elif time.monotonic() > deadline:
                _stop_worker(_POOL[slot])
                _POOL[slot] = _start_worker()
                del busy[slot]
    return results


def math_reward(response, gold):
    """1.0 if the last boxed answer equals `gold` (string, rational, numeric, then symbolic), else 0.0."""
    return score_batch([response], [gold], "math", workers=1)[0]
