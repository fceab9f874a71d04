"""Assert mode: the program's process and the tests', and the channel between them (inside: names only the
standard library).

THE RULE's two halves (sandbox/__init__.py states them; docs/security.md derives each feature): what the tests own
is decided on the tests' side; what the program owns behaves exactly as the program defines it (objects.py).
"""
import ast
import builtins
import collections
import contextlib
import copy
import importlib
import io
import itertools
import json
import os
import random
import re
import signal
import socket
import stat
import symtable
import sys
import threading
from contextlib import redirect_stderr, redirect_stdout

if __package__:  # the host's import of the package
    from .inside import drain, load, read_frame, spawn, write_all
    from .objects import ALWAYS, FORWARD, OPS, TESTS_ANSWER, Ref, StandIns
    from .values import ELEMENT, LOADS, ChannelBroken, Codec, dumps, exception_named, frame
else:  # the zygote, which runs inside.py by path: its sibling files by name
    from inside import drain, load, read_frame, spawn, write_all
    from objects import ALWAYS, FORWARD, OPS, TESTS_ANSWER, Ref, StandIns
    from values import ELEMENT, LOADS, ChannelBroken, Codec, dumps, exception_named, frame


def run_assert(req, report):
    """THE RULE's two processes: the program's, forked before the tests and the nonce were read, loads the program
    and computes what the tests ask; the tests' (not dumpable, under a uid of its own) runs the setup's own copy
    and the tests, and reports the nonce only when they ran to their end."""
    a, b = socket.socketpair()

    def program():
        os.umask(0o002)  # what it writes the tests' process may change and remove, as in one process (shared)
        pid, folder = os.getpid(), os.getcwd()
        module = load(req, "solution")
        if os.getpid() != pid:  # a fork the program made that ran on past its own code: never the channel's
            return 0
        ch = Channel(b, tests=False, limit=req["message"], output=req["output"])
        ch.module, ch.folder = module.__dict__, folder
        shared(folder)
        ch.send({"names": [k for k in ch.module if not k.startswith("__")]})
        ch.serve_forever()
        return 0
    server = spawn(req, req["uid"], (b.fileno(),), program)
    secret = json.loads(read_frame(lambda n: os.read(0, n), 1 << 30))  # only now: the program never held it
    r, w = os.pipe()

    def tests():
        os.umask(0o022)  # what they write is theirs: the program reads it, and writes it once handed (hand_over)
        if run_tests(Channel(a, tests=True, limit=req["message"]), secret, req):
            write_all(w, (secret["nonce"] + " ok").encode())
        return 0
    tester = spawn(req, req["tests_uid"], (a.fileno(), w), tests, dumpable=False)  # the program cannot signal it
    secret.clear()
    for s in (a, b):
        s.close()
    os.close(w)
    verdict = drain(r, 1024)[0]
    os.waitpid(tester, 0)
    os.kill(server, signal.SIGKILL)
    os.waitpid(server, 0)
    return verdict.decode("utf-8", "replace")


def run_tests(ch, secret, req):
    """The tests' side: the setup run here (its own copy: every name it binds is the tests', the entry point
    excepted), then the tests, their unbound names resolved by TestsNames. True only when they ran to their end:
    nothing raised, the channel stayed whole, nothing raised here while answering the program (Channel.serve), and
    no unittest test was skipped, failed or stopped."""
    names = ch.recv().get("names")
    if type(names) is not list or not all(type(k) is str for k in names):
        raise ch.broke("no names")
    setup, tests, entry = runnable_alone(secret.get("setup") or ""), secret["assert"], req.get("entry_point")
    theirs = bound_names(tests)
    ours = set(names) - bound_names(setup) - theirs | ({entry} & set(names))
    ch.ns = ns = {"__name__": "tests"}
    ns["__builtins__"] = TestsNames(ch, entry, ours, source_imports(req["program"], req["packages"]))
    exec(compile(setup, "setup.py", "exec"), ns)
    ch.handed = {k for k, v in ns.items() if isinstance(v, type) and v.__module__ == "tests"}  # the prompt's classes
    ns.pop(entry, None)  # the program's, through TestsNames (a prompt binds it to a bare signature)
    stubs = bound_names(tests, imports=False) - defined_names(tests)  # not an import, not a def or class of theirs
    ch.share(tests, stubs & set(names) - {entry}, req["packages"])
    unittest_run = watch_unittest() if "unittest" in setup + tests else {}
    exec(compile(tests, "tests.py", "exec"), ns)
    return not (ch.broken or ch.failed or unittest_run.get("incomplete"))


