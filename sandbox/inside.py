"""The inside of the sandbox: everything that runs in the zygote, the driver and the program's processes.

It names only itself, its sibling files (values.py, objects.py, assertion.py) and the standard library
(test_sandbox.py checks this by reading the syntax trees), and it never opens a path that a program could have
made: the program's input, output and code travel as descriptors. It is also the zygote:
`python -I -S -B sandbox/inside.py zygote MODULES...`.
"""
import atexit
import builtins
import contextlib
import ctypes
import io
import fcntl
import gc
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
if not __package__:  # run by path (the zygote): its sibling files by name, and this file as `inside` for them
    sys.path.insert(0, HERE)
    sys.modules.setdefault("inside", sys.modules[__name__])
if __package__:  # the host's import of the package
    from .values import Codec, dumps, frame, read_frame, write_all
else:  # the zygote, which runs inside.py by path: its sibling files by name
    from values import Codec, dumps, frame, read_frame, write_all


libc = ctypes.CDLL(None, use_errno=True)
RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC, PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18


def check(ok, what):
    if ok != 0:
        raise OSError(ctypes.get_errno(), what)


def mount(src, dst, flags, fstype=None, data=None):
    enc = lambda s: s.encode() if s else None
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    check(libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {dst}")


def build_root(req):
    """A fresh root: a tmpfs with read-only binds of what Python needs (req binds), a minimal /dev, its own
    /proc, a size-limited tmpfs /work (/tmp and /dev/shm are it); then pivot_root, the host gone."""
    root = req["root"]
    mount(None, "/", REC | PRIVATE)
    mount("tmpfs", root, NOSUID | NODEV, "tmpfs", "size=8m,mode=755")
    os.makedirs(root + "/work")  # first: a Python installation may live below /tmp or /work (a venv there)
    mount("tmpfs", root + "/work", NOSUID | NODEV | NOEXEC, "tmpfs",  # nothing written there runs as a program
          f"size={req['disk']},nr_inodes={req['files']},mode=1777,uid={req['tests_uid']}")  # (run_assert)
    os.makedirs(root + "/tmp")
    mount(root + "/work", root + "/tmp", BIND)  # /tmp is /work (noexec too: a bind keeps its source's flags)
    empty = []
    for src, target in req["binds"]:  # real paths first (outer before inner), then the symlinks that lead to them
        dst = root + target
        if src is None:  # an empty folder over a site-packages folder: its binds (SITE_PACKAGES') follow
            os.makedirs(dst, exist_ok=True)
            mount("tmpfs", dst, NOSUID | NODEV, "tmpfs", "size=64k,mode=755")
            empty.append(dst)
            continue
        if os.path.islink(src):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if not os.path.lexists(dst):
                os.symlink(os.readlink(src), dst)
            continue
        if not os.path.exists(src):
            raise FileNotFoundError(f"{src}, which the program's root binds, is gone")  # never a file made there
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            open(dst, "w").close()
        mount(src, dst, BIND | REC)
        f = os.statvfs(dst).f_flag  # keep the flags a user namespace locks: nosuid, nodev, noexec, atime
        mount(None, dst,
              REMOUNT | BIND | RDONLY | (f & (NOSUID | NODEV | NOEXEC | 1024 | 2048)) | (1 << 21 if f & 4096 else 0))
    for dst in empty:
        mount(None, dst, REMOUNT | RDONLY | NOSUID | NODEV)
    os.makedirs(root + "/dev")
    mount("tmpfs", root + "/dev", NOSUID | NOEXEC, "tmpfs", "size=64k,mode=755")
    for name, (major, minor) in req["devices"].items():  # root-ns: the item's own nodes (FCNTL_SET_LOCKS), else binds
        if req["uid"]:
            os.mknod(f"{root}/dev/{name}", 0o20666, os.makedev(major, minor))  # S_IFCHR, rw for all
            os.chmod(f"{root}/dev/{name}", 0o666)  # as the host's, whatever the umask
        else:
            open(f"{root}/dev/{name}", "w").close()
            mount(f"/dev/{name}", f"{root}/dev/{name}", BIND)
    for name, target in (("shm", "/work"), ("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(root + "/proc")
    try:  # PROC_OPTIONS, or no /proc: never one with the host's counters
        mount("proc", root + "/proc", NOSUID | NODEV | NOEXEC, "proc", req["proc"])
    except OSError:
        os.rmdir(root + "/proc")
    os.makedirs(root + "/.old")
    mount(None, root, REMOUNT | RDONLY | NOSUID | NODEV)  # the root itself is read-only
    os.chdir(root)
    check(libc.syscall(req["seccomp"]["nr"]["pivot_root"], b".", b".old"), "pivot_root")
    check(libc.umount2(b"/.old", 2), "umount the host")  # MNT_DETACH
    os.chdir("/work")


def loopback_up():
    """The item's own loopback (its network namespace is otherwise empty): a program may talk to itself."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, 0x8914, struct.pack("16sh22x", b"lo", 0x1 | 0x8 | 0x40))  # SIOCSIFFLAGS: up, loopback, running


def confine(req):
    """The driver's own confinement, before any program: the fresh root and loopback, a session keyring of
    its own, not dumpable (no process of its uid may read its memory or descriptors), the program's file."""
    if req["namespaces"]:
        build_root(req)
        with contextlib.suppress(OSError):
            loopback_up()
    else:
        os.chdir(req["root"])
    libc.syscall(req["seccomp"]["nr"]["keyctl"], 1, None)  # KEYCTL_JOIN_SESSION_KEYRING: a new, empty one
    check(libc.prctl(4, 0, 0, 0, 0), "dumpable")
    sys.path.extend(req["site"])  # the interpreter's site-packages, for the program's imports
    fd = os.open("solution.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)  # for spawned children
    write_all(fd, req["program"].encode("utf-8", "surrogatepass"))
    os.close(fd)


# ---------------------------------------------------------------------------- 5. restrict: the program's processes
_FILTER = []  # the seccomp filter of the request, installed by every fork of the driver


class Header(ctypes.Structure):  # struct __user_cap_header_struct
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class Prog(ctypes.Structure):  # struct sock_fprog: `len` BPF instructions of 8 bytes at `filter`
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_filter(req):
    """The driver: the request's filter (the host's seccomp_program), made ready for its forks to install (drop)."""
    buf = ctypes.create_string_buffer(bytes.fromhex(req["seccomp"]["bpf"]))
    _FILTER[:] = [Prog(len(buf.raw) // 8, ctypes.cast(buf, ctypes.c_void_p)), buf]


def drop(req, uid, keep_fds, dumpable=True):
    """In a fork, before any program code: only the given descriptors, the resource limits, a fresh
    unprivileged uid (a root caller), no capability, no_new_privs, the seccomp filter."""
    low = 3
    for fd in sorted(set(keep_fds)) + [256]:  # every descriptor but these
        os.closerange(low, fd)
        low = fd + 1
    for name, value in req["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    for cap in range(64):  # an empty bounding set: no exec can grant a capability again
        if libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break
    if uid:  # the item's group is its program's uid: the tests' process is in it too (run_assert)
        os.setgroups([])
        os.setresgid(req["uid"], req["uid"], req["uid"])
        os.setresuid(uid, uid, uid)
    libc.capset(ctypes.byref(Header(0x20080522, 0)), ctypes.byref((ctypes.c_uint32 * 6)()))
    check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
    if not dumpable:  # no other process of this uid may read this one's memory
        check(libc.prctl(4, 0, 0, 0, 0), "dumpable")
    check(libc.prctl(22, 2, ctypes.byref(_FILTER[0]), 0, 0), "seccomp")  # PR_SET_SECCOMP, a filter


def quiet():
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def _quit(code=None):
    raise SystemExit(code)


def spawn(req, uid, keep, body, dumpable=True, group=False):
    """A fork that drops to `uid` and runs body() as the interpreter would run a script: exit() and quit()
    exist, integers of any size print, and its exit status is body()'s. `group`: in a process group of its
    own, which a per-test limit kills."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if group:
                os.setpgid(0, 0)
            quiet()
            drop(req, uid, keep, dumpable)
            builtins.exit = builtins.quit = _quit  # `site` adds them; the zygote runs without it
            getattr(sys, "set_int_max_str_digits", lambda n: None)(0)
            code = body()
        except BaseException:
            pass
        os._exit(code or 0)
    return pid


def new_module(req, name):
    """The program's module, registered as `name` and loaded from the code in the request (the file
    /work/solution.py holds the same, for multiprocessing's spawned children)."""
    module = types.ModuleType(name)
    module.__file__ = os.path.abspath("solution.py")
    module.__builtins__ = __builtins__
    sys.modules[name] = module
    return module


def load(req, name):
    module = new_module(req, name)
    exec(compile(req["program"], module.__file__, "exec"), module.__dict__)
    return module


def exit_code(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def run_main(req):
    """The program as `python solution.py < input` runs it: as __main__ (so multiprocessing finds its
    functions), stdin and stdout as the interpreter opens them; at the end, as the interpreter exits, it
    waits for non-daemon threads, runs atexit handlers and flushes the standard streams (sys.__stdout__ too
    after the program replaced sys.stdout) and any file it left open."""
    module = new_module(req, "__main__")
    sys.argv = ["solution.py"]
    sys.stdin = sys.__stdin__ = open(0, "r", closefd=False)
    sys.stdout = sys.__stdout__ = stdout = open(1, "w", closefd=False)
    try:
        exec(compile(req["program"], module.__file__, "exec"), module.__dict__)
        code = 0
    except SystemExit as e:
        code = exit_code(e.code)
    except BaseException:
        code = 1
    with contextlib.suppress(BaseException):
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in dict.fromkeys((sys.stdout, sys.stderr, stdout)):
        try:
            stream.flush()
        except BaseException:
            code = code or 120
    for f in gc.get_objects():  # the files it opened and never closed, which the interpreter's exit finalizes
        with contextlib.suppress(BaseException):
            if isinstance(f, io.IOBase) and not f.closed and f.writable():
                f.flush()
    return code


# ---------------------------------------------------------------------------- 6. the modes
def run_stdin(req, report):
    """Each input in a fresh fork: stdin a copy of the input (a memfd, which /dev/stdin reopens at its start
    as it would a file), stdout a pipe this driver drains as it fills. A test fails when its output passes the
    output limit, or when it runs past the request's per-test limit, which also ends the item (LiveCodeBench's
    early exit: no later test can change the verdict)."""
    per_test = req.get("test_timeout")
    for i, text in enumerate(req["inputs"]):
        stdin = os.memfd_create("stdin")
        write_all(stdin, text.encode("utf-8", "surrogatepass"))
        r, w = os.pipe()
        os.fchmod(w, 0o666)  # the program's uid may reopen /dev/stdout, as it may its own pipe

        def body():
            try:
                os.dup2(os.open(f"/proc/self/fd/{stdin}", os.O_RDONLY), 0)  # its own offset, read-only
            except OSError:
                os.lseek(stdin, 0, 0)
                os.dup2(stdin, 0)
            os.dup2(w, 1)
            for fd in (stdin, w):
                os.close(fd)
            return run_main(req)
        pid = spawn(req, req["uid"], (stdin, w), body, group=True)
        deadline = None if per_test is None else time.monotonic() + per_test
        os.close(w)
        out, late = drain(r, req["output"], deadline)
        status = None if late else exited(pid, deadline)
        if status is None:
            kill_program(req, pid)
        for fd in (r, stdin):
            os.close(fd)
        ok = status is not None and os.waitstatus_to_exitcode(status) == 0 and len(out) <= req["output"]
        send_result(report, i, ok, out)
        if status is None:
            return


def drain(fd, limit, deadline=None):
    """Everything `fd` gives until end of file, or until the deadline (a time.monotonic() value); the first
    limit + 1 bytes kept, the rest read and dropped. (bytes, whether the deadline passed)."""
    out = bytearray()
    while True:
        if deadline is not None and not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            return bytes(out), True
        part = os.read(fd, 1 << 16)
        if not part:
            return bytes(out), False
        out += part[:max(0, limit + 1 - len(out))]


def exited(pid, deadline):
    """The wait status of `pid` once it exits, or None if the deadline comes first."""
    if deadline is None:
        return os.waitpid(pid, 0)[1]
    pidfd = os.pidfd_open(pid)
    try:
        if not select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            return None
    finally:
        os.close(pidfd)
    return os.waitpid(pid, 0)[1]


def kill_program(req, pid):
    """Past a per-test limit: the program's processes (in the item's PID namespace, every process but this
    driver; without namespaces, its process group), reaped."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    if req["namespaces"]:
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)  # from PID 1 of the item's namespace: all the others
    os.waitpid(pid, 0)
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def send_result(report, i, ok, data):
    write_all(report, frame(dumps({"i": i, "ok": ok})) + frame(data))


def scalar(x):
    """A numpy scalar as the Python number it holds (LiveCodeBench compares a returned np.int64 with ==, so it
    passes there, under either comparison here); anything else is not JSON."""
    if type(x).__module__ == "numpy" and getattr(x, "shape", None) == () and hasattr(x, "item"):
        return x.item()
    raise TypeError(f"{type(x).__name__} is not JSON")


def run_call(req, report):
    """The program loaded once as module `solution` (within the per-test limit when there is one); each call's
    return value as JSON, or as the channel's values (`loads`; an error, or a value neither holds, as nothing: a
    mismatch), in a frame on a pipe
    this driver reads with the output limit and the per-test limit; a call past it ends the item."""
    r, w = os.pipe()
    per_test = req.get("test_timeout")

    def body():
        pid = os.getpid()
        module = load(req, "solution")
        if os.getpid() != pid:  # a fork the program made that ran on past its own code: never the one that answers
            return 0
        g, codec = module.__dict__, Codec(None, tests=False, limit=req["output"])
        f = getattr(g["Solution"](), req["fn_name"]) if "Solution" in g else g[req["fn_name"]]
        write_all(w, frame(b"loaded"))
        for args in req["inputs"]:
            try:
                value = f(*args)
                try:  # JSON as LiveCodeBench's harness reads it; else (a Fraction, a set) as the channel's values
                    data = b"J" + json.dumps(value, separators=(",", ":"), default=scalar).encode()
                except (TypeError, ValueError):
                    data = b"V" + dumps(codec.pack(v=value))
            except BaseException:
                data = b""
            write_all(w, frame(data))
        return 0
    pid = spawn(req, req["uid"], (w,), body, group=True)
    os.close(w)
    done = False
    for i in range(-1, len(req["inputs"])):  # -1: the program loaded
        try:
            data = read_frame(within(r, None if per_test is None else time.monotonic() + per_test), req["output"])
        except TimeoutError:
            send_result(report, max(i, 0), False, b"")
            break
        except (EOFError, ValueError):
            break
        if i >= 0:
            send_result(report, i, bool(data), data)
    else:
        done = True
    if done:  # every call answered: the process ends by itself (a process it left, holding the pipe, is no matter)
        os.waitpid(pid, 0)
    else:
        kill_program(req, pid)
    os.close(r)


def within(fd, deadline):
    """os.read on `fd` for read_frame, raising TimeoutError past the deadline."""
    def read(n):
        if deadline is not None and not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            raise TimeoutError()
        return os.read(fd, n)
    return read


# ---------------------------------------------------------------------------- 7. driver, item, zygote
def driver():
    """The item's PID 1: reads the request, confines itself, says "confined", runs the mode, reports."""
    req = json.loads(read_frame(lambda n: os.read(0, n), 1 << 40))
    try:
        install_filter(req)  # once, before the forks that install it
        confine(req)
    except Exception as e:
        print(f"sandbox: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        os._exit(97)
    report = os.dup(1)
    write_all(report, frame(dumps({"confined": True})))
    stdin = os.dup(0)  # the rest of the request (assert mode's secret) stays readable as fd 0 for run_assert
    quiet()
    os.dup2(stdin, 0)
    os.close(stdin)
    end = {"end": True}
    if req["mode"] == "stdin":
        run_stdin(req, report)
    elif req["mode"] == "call":
        run_call(req, report)
    else:
        end["verdict"] = sys.modules["assertion"].run_assert(req, report)  # loaded by the zygote (below)
    write_all(report, frame(dumps(end)))
    os._exit(0)


NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET = 0x20000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000


def enter_namespaces(how):
    """Fresh mount, UTS, IPC, network and PID namespaces (the PID one for the next fork); an unprivileged
    caller's inside a user namespace whose root is the caller."""
    if how == "root-ns":
        check(libc.unshare(NEWNS | NEWUTS | NEWIPC | NEWPID | NEWNET), "unshare")
    elif how == "user-ns":
        uid, gid = os.getuid(), os.getgid()
        check(libc.unshare(NEWUSER | NEWNS | NEWUTS | NEWIPC | NEWPID | NEWNET), "unshare")
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)


def item(header):
    """A fork of the zygote for one item: its own session, the item's cgroups, fresh namespaces, and the
    driver, forked into them (PID 1), which dies with it (and it with the zygote)."""
    os.setsid()
    libc.prctl(1, 9)  # PR_SET_PDEATHSIG: SIGKILL
    for path in header["cgroups"]:
        with open(path + "/cgroup.procs", "w") as f:
            f.write("0")  # this process and all it starts, whatever its pid namespace or session
    enter_namespaces(header["mode"])
    pid = os.fork()
    if pid == 0:
        libc.prctl(1, 9)
        driver()
    for fd in (0, 1, 2):
        os.close(fd)
    os.waitpid(pid, 0)
    os._exit(0)


def zygote(modules):
    """Serves one caller, one item at a time: forks `item` for a header and three descriptors (request,
    report, log), tells the caller when it ended, and kills it when the caller asks. It never sees a request."""
    for m in modules:
        __import__(m)
    gc.freeze()  # what is loaded now is never collected: the forks' collections skip it and leave its pages shared
    sock = socket.socket(fileno=os.dup(0))
    quiet()
    libc.prctl(1, 9)  # PR_SET_PDEATHSIG: SIGKILL with the caller
    libc.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: an item's orphans become this process's children
    sock.send(b"ready")
    while True:
        try:
            header, fds, _, _ = socket.recv_fds(sock, 65536, 3)
        except OSError:
            return
        if not header:
            return  # the caller is gone
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            continue  # a late kill request for an item that had already ended
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                for i, fd in enumerate(fds):
                    os.dup2(fd, i)
                    os.close(fd)
                item(json.loads(header))
            except BaseException as e:
                print(f"sandbox: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            finally:
                os._exit(1)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        if sock in select.select([sock, pidfd], [], [])[0]:  # a kill request, or the caller gone
            with contextlib.suppress(OSError):
                os.killpg(pid, 9)  # the item's session: the driver, and with it its PID namespace
        os.close(pidfd)
        os.waitpid(pid, 0)
        while True:  # processes that left the item's session, orphaned to this subreaper: killed and reaped
            with open(f"/proc/self/task/{os.getpid()}/children") as f:
                left = [int(p) for p in f.read().split()]
            if not left:
                break
            for p in left:
                with contextlib.suppress(OSError):
                    os.kill(p, 9)
            for p in left:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(p, 0)
        try:
            sock.send(b"ended")
        except OSError:
            return


def probe(how):
    pid = os.fork()
    if pid == 0:
        try:
            enter_namespaces(how)
            os._exit(0 if os.fork() == 0 else os.waitstatus_to_exitcode(os.wait()[1]))
        finally:
            os._exit(1)
    os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))


if __name__ == "__main__":
    import assertion  # noqa: F401  (before any fork: the item's root holds no file of ours)
    # An item imports only from folders there now, which its root binds read-only: never from ours (below /work or
    # /tmp the program may make it), nor from one not there yet (the standard library's zip).
    sys.path[:] = [p for p in sys.path if p != HERE and os.path.isdir(p)]
    {"zygote": lambda: zygote(sys.argv[2:]), "probe": lambda: probe(sys.argv[2])}[sys.argv[1]]()
