"""The code sandbox of rewards.py: runs a model-written program against tests' inputs and reports what it did.

rewards.py imports this file only for code items (as delta.py imports engines.py only for its engines). It is
stdlib only, and it is also the zygote: `python -I -S -B sandbox.py zygote MODULES...`. docs/security.md lists
what it guarantees and the test behind each line.

    run(program, request, timeout, secret=None, sink=None, preload=()) -> report dict, or None (overran)
    SandboxError                 the sandbox itself failed before the program ran (never a verdict)
    mode()                       'root-ns', 'user-ns' or 'none': how items are isolated here

The processes. Each calling thread has a zygote, a fresh interpreter outside any namespace that has loaded
this file and the harness's modules. For an item it forks a process that takes its own session, joins the
item's cgroups (processes, memory, CPU), enters fresh mount, PID, network, IPC and UTS namespaces and forks
the driver, PID 1 there. The zygote never reads a request; it kills the item's session at the caller's
deadline and kills whatever the item left (it is their subreaper). The driver builds the program's root,
reports "confined", and only then forks the program's processes, which drop to a fresh unprivileged uid
with no capability, no_new_privs, resource limits and a seccomp filter before any program code runs.

The protocol (frames: an 8-byte big-endian length, then the bytes; JSON where it is a message):
    host -> driver (fd 0)    the request, then the secret (assert mode: the tests and a nonce; {} otherwise)
    driver -> host (fd 1)    {"confined": true}; per result {"i", "ok"} then the result's bytes; {"end": ...}
    driver log (fd 2)        a line of text when confinement failed (exit code 97)
  stdin:  each input in a fresh fork, as `python solution.py < input`; its stdout is the result.
  call:   the program loaded once as module `solution`; each call's JSON value is a result.
  assert: the program's process serves its objects over a socket to a second process (another uid, not
          dumpable), forked only after it, that runs the tests against handles and, if every assert
          passed, reports the nonce. The program never holds the tests or the nonce.
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
    import time
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
# What the program's root holds besides the Python installation (its stdlib, site-packages, executable and
# libpython, found by binds()): the loader, the shared libraries, the loader's cache, the time zones.
SYSTEM_BINDS = ("/lib/{arch}", "/usr/lib/{arch}", "/lib64", "/usr/lib64", "/etc/ld.so.cache", "/etc/localtime",
                "/usr/share/zoneinfo")
SECCOMP_DENY = (  # EPERM: namespaces, keys, tracing, mounts, eBPF, io_uring, file locks and watches
    "unshare", "setns", "keyctl", "add_key", "request_key", "ptrace", "process_vm_readv", "process_vm_writev",
    "kcmp", "pidfd_getfd", "perf_event_open", "bpf", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "flock", "inotify_init", "inotify_init1", "fanotify_init")
FCNTL_DENY = ("F_GETLK", "F_SETLK", "F_SETLKW", "F_OFD_GETLK", "F_OFD_SETLK", "F_OFD_SETLKW", "F_SETLEASE",
              "F_GETLEASE", "F_NOTIFY")  # locks, leases and directory notes on files items share: EPERM
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
    """What the program's root holds, read-only: SYSTEM_BINDS, and the Python installation (its prefix when
    that is its own folder, as pyenv, conda or a venv make; else its stdlib, site-packages, executable and
    libpython). Symlinks on the way are recreated; nothing else of /usr is there."""
    global _BINDS
    if _BINDS is not None:
        return _BINDS
    arch = sysconfig.get_config_var("MULTIARCH") or f"{os.uname().machine}-linux-gnu"
    want = [p.format(arch=arch) for p in SYSTEM_BINDS]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        if os.path.realpath(prefix) not in ("/", "/usr", "/usr/local"):
            want.append(prefix)
    want += [sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")] + site.getsitepackages()
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    want += [sys.executable] + [os.path.join(libdir, sysconfig.get_config_var(k) or "") for k in
                                ("LDLIBRARY", "INSTSONAME") if sysconfig.get_config_var(k)]
    links, real = [], []
    for p in want:
        for q in _chain(os.path.abspath(p)):
            (links if os.path.islink(q) else real).append(q)
    real = sorted(set(real), key=len)
    out = []
    for p in real:  # the outermost of nested paths only (a bind inside a read-only bind cannot be made)
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    _BINDS = out + [p for p in dict.fromkeys(links) if not any(p.startswith(q.rstrip("/") + "/") for q in out)]
    return _BINDS


def _sweep(cgroups, how, uids):
    """After the zygote killed the item's session (and with its driver the PID namespace): without
    namespaces, every process of the fresh uids; then whatever the cgroups still hold; the cgroups go."""
    for uid in (set(uids) - {0}) if how == "none" else ():
        pid = os.fork()
        if pid == 0:
            try:
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
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


_ZYGOTES = threading.local() if __name__ != "__main__" else None  # one per calling thread


def _zygote(preload):
    """This thread's zygote (started on first use, again if it died): this file run by path, outside any
    namespace, with the harness's modules loaded; it forks one process per item."""
    preload = tuple(preload)
    z = getattr(_ZYGOTES, "z", None)
    if z is not None and z[0].poll() is None and z[2] == preload:
        return z[1]
    if z is not None:  # another preload list (or a dead zygote): a new one
        z[0].kill()
        z[0].wait()
        z[1].close()
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # messages keep their bounds
    env = {"PATH": "/usr/bin:/bin", "HOME": "/work", "TMPDIR": "/work", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
           "MALLOC_ARENA_MAX": "2"}
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-B", os.path.abspath(__file__), "zygote", *preload],
                            cwd="/", env=env, stdin=there, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    there.close()
    if not select.select([here], [], [], 60)[0] or here.recv(16) != b"ready":
        proc.kill()
        raise SandboxError(f"the sandbox's zygote did not start: {proc.communicate()[1][-2000:].decode(errors='replace')}")
    proc.stderr.close()
    _ZYGOTES.z = (proc, here, preload)
    return here