class TestsNames(dict):
    """The tests' builtins (exec's __builtins__, read through __getitem__ as it is not a plain dict). A name the tests
    use and do not bind resolves here, on their side, whatever the program binds and whenever, in this order: the
    spec's entry point, the program's; the interpreter's builtin (read at each use: a patch of the tests' holds); a
    module the program's source imports under that name, or the standard library's of that name, imported here; a
    name the program's module held when it loaded that neither the setup nor the tests bind (program_value).
    Anything else is a NameError."""

    def __init__(self, ch, entry, program, imports):
        super().__init__(vars(builtins))
        self.ch, self.entry, self.program, self.imports, self.modules = ch, entry, program, imports, {}

    def __getitem__(self, name):
        if name == self.entry and name in self.program:
            return self.program_value(name)
        value = vars(builtins).get(name, TestsNames)
        if value is not TestsNames:
            return value
        imported = self.imports.get(name) or ((name, None) if importable(name, ()) else None)
        if imported and name not in self.modules:
            with contextlib.suppress(Exception):
                module = importlib.import_module(imported[0])
                self.modules[name] = getattr(module, imported[1]) if imported[1] else module
        if imported and name in self.modules:
            return self.modules[name]
        if not imported and name in self.program:
            return self.program_value(name)
        raise KeyError(name)

    def program_value(self, name):
        """A name of the program's module, asked of its process: data as it is now, an object as a handle, asked
        once (the program's objects are one object each)."""
        if name in self.modules:
            return self.modules[name]
        value = self.ch.request("global", name)
        if self.ch.stood_for(value) is not None:
            self.modules[name] = value
        return value


def source_imports(program, packages):
    """{name: (module, attribute or None)}: what the program's source imports at its top level (in if, try and
    with blocks too) from the standard library or `packages`, the last import of a name winning; read from its
    syntax tree, never from what its process binds. A module as written (`import numpy as np`); an attribute only
    under its own name (`from datetime import datetime`: an alias is the program's choice of what the tests' name
    means, never followed); a standard-library module's name only for that module itself."""
    found = {}

    def visit(body):
        for node in body:
            if isinstance(node, ast.Import):
                found.update({a.asname or a.name.split(".")[0]: (a.name if a.asname else a.name.split(".")[0], None)
                              for a in node.names})
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found.update({a.asname or a.name: None if a.asname else (node.module, a.name) for a in node.names
                              if a.name != "*"})
            elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(node, field, None) or [])
    with contextlib.suppress(SyntaxError, ValueError, RecursionError):
        visit(ast.parse(program).body)
    return {k: v for k, v in found.items() if v and importable(v[0], packages) and not (
        k in sys.stdlib_module_names and v[1] is None and v[0] != k)}


def importable(module, packages):
    """Whether the tests' side imports `module` itself: the standard library's or one of `packages`."""
    top = (module or "").split(".")[0]
    return (top in sys.stdlib_module_names or top in packages) and top[:1] != "_" and top not in ("this", "antigravity")


def bound_names(source, imports=True):
    """The names a source binds at its top level, or as a global in a function: the tests' own, never the
    program's, whether or not bound yet when they are used. imports=False: those it assigns (a def, a class, an
    assignment), not those only an import binds (the tests' `from datetime import datetime` stubs nothing of the
    program's, whose own import of that name stays its own)."""
    try:
        tables = [symtable.symtable(source, "tests", "exec")]
    except (SyntaxError, ValueError, RecursionError):
        return set()
    top, names = tables[0], set()
    while tables:
        t = tables.pop()
        tables += t.get_children()
        names |= {s.get_name() for s in t.get_symbols()
                  if (s.is_assigned() or imports and s.is_imported()) and (t is top or s.is_declared_global())}
    return names


def defined_names(source):
    """The names the tests' def and class statements bind at their top level (in if, try and with blocks too): their
    own helpers, never handed to the program, whatever it names its own (a stub is an assignment: share)."""
    found = set()

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(node, field, None) or [])
    with contextlib.suppress(SyntaxError, ValueError, RecursionError):
        visit(ast.parse(source).body)
    return found


def runnable_alone(setup):
    """The setup as the tests' side runs it: as written, or, when it ends in a bare signature that the
    program's code completes (a HumanEval prompt without its docstring), with a body of `pass`."""
    try:
        compile(setup, "setup.py", "exec")
        return setup
    except SyntaxError:
        return setup.rstrip() + "\n    pass\n"


def watch_unittest():
    """Marks any unittest run in the tests' process that skipped, failed, errored or stopped a test: such a run
    did not run every test to its end, whatever it returns."""
    import unittest.result as result

    seen = {"incomplete": False}

    def marking(method, when=lambda *args: True):
        def marked(self, *args):
            seen["incomplete"] = seen["incomplete"] or bool(when(*args))
            return method(self, *args)
        return marked
    for name in ("addError", "addFailure", "addSkip", "addExpectedFailure", "addUnexpectedSuccess", "stop"):
        setattr(result.TestResult, name, marking(getattr(result.TestResult, name)))
    result.TestResult.addSubTest = marking(result.TestResult.addSubTest, lambda test, sub, err: err is not None)
    return seen