def _feed(fd, data):
    with contextlib.suppress(OSError):  # a driver that died early stops reading
        write_all(fd, data)
    os.close(fd)


def _read_report(fd, sink, out):
    """The driver's report, read as it streams: each result goes to `sink(i, ok, data)` (or into
    out["results"]) and is not kept; past LIMITS report bytes in all, the rest is drained unread."""
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
            else:
                sink(head.get("i"), head.get("ok") is True, data)
    except Exception:  # EOF, garbage or a sink's own failure: the report is incomplete
        out["complete"] = False
    with contextlib.suppress(OSError):
        while os.read(fd, 1 << 16):
            pass


def run(program, request, timeout, secret=None, sink=None, preload=()):
    """Run `program` in the sandbox. `request`: the mode and the tests' inputs (never their expected outputs),
    and in assert mode the tests' entry point; `secret`: in assert mode the tests and the nonce, sent only
    after the program's process exists. Results stream to `sink(i, ok, data)` when given (else they are
    returned in report["results"]). Returns the driver's final report (a dict), or None when the item
    overran or ended before reporting; raises SandboxError when confinement failed before the program ran."""
    how = mode()
    fresh = lambda: 0x70000000 + int.from_bytes(os.urandom(3), "big")  # uids no system convention uses
    uids = [fresh(), fresh()] if os.geteuid() == 0 and how != "user-ns" else [0, 0]
    work = tempfile.mkdtemp(prefix=f"rlvr-code-{os.getpid()}-")  # with namespaces: the root's mount point
    cgroups = item_cgroups()
    out = {"bytes": 0, "results": [], "confined": False, "complete": False}
    log = ""
    try:
        if how == "none" and uids[0]:
            os.chown(work, uids[0], uids[0])
        limits = {"RLIMIT_FSIZE": LIMITS["file_size"], "RLIMIT_CORE": 0, "RLIMIT_NOFILE": LIMITS["open_files"],
                  "RLIMIT_CPU": int(timeout) + 1}
        if not memory_limited(cgroups):
            limits["RLIMIT_AS"] = LIMITS["memory"]  # per process; MALLOC_ARENA_MAX keeps threads within it
        if uids[0]:  # RLIMIT_NPROC counts every process of a uid: it bounds this run only under its own fresh uid
            limits["RLIMIT_NPROC"] = LIMITS["processes"]
        public = dict(request, program=program, namespaces=how != "none", root=work, uids=uids, limits=limits,
                      binds=binds(), disk=LIMITS["disk"], files=LIMITS["files"], output=LIMITS["output"],
                      message=LIMITS["message"], site=[os.path.realpath(p) for p in site.getsitepackages()],
                      seccomp=SECCOMP_DENY, fcntl=FCNTL_DENY, families=SOCKET_FAMILIES, clone=CLONE_NEW)
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
        reader = threading.Thread(target=_read_report, args=(rep_r, sink, out), daemon=True)
        reader.start()
        overran = not select.select([zygote], [], [], timeout)[0]
        if overran:
            zygote.send(b"kill")
        ended = zygote.recv(16) == b"ended"
        _sweep(cgroups, how, uids)
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