def raised_by_tests(e):
    """Whether the tests' own code raised `e` (an assert, or any exception on its way out of a frame of their source
    or the setup's); else it is what answering raised (an attribute that is not there, a mock's side effect)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename not in ("tests.py", "setup.py"):
        tb = tb.tb_next
    return isinstance(e, AssertionError) or tb is not None


def shared(folder):
    """The program's side, after its code ran: the files and folders it made in its work folder, writable by the
    item's group, as its umask makes them, whatever mode their writer chose (sqlite's 0644): the tests' process
    changes and removes them as one process would."""
    for d, ds, fs in itertools.islice(os.walk(folder), 200):
        for p in [os.path.join(d, n) for n in ds + fs][:2000]:
            with contextlib.suppress(OSError):
                st = os.lstat(p)
                if st.st_uid == os.geteuid() and not st.st_mode & 0o020 and (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(
                        st.st_mode)):
                    os.chmod(p, st.st_mode | 0o020 | (0o010 if stat.S_ISDIR(st.st_mode) else 0))


MUTABLE = (list, dict, set, bytearray, collections.deque, collections.OrderedDict, collections.Counter,
           collections.defaultdict, ELEMENT)


def in_place(target, new):
    """A container given another's contents, its identity kept (whoever holds it sees them), when both are of one
    type (MUTABLE)."""
    if type(target) is not type(new) or type(target) not in MUTABLE or target is new:
        return
    if type(target) in (list, bytearray):
        target[:] = new
    elif type(target) is collections.deque:
        target.clear()
        target.extend(new)
    elif type(target) is ELEMENT:  # (its attributes' dict kept too; its children are the new ones)
        target.tag, target.text, target.tail, target[:] = new.tag, new.text, new.tail, list(new)
        in_place(target.attrib, dict(new.attrib))
    else:
        target.clear()
        target.update(new)


def hand_over(values, depth=0):
    """The tests' side: a path the tests name in a call of the program (or an attribute they set) is handed over,
    as one process shares it: their file or folder there (a folder's files too), or the folder of a path not there
    yet, gets for the program's uid what their owner has (a read-only file stays read-only), and their folders on
    the way are passable. Anything else the tests made stays theirs: the program reads it, and cannot change it."""
    for v in values:
        if isinstance(v, (list, tuple)) and depth < 2:
            hand_over(v, depth + 1)
        path = os.fspath(v) if isinstance(v, (str, os.PathLike)) and type(v).__module__ in ("builtins", "pathlib") \
            else None
        if type(path) is not str or not 0 < len(path) < 4096 or "\0" in path or not os.path.isdir(
                os.path.dirname(os.path.abspath(path))):
            continue
        path = os.path.abspath(path)
        found = [path] + [os.path.join(d, n) for d, ds, fs in itertools.islice(os.walk(path), 100) for n in ds + fs]
        if not os.path.exists(path):
            found = [os.path.dirname(path)]
        ways = [os.path.dirname(path)]
        while ways[-1] != os.path.dirname(ways[-1]):
            ways.append(os.path.dirname(ways[-1]))
        for p, whole in [(p, True) for p in found[:1000]] + [(p, False) for p in ways]:
            with contextlib.suppress(OSError):
                st = os.lstat(p)
                own = st.st_mode & (0o700 if whole else 0o100)  # what the tests may do there, the program may
                if st.st_uid == os.geteuid() and (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                    os.chmod(p, st.st_mode | own >> 3 | own >> 6)


def ending(op, name):
    """Whether a "stop" answers the request: only the end of an iteration that the asking side began, by next() on
    an iterator or an await of an async iterator's step, never what a call or an attribute's name says."""
    return op == "op" and list(name) in (["next"], ["__next__"], ["__await__"])


def captured():
    """Where a call's output goes on the program's side: text and bytes (sys.stdout.buffer), in their order."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)


def printed_by(stream):
    return stream.buffer.getvalue().decode("utf-8", "replace")


LOOP = []  # the program's side: one event loop for every await of the tests (an async generator lives across them)


def run_to_end(awaitable):
    """The program's side of an `await` in the tests: its awaitable run to its end in the program's event loop."""
    import asyncio

    async def main():
        return await awaitable
    LOOP[:] = LOOP or [asyncio.new_event_loop()]
    return LOOP[0].run_until_complete(main())


class Channel(StandIns, Codec):
    """One side of the assert channel under THE RULE; `tests` says which: a Codec whose messages go over a socket,
    with requests, what the tests share with the program, and containers kept in step."""

    def __init__(self, sock, tests, limit, output=1 << 20):
        super().__init__(sock, tests, limit, output)
        self.sendall, self.recv_bytes = sock.sendall, sock.recv  # bound now: the tests' patches never reach them
        self.lock = threading.RLock()  # one exchange at a time, whatever the threads (tests call from a pool)
        self.mirrors, self.mirrored = {}, {}  # the tests' side: containers of the program's (mirror); its side
        self.sharing, self.patched = None, {}  # what the tests share; the program's side: what patches hid
        self.folder = None  # the program's side in an item: its work folder (shared)

    # ------------------------------------------------------------------ messages
    def send(self, msg):
        with self.lock:
            try:
                self.sendall(frame(dumps(msg)))
            except OSError:
                raise (self.broke("the program's process is gone") if self.tests else EOFError()) from None

    def recv(self):
        """The next message: a JSON object (from the program, of at most `limit` bytes)."""
        try:
            msg = LOADS(read_frame(self.recv_bytes, self.limit if self.tests else 1 << 40).decode())
            if type(msg) is not dict:
                raise ValueError("not a message")
            return msg
        except (EOFError, OSError, ValueError, RecursionError, MemoryError) as e:
            raise (self.broke(f"{type(e).__name__}: {e}"[:200]) if self.tests else EOFError()) from None

    def request(self, op, *args, **kw):
        """Ask the other side and wait for its answer, answering meanwhile what it asks back (serve): its value, its
        exception, or the end of an iterator."""
        with self.lock:
            made = self.made  # (a request made while a message is decoded, for a hash, keeps its records)
            try:
                if self.tests and op in ("call", "setattr"):
                    hand_over([*args, *kw.values()])
                late = self.sharing and (lambda: {"ctx": self.outgoing()})  # after the arguments: hand over first
                mirror = self.changed_mirrors() if self.tests else None  # (before this message's table is begun)
                self.send(self.pack(op=op, a=list(args), kw=kw, mirror=mirror, late=late))
                while "op" in (msg := self.recv()):
                    self.serve(msg)
                if self.tests and "over" in msg:
                    raise self.broke("a call of the program printed past the output limit")  # never a silent cut
                self.unpack(msg)
                for stream, text in (("stdout", msg.get("out")), ("stderr", msg.get("errout"))):
                    if self.tests and type(text) is str and text:
                        getattr(sys, stream).write(text)  # what the call printed, where the tests print now
                if "stop" in msg and ending(op, args[1:2]):  # only the end of an iteration asked for here
                    raise StopIteration if args[1] != "__await__" else StopAsyncIteration
                if "err" in msg:
                    raise self.exception(self.dec(msg["err"]))
                if "ok" not in msg:
                    raise self.broke("an answer without a value") if self.tests else EOFError()
                for i, v in self.dec(msg["back"]) if self.tests and "back" in msg else ():  # handed over: changed
                    if type(i) is int and 0 < i < len(args):
                        in_place(args[i], v)
                for h, v in self.dec(msg["fresh"]) if self.tests and "fresh" in msg else ():  # mirrored: changed
                    if h in self.mirrors:
                        in_place(self.mirrors[h][0], v)
                        self.mirrors[h][1] = self.pack(v=self.mirrors[h][0])
                value = self.dec(msg["ok"])
                return self.mirror(msg["own"], value) if self.tests and type(msg.get("own")) is int else value
            finally:
                self.made = made

    def serve_forever(self):
        """The program's side: answer the tests' requests until they are done."""
        while True:
            with self.lock:  # (a thread of the program that asks the tests waits while the next request is read)
                try:
                    msg = self.recv()
                except EOFError:
                    return
            self.serve(msg)

    def serve(self, msg):
        """Answer one request of the other side. The tests' side answers only TESTS_ANSWER, on objects it lent, and
        an exception the tests' code raises meanwhile fails the tests (raised_by_tests: the program never decides
        whether one counts); the program's side answers any use of its objects and sends what the call printed
        along (up to the limit)."""
        out, errout, op, args, extra = captured(), captured(), None, [], {}
        try:
            with self.lock:
                self.unpack(msg)
                op, args, kw = msg.get("op"), self.dec(msg.get("a")), self.dec(msg.get("kw"))
                malformed = type(op) is not str or type(args) is not list or not args or type(kw) is not dict
                allowed, h = TESTS_ANSWER.get(op, ()), None if malformed else self.numbers.get(id(args[0]))
                if self.tests and (malformed or h is None or self.lent[h] is not args[0] or (
                        allowed is not None and (len(args) < 2 or args[1] not in allowed))):
                    raise self.broke(f"a request the tests' side does not answer: {op!r}"[:200])
                if malformed:
                    raise ValueError("a malformed request")
                if not self.tests and "ctx" in msg:
                    self.apply(self.dec(msg["ctx"]))
                for h, v in self.dec(msg["mirror"]) if not self.tests and "mirror" in msg else ():
                    in_place(self.lent[h], v)  # the tests' changes to a container of the program's (mirror)
                    self.mirrored[h] = self.pack(v=self.lent[h])
            if self.tests:  # (the tests' code prints where the tests print)
                result = self.answer(op, args[0], args[1:], kw)
            else:
                with redirect_stdout(out), redirect_stderr(errout):
                    result = self.answer(op, args[0], args[1:], kw)
            reply = ("ok", result)
            if not self.tests:
                own = op == "getattr" and type(result) in MUTABLE and len(self.mirrored) < 64 and self.lend(result)["h"]
                extra = {"back": self.changed_arguments(msg.get("a"), args), "own": own, "fresh": self.fresh(own)}
        except ChannelBroken:
            raise
        except BaseException as e:
            stop = isinstance(e, StopAsyncIteration if args[1:2] == ["__await__"] else StopIteration) and ending(
                op, args[1:2])
            self.failed = self.failed or (self.tests and not stop and raised_by_tests(e))
            reply = ("stop", True) if stop else ("err", self.error(e))
        printed = (printed_by(out), printed_by(errout)) if not self.tests else ("", "")
        if self.folder:
            shared(self.folder)
        with self.lock:
            if len(printed[0]) + len(printed[1]) > self.output:
                msg = {"over": True}  # the tests fail: output is never cut short without a sign
            else:
                msg = dict(self.reply(*reply, **extra), **dict(zip(("out", "errout"), printed)) if any(printed) else {})
            self.send(msg)

    def answer(self, op, obj, rest, kw):
        """What one side computes for the other: the tests' side, TESTS_ANSWER on an object it lent; the program's
        side any use of its objects, by name of its module for "global", a special method as Python calls it (on
        the class, so an instance's own attribute of that name is not it: `len(x)` is `type(x).__len__(x)`)."""
        if op == "call":
            return obj(*rest, **kw)
        if op == "global":
            return self.module[obj]
        if op in ("getattr", "setattr", "delattr"):
            return getattr(builtins, op)(obj, *rest[:1 if op != "setattr" else 2])
        if self.tests or rest[0] not in FORWARD | set(ALWAYS):
            return OPS[rest[0]](obj, *rest[1:])
        name, args = rest[0], rest[1:]
        if name in ("__exit__", "__aexit__"):  # the tests' exception told by its class's name (the tests' own)
            args = exception_named(args[0] if args else None)
        if name in ("__copy__", "__deepcopy__"):
            return (copy.copy if name == "__copy__" else copy.deepcopy)(obj)
        return run_to_end(obj) if name == "__await__" else getattr(type(obj), name)(obj, *args)

    def reply(self, kind, value, back=None, own=None, fresh=None):
        """An answer: the program's side sends at most half the message limit as data; past it, a value is lent
        whole and an error crosses by its class and text."""
        self.budget = None if self.tests else self.limit // 2
        try:
            return self.pack(**{kind: value}, back=back, own=own if type(own) is int else None, fresh=fresh)
        except Exception:
            self.budget = None
            return {"ok": self.handle(value)} if kind == "ok" else self.pack(err={k: value[k] for k in ("type", "msg")})
        finally:
            self.budget = None

    # ------------------------------------------------------------------ what the tests share with the program
    def share(self, source, names, packages):
        """The tests' side, before the tests run: what is copied to the program's process before each request in
        which it changed, and never read back: the tests' bindings of the program's `names` to a callable (a helper
        stubbed by assignment, as a handle the program may call; their data, generators and other objects never),
        their patches (unittest.mock's, or by assignment) of builtins, sys.stdin and sys.argv and of the
        modules their source names (imported here now, as they were), random's state (when they name random), and
        the names of the classes they handed over (whose instances cross as records)."""
        modules = {"builtins"}
        for token in set(re.findall(r"[A-Za-z_][\w.]*", source)):
            for i in range(1, token.count(".") + 2):
                module = ".".join(token.split(".")[:i])
                if importable(module, packages):
                    with contextlib.suppress(Exception):
                        modules.add(importlib.import_module(module).__name__)
        seeded = [0]  # random's state goes again after the tests seed it again, even to the state it had
        for name in ("seed", "setstate") if "random" in modules else ():
            setattr(random, name, lambda *a, _f=getattr(random, name), **k: (seeded.append(1), _f(*a, **k))[1])
        watched = [(vars(sys.modules[m]), m) for m in sorted(modules - {"sys"})]
        self.sharing = {"names": names, "base": {k: self.ns.get(k) for k in names}, "seeded": seeded,
                        "unpatched": {(m, k): id(v) for d, m in watched for k, v in d.items()} | {
                            ("sys", k): id(getattr(sys, k)) for k in ("stdin", "argv")},
                        "watched": watched, "random": "random" in modules, "sent": {}}
        self.sharing["sent"] = dict(self.outgoing_marks()[1], classes=None)  # (the program learns them first)

    def outgoing_marks(self):
        """What the tests share now (share), and the marks by which a change is seen: identity, and for random's
        state its value and the seeds since."""
        s, ns = self.sharing, self.ns
        patch = [[m, k, v] for d, m in s["watched"] for k, v in list(d.items()) if s["unpatched"].get((m, k)) != id(v)
                 and not k.startswith("_")] + [["sys", k, getattr(sys, k)] for k in ("stdin", "argv")
                                               if s["unpatched"][("sys", k)] != id(getattr(sys, k))]
        now = {"names": {k: ns[k] for k in s["names"] if k in ns and ns[k] is not s["base"][k] and callable(ns[k])},
               "patch": patch,
               "classes": sorted(self.handed)}
        if s["random"]:
            now["random"] = random.getstate()
        return now, dict(now, names={k: id(v) for k, v in now["names"].items()}, patch=[
            (m, k, id(v)) for m, k, v in patch], random=s["random"] and (now.get("random"), len(s["seeded"])))

    def outgoing(self):
        """The tests' side: what changed of what they share with the program, as a value, or None."""
        now, marks = self.outgoing_marks()
        ctx = {k: v for k, v in now.items() if marks[k] != self.sharing["sent"].get(k)}
        self.sharing["sent"] = marks
        return ctx or None

    def apply(self, ctx):
        """The program's side: the tests' copies (share), set before its code runs; what a patch hid comes back when
        the tests undo it."""
        self.module.update(ctx.get("names", {}))
        self.shared = set(ctx.get("classes", self.shared))
        if "random" in ctx:
            random.setstate(ctx["random"])
        if "patch" not in ctx:
            return
        want = {(m, k): v for m, k, v in ctx["patch"]}
        for (m, k), was in [p for p in self.patched.items() if p[0] not in want]:
            with contextlib.suppress(Exception):
                setattr(sys.modules[m], k, was) if was is not Ref else delattr(sys.modules[m], k)
            del self.patched[(m, k)]
        for (m, k), value in want.items():
            with contextlib.suppress(Exception):
                module = sys.modules.get(m) or importlib.import_module(m)
                self.patched.setdefault((m, k), getattr(module, k, Ref))
                setattr(module, k, value)

    def changed_arguments(self, sent, args):
        """The program's side, after a computation: the containers the tests passed (handed over) that it changed
        in place, by position, as [position, container]: the tests' side gives its own the new contents."""
        sent = sent.get("list") if type(sent) is dict else None
        changed = [[i, x] for i, x in enumerate(args) if i and type(x) in MUTABLE and type(sent) is list
                   and i < len(sent) and self.pack(v=x) != {"v": sent[i]}]
        return changed or None

    def mirror(self, h, value):
        """The tests' side: a container read through an attribute of the program's object (number `h`) is one
        object here, given the program's contents when read and after each computation that changed them (fresh);
        what the tests change in it reaches the program before its next computation (changed_mirrors)."""
        m = self.mirrors.setdefault(h, [value, None])
        if type(m[0]) is type(value):
            in_place(m[0], value)
        else:  # (another container at that number: the first was gone)
            m[0] = value
        m[1] = self.pack(v=m[0])
        return m[0]

    def fresh(self, own):
        """The program's side, after a computation: the containers the tests mirror that changed here since they
        were last sent, as [number, container] (and `own`, read now, as sent)."""
        out = []
        for h, sent in self.mirrored.items():
            now = self.pack(v=self.lent[h])
            if now != sent:
                out.append([h, self.lent[h]])
                self.mirrored[h] = now
        if type(own) is int:
            self.mirrored[own] = self.pack(v=self.lent[own])
        return out or None

    def changed_mirrors(self):
        out = []
        for h, m in self.mirrors.items():
            now = self.pack(v=m[0])
            if now != m[1]:
                out.append([h, m[0]])
                m[1] = now
        return out or None