def dumps(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


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
import atexit  # noqa: E402  (the inside half's own imports, loaded by the zygote: a program's uid may not read them)
import builtins  # noqa: E402
import collections  # noqa: E402
import ctypes  # noqa: E402
import datetime  # noqa: E402
import decimal  # noqa: E402
import fcntl  # noqa: E402
import fractions  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import io  # noqa: E402
import numbers  # noqa: E402
import resource  # noqa: E402
import struct  # noqa: E402
import types  # noqa: E402

libc = ctypes.CDLL(None, use_errno=True)
ARCH = os.uname().machine
NR = {"x86_64": dict(audit=0xC000003E, unshare=272, setns=308, clone=56, clone3=435, keyctl=250, add_key=248,
                     request_key=249, ptrace=101, process_vm_readv=310, process_vm_writev=311, kcmp=312, pidfd_getfd=438,
                     perf_event_open=298, bpf=321, userfaultfd=323, io_uring_setup=425, io_uring_enter=426,
                     io_uring_register=427, mount=165, umount2=166, pivot_root=155, chroot=161, open_tree=428,
                     move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433, mount_setattr=442, flock=73,
                     inotify_init=253, inotify_init1=294, fanotify_init=300, socket=41, socketpair=53, fcntl=72),
      "aarch64": dict(audit=0xC00000B7, unshare=97, setns=268, clone=220, clone3=435, keyctl=219, add_key=217,
                      request_key=218, ptrace=117, process_vm_readv=270, process_vm_writev=271, kcmp=272, pidfd_getfd=438,
                      perf_event_open=241, bpf=280, userfaultfd=282, io_uring_setup=425, io_uring_enter=426,
                      io_uring_register=427, mount=40, umount2=39, pivot_root=41, chroot=51, open_tree=428,
                      move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433, mount_setattr=442, flock=32,
                      inotify_init1=26, fanotify_init=262, socket=198, socketpair=199, fcntl=25)}.get(ARCH)
FCNTL = dict(F_GETLK=5, F_SETLK=6, F_SETLKW=7, F_OFD_GETLK=36, F_OFD_SETLK=37, F_OFD_SETLKW=38, F_SETLEASE=1024,
             F_GETLEASE=1025, F_NOTIFY=1026)
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
    mount("tmpfs", root + "/work", NOSUID | NODEV, "tmpfs", f"size={req['disk']},nr_inodes={req['files']},mode=1777")
    os.makedirs(root + "/tmp")
    mount(root + "/work", root + "/tmp", BIND)  # /tmp is /work
    for src in req["binds"]:  # real paths first, then the symlinks that lead to them
        dst = root + src
        if os.path.islink(src):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if not os.path.lexists(dst):
                os.symlink(os.readlink(src), dst)
            continue
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            open(dst, "w").close()
        mount(src, dst, BIND | REC)
        f = os.statvfs(dst).f_flag  # keep the flags a user namespace locks: nosuid, nodev, noexec, atime
        mount(None, dst, REMOUNT | BIND | RDONLY | (f & (NOSUID | NODEV | NOEXEC | 1024 | 2048)) | (1 << 21 if f & 4096 else 0))
    os.makedirs(root + "/dev")
    mount("tmpfs", root + "/dev", NOSUID | NOEXEC, "tmpfs", "size=64k,mode=755")
    for name in ("null", "zero", "random", "urandom"):
        open(f"{root}/dev/{name}", "w").close()
        mount(f"/dev/{name}", f"{root}/dev/{name}", BIND)
    for name, target in (("shm", "/work"), ("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(root + "/proc")
    for options in ("hidepid=invisible,subset=pid", "hidepid=2", None):  # this PID namespace's processes only
        try:
            mount("proc", root + "/proc", NOSUID | NODEV | NOEXEC, "proc", options)
            break
        except OSError:
            continue
    os.makedirs(root + "/.old")
    mount(None, root, REMOUNT | RDONLY | NOSUID | NODEV)  # the root itself is read-only
    os.chdir(root)
    check(libc.syscall(NR["pivot_root"] if NR else 155, b".", b".old"), "pivot_root")
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
    libc.syscall(NR["keyctl"] if NR else 250, 1, None)  # KEYCTL_JOIN_SESSION_KEYRING: a new, empty one
    check(libc.prctl(4, 0, 0, 0, 0), "dumpable")
    sys.path.extend(req["site"])  # the interpreter's site-packages, for the program's imports
    fd = os.open("solution.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)  # for spawned children
    write_all(fd, req["program"].encode("utf-8", "surrogatepass"))
    os.close(fd)


# ---------------------------------------------------------------------------- 5. restrict: the program's processes
_FILTER = []  # the compiled filter, built once in the driver and installed by every fork


class Insn(ctypes.Structure):  # struct sock_filter
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class Prog(ctypes.Structure):  # struct sock_fprog
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]


class Header(ctypes.Structure):  # struct __user_cap_header_struct
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


def seccomp(req):
    """Install the filter (built once by build_filter)."""
    if NR:
        if not _FILTER:
            build_filter(req)
        check(libc.prctl(22, 2, ctypes.byref(_FILTER[0]), 0, 0), "seccomp")


def build_filter(req):
    """A BPF filter from the policy: SECCOMP_DENY -> EPERM; socket families outside SOCKET_FAMILIES ->
    EAFNOSUPPORT; FCNTL_DENY commands -> EPERM; clone with new namespaces -> EPERM."""
    if not NR:
        return
    EPERM, ENOSYS, EAFNOSUPPORT, ALLOW, KILL = 0x50001, 0x50026, 0x50061, 0x7FFF0000, 0x80000000
    LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
    prog = [(LD, 0, 0, 4), (JEQ, 1, 0, NR["audit"]), (RET, 0, 0, KILL), (LD, 0, 0, 0)]
    if ARCH == "x86_64":
        prog += [(JGE, 0, 1, 0x40000000), (RET, 0, 0, EPERM)]  # the x32 ABI
    for name in req["seccomp"]:
        if name in NR:
            prog += [(JEQ, 0, 1, NR[name]), (RET, 0, 0, EPERM)]
    prog += [(JEQ, 0, 1, NR["clone3"]), (RET, 0, 0, ENOSYS)]

    def on_argument(nr, arg, values, hit, miss):  # nr: look at argument `arg`; a value in `values` -> hit
        body = [(LD, 0, 0, 16 + 8 * arg)] + [(JEQ, len(values) - i, 0, v) for i, v in enumerate(values)]
        return [(JEQ, 0, len(body) + 2, nr)] + body + [(RET, 0, 0, miss), (RET, 0, 0, hit)]
    families = [getattr(socket, f) for f in req["families"] if hasattr(socket, f)]
    for call in ("socket", "socketpair"):
        prog += on_argument(NR[call], 0, families, ALLOW, EAFNOSUPPORT)
    prog += on_argument(NR["fcntl"], 1, [FCNTL[c] for c in req["fcntl"] if c in FCNTL], EPERM, ALLOW)
    prog += [(JEQ, 0, 3, NR["clone"]), (LD, 0, 0, 16), (JSET, 0, 1, req["clone"]), (RET, 0, 0, EPERM),
             (RET, 0, 0, ALLOW)]
    insns = (Insn * len(prog))(*[Insn(*i) for i in prog])
    _FILTER[:] = [Prog(len(prog), insns), insns]


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
    if uid:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    libc.capset(ctypes.byref(Header(0x20080522, 0)), ctypes.byref((ctypes.c_uint32 * 6)()))
    check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
    if not dumpable:  # no other process of this uid may read this one's memory
        check(libc.prctl(4, 0, 0, 0, 0), "dumpable")
    seccomp(req)


def quiet():
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def _quit(code=None):
    raise SystemExit(code)


def spawn(req, uid, keep, body, dumpable=True):
    """A fork that drops to `uid` and runs body() as the interpreter would run a script: exit() and quit()
    exist, integers of any size print, and its exit status is body()'s."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
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
    waits for non-daemon threads, runs atexit handlers and flushes."""
    module = new_module(req, "__main__")
    sys.argv = ["solution.py"]
    sys.stdin = sys.__stdin__ = open(0, "r", closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)
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
    try:
        sys.stdout.flush()
    except BaseException:
        code = code or 120
    return code


# ---------------------------------------------------------------------------- 6. the modes
def run_stdin(req, report):
    """Each input in a fresh fork: stdin a copy of the input (a memfd, which /dev/stdin reopens at its start
    as it would a file), stdout a pipe this driver drains as it fills; the result is what came out, up to the
    output limit."""
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
        pid = spawn(req, req["uids"][0], (stdin, w), body)
        os.close(w)
        out = drain(r, req["output"])
        status = os.waitpid(pid, 0)[1]
        for fd in (r, stdin):
            os.close(fd)
        send_result(report, i, os.waitstatus_to_exitcode(status) == 0, out)


def drain(fd, limit):
    """Everything `fd` gives until end of file; the first limit + 1 bytes kept, the rest read and dropped."""
    out = bytearray()
    while True:
        part = os.read(fd, 1 << 16)
        if not part:
            return bytes(out)
        out += part[:max(0, limit + 1 - len(out))]


def send_result(report, i, ok, data):
    write_all(report, frame(dumps({"i": i, "ok": ok})) + frame(data))


def run_call(req, report):
    """The program loaded once as module `solution`; each call's return value as JSON (an error, or a value
    JSON cannot hold, as nothing: a mismatch), in a frame on a pipe this driver reads with the output limit."""
    r, w = os.pipe()

    def body():
        module = load(req, "solution")
        g = module.__dict__
        f = getattr(g["Solution"](), req["fn_name"]) if "Solution" in g else g[req["fn_name"]]
        for args in req["inputs"]:
            try:
                data = dumps(f(*args))
            except BaseException:
                data = b""
            write_all(w, frame(data))
        return 0
    pid = spawn(req, req["uids"][0], (w,), body)
    os.close(w)
    read = lambda n: os.read(r, n)
    for i in range(len(req["inputs"])):
        try:
            data = read_frame(read, req["output"])
        except (EOFError, ValueError):
            break
        send_result(report, i, bool(data), data)
    drain(r, 0)
    os.waitpid(pid, 0)
    os.close(r)


def run_assert(req, report):
    """The program and the tests in two processes: the program's (forked before the tests and the nonce
    were read) serves its objects; the tests' (another uid, not dumpable) runs them against handles and,
    only when every assert passed, reports the nonce."""
    a, b = socket.socketpair()

    def program():
        module = load(req, "solution")
        ch = Channel(b, full=True, limit=req["message"])
        ch.send({"globals": ch.names(module.__dict__)})
        while True:
            try:
                msg = ch.recv()
            except EOFError:
                return 0
            ch.serve(msg)
    server = spawn(req, req["uids"][0], (b.fileno(),), program)
    secret = json.loads(read_frame(lambda n: os.read(0, n), 1 << 30))  # only now: the program never held it
    r, w = os.pipe()

    def tests():
        ch = Channel(a, full=False, limit=req["message"])
        own = set(vars(builtins))  # a name the program defines never replaces one of the tests' builtins
        names = {k: ch.dec(v) for k, v in ch.recv()["globals"].items() if k not in own or k == req.get("entry_point")}
        exec(compile(secret["assert"], "tests.py", "exec"), dict(names, __name__="tests", __builtins__=builtins))
        write_all(w, (secret["nonce"] + " ok").encode())
        return 0
    tester = spawn(req, req["uids"][1], (a.fileno(), w), tests, dumpable=False)
    del secret
    for s in (a, b):
        s.close()
    os.close(w)
    verdict = drain(r, 1024)
    os.waitpid(tester, 0)
    os.kill(server, signal.SIGKILL)
    os.waitpid(server, 0)
    return verdict.decode("utf-8", "replace")


class Channel:
    """Objects of one process lent to another over a socket. Values of builtin and standard-library value
    types (and of their subclasses, as the base type) cross as plain data; anything else as a handle the
    other side can only use through this channel. The tests' side (full=False) lends its objects for calls
    only; the program's side answers calls, attributes, items, len, iteration, membership, repr and truth,
    and sends what a call printed. Exceptions cross by class: a builtin one by name (StopIteration and
    what is not an Exception become RuntimeError), a program's own as a local class of that name."""

    def __init__(self, sock, full, limit):
        self.sock, self.full, self.limit, self.objects, self.classes = sock, full, limit, {}, {}

    def send(self, msg):
        data = dumps(msg)
        if len(data) > self.limit:
            raise ValueError("message too large")
        self.sock.sendall(frame(data))

    def recv(self):
        return json.loads(read_frame(self.sock.recv, self.limit))

    def handle(self, x):
        self.objects[id(x)] = x
        return {"mine": id(x)}

    def names(self, g):
        """A module's names: small values by value, the rest (and whatever would pass half the message
        limit in all) as handles."""
        out, size = {}, 0
        for k, v in g.items():
            if k.startswith("__"):
                continue
            if isinstance(v, (str, bytes, list, tuple, dict, set, frozenset)) and len(v) > 1 << 16:
                out[k], size = self.handle(v), size + 40  # large: lent, not copied (the tests may never read it)
                continue
            try:
                e = self.enc(v)
                n = len(dumps(e))
            except Exception:
                e, n = self.handle(v), 0
            if n > 1 << 20 or size + n > self.limit // 2:
                e, n = self.handle(v), 40
            out[k], size = e, size + n
        return out

    def enc(self, x, depth=0):
        t = type(x)
        if x is None or t in (bool, str):
            return x
        if t is int:
            return x if abs(x) < 1 << 53 else {"int": format(x, "x")}  # hex: no limit on digits
        if t is float:
            return {"float": float.hex(x)}
        if t is Remote and x._channel is self:
            return {"yours": x._h}
        if depth > 100:
            return self.handle(x)
        e = lambda v: self.enc(v, depth + 1)
        items = lambda d: [[e(k), e(v)] for k, v in dict.items(d)]
        if getattr(builtins, getattr(x, "__name__", None) or "", None) is x:
            return {"builtin": x.__name__}  # the other side's own builtin
        if isinstance(x, types.ModuleType):
            return {"module": [x.__name__, self.handle(x)["mine"]]}
        if isinstance(x, type) and getattr(x, "__module__", "").split(".")[0] in sys.stdlib_module_names:
            return {"class": [x.__module__, x.__qualname__, self.handle(x)["mine"]]}
        if isinstance(x, type) and issubclass(x, BaseException):  # the program's own exception class
            return {"exc": [self.handle(x)["mine"], x.__name__, e(x.__bases__[0] if x.__bases__ else Exception)]}
        for base in t.__mro__:
            if base is collections.Counter:
                return {"Counter": items(x)}
            if base is collections.OrderedDict:
                return {"OrderedDict": items(x)}
            if base is collections.defaultdict:
                factory = x.default_factory
                return {"defaultdict": [factory.__name__ if factory in (int, float, str, list, dict, set, tuple) else None,
                                        items(x)]}
            if base is collections.deque:
                return {"deque": [[e(v) for v in x], x.maxlen]}
            if base in (list, tuple, set, frozenset):
                return {base.__name__: [e(v) for v in base.__iter__(x)]}
            if base is dict:
                return {"dict": items(x)}
            if base in (int, float, str):
                return e(base(x) if base is not str else str.__str__(x))
            if base is bytes:
                return {"bytes": bytes.hex(x)}
            if base is bytearray:
                return {"bytearray": bytes(x).hex()}
            if base is complex:
                return {"complex": [float.hex(float(x.real)), float.hex(float(x.imag))]}
            if base is range:
                return {"range": [e(x.start), e(x.stop), e(x.step)]}
            if base is fractions.Fraction:
                return {"Fraction": [e(x.numerator), e(x.denominator)]}
            if base is decimal.Decimal:
                return {"Decimal": str(x)}
            if base in (datetime.datetime, datetime.date, datetime.time):
                return {base.__name__: x.isoformat()}
            if base is datetime.timedelta:
                return {"timedelta": [x.days, x.seconds, x.microseconds]}
        if self.full and t.__module__.split(".")[0] == "numpy" and hasattr(x, "tolist"):
            return e(x.tolist())
        if self.full and isinstance(x, numbers.Integral):
            return e(int(x))
        if self.full and isinstance(x, numbers.Real):
            return e(float(x))
        return self.handle(x)

    def dec(self, v):
        if not isinstance(v, dict):
            return v
        (kind, x), = v.items()
        d = self.dec
        pairs = lambda: [(d(k), d(e)) for k, e in x]
        if kind == "int":
            return int(x, 16)
        if kind == "float":
            return float.fromhex(x)
        if kind in ("list", "tuple", "set", "frozenset"):
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[kind](d(e) for e in x)
        if kind == "dict":
            return dict(pairs())
        if kind in ("Counter", "OrderedDict"):
            return getattr(collections, kind)(dict(pairs()))
        if kind == "defaultdict":
            return collections.defaultdict({"int": int, "float": float, "str": str, "list": list, "dict": dict,
                                             "set": set, "tuple": tuple}.get(x[0]), [(d(k), d(e)) for k, e in x[1]])
        if kind == "deque":
            return collections.deque([d(e) for e in x[0]], x[1])
        if kind == "bytes":
            return bytes.fromhex(x)
        if kind == "bytearray":
            return bytearray.fromhex(x)
        if kind == "complex":
            return complex(float.fromhex(x[0]), float.fromhex(x[1]))
        if kind == "range":
            return range(d(x[0]), d(x[1]), d(x[2]))
        if kind == "Fraction":
            return fractions.Fraction(d(x[0]), d(x[1]))
        if kind == "Decimal":
            return decimal.Decimal(x)
        if kind in ("datetime", "date", "time"):
            return getattr(datetime, kind).fromisoformat(x)
        if kind == "timedelta":
            return datetime.timedelta(*x)
        if kind == "builtin":
            return getattr(builtins, x)
        if kind in ("module", "class"):  # a standard-library one: the tests' own copy, which the program never patched
            try:
                if x[0].split(".")[0] not in sys.stdlib_module_names or x[0] in ("this", "antigravity"):
                    raise ImportError(x[0])
                found = importlib.import_module(x[0])
                for part in ([] if kind == "module" else x[1].split(".")):
                    found = getattr(found, part)
                return found
            except Exception:
                return Remote(self, x[-1])
        if kind == "exc":
            if x[0] not in self.classes:
                base = d(x[2])
                if not (isinstance(base, type) and issubclass(base, Exception)) or issubclass(
                        base, (StopIteration, StopAsyncIteration)):
                    base = Exception
                try:
                    self.classes[x[0]] = type(str(x[1])[:200], (base,), {"__module__": "solution"})
                except TypeError:  # a base that cannot be subclassed so
                    self.classes[x[0]] = type(str(x[1])[:200], (Exception,), {"__module__": "solution"})
            return self.classes[x[0]]
        if kind == "mine":
            return Remote(self, x)
        if kind == "yours":
            return self.objects[x]
        raise ValueError(kind)

    def request(self, op, *args, **kwargs):
        self.send({"op": op, "args": [self.enc(a) for a in args], "kw": {k: self.enc(a) for k, a in kwargs.items()}})
        while True:
            msg = self.recv()
            if "op" in msg:  # a call back while the other side works on ours
                self.serve(msg)
                continue
            for stream, text in (("stdout", msg.get("out")), ("stderr", msg.get("errout"))):
                if isinstance(text, str) and text:
                    getattr(sys, stream).write(text)  # what the call printed, where the tests print now
            if "stop" in msg and op == "next":
                raise StopIteration
            if "err" in msg:
                raise self.exception(msg["err"])
            return self.dec(msg["ok"])

    def exception(self, err):
        """The exception a call raised, as the tests may catch it; never one that steers iteration or exits."""
        try:
            kind = self.dec(err["type"])
            ok = isinstance(kind, type) and issubclass(kind, Exception) and not issubclass(
                kind, (StopIteration, StopAsyncIteration))
            return (kind if ok else RuntimeError)(str(err["msg"]))
        except Exception:
            return RuntimeError(str(err.get("msg", "")) if isinstance(err, dict) else "")

    def serve(self, msg):
        out, errout = io.StringIO(), io.StringIO()
        try:
            args, kw = [self.dec(a) for a in msg["args"]], {k: self.dec(a) for k, a in msg["kw"].items()}
            op, obj = msg["op"], args[0] if args else None
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(errout):
                if op == "call":
                    result = obj(*args[1:], **kw)
                elif not self.full:
                    raise PermissionError("only calls")
                elif op == "next":
                    try:
                        result = next(obj)
                    except StopIteration:
                        self.send({"stop": True, "out": out.getvalue()[-self.limit // 4:]})
                        return
                else:
                    result = {"getattr": lambda: getattr(obj, args[1]), "setattr": lambda: setattr(obj, args[1], args[2]),
                              "getitem": lambda: obj[args[1]], "setitem": lambda: obj.__setitem__(args[1], args[2]),
                              "delitem": lambda: obj.__delitem__(args[1]), "len": lambda: len(obj),
                              "iter": lambda: iter(obj), "contains": lambda: args[1] in obj, "repr": lambda: repr(obj),
                              "str": lambda: str(obj), "bool": lambda: bool(obj)}[op]()
            reply = {"ok": self.enc(result)}
        except BaseException as e:
            reply = {"err": {"type": self.enc(type(e)), "msg": str(e)[:500]}}
        if self.full:
            reply.update(out=out.getvalue()[-self.limit // 4:], errout=errout.getvalue()[-self.limit // 4:])
        if len(dumps(reply)) > self.limit and "ok" in reply:  # too large to send: lent as a handle instead
            reply["ok"] = self.handle(result)
        self.send(reply)


class Remote:
    """An object of the program, in the tests' process: every use goes through the channel. Equality is
    identity, so an object that claims to equal everything cannot pass an assert here."""
    __slots__ = ("_channel", "_h")

    def __init__(self, channel, h):
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_h", h)

    def __getattr__(self, name):
        return self._channel.request("getattr", self, name)

    def __setattr__(self, name, value):
        self._channel.request("setattr", self, name, value)

    def __call__(self, *args, **kwargs):
        return self._channel.request("call", self, *args, **kwargs)

    def __getitem__(self, key):
        return self._channel.request("getitem", self, key)

    def __setitem__(self, key, value):
        self._channel.request("setitem", self, key, value)

    def __delitem__(self, key):
        self._channel.request("delitem", self, key)

    def __len__(self):
        return self._channel.request("len", self)

    def __iter__(self):
        it = self._channel.request("iter", self)
        return it if type(it) is Remote else iter(it)

    def __next__(self):
        return self._channel.request("next", self)

    def __contains__(self, x):
        return self._channel.request("contains", self, x)

    def __repr__(self):
        return self._channel.request("repr", self)

    def __str__(self):
        return self._channel.request("str", self)

    def __bool__(self):
        return self._channel.request("bool", self)

    def __eq__(self, other):
        return type(other) is Remote and other._h == self._h

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self._h)


# ---------------------------------------------------------------------------- 7. driver, item, zygote
def driver():
    """The item's PID 1: reads the request, confines itself, says "confined", runs the mode, reports."""
    req = json.loads(read_frame(lambda n: os.read(0, n), 1 << 40))
    try:
        confine(req)
    except Exception as e:
        print(f"sandbox: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        os._exit(97)
    build_filter(req)  # once, before the forks that install it
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
