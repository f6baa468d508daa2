"""What irscope does with the signals it gets while the script runs: the script is the one to
end, and the run is filed after it.

The script runs in irscope's own process group, so what is sent to the group (the
terminal's Ctrl-C or hang-up, ``kill -INT -PGID``) reaches both; irscope then only waits for
the script, which gets the signal once. A signal sent to irscope alone (``kill -INT``,
``kill -TERM`` or ``kill -HUP`` of its pid) is passed on to the script and the processes it
started, as the terminal would have sent it to them all. Which of the two a signal was,
nothing in it says: a *canary*, a small process of irscope's in the same group with these
signals blocked, keeps each signal sent to the group pending, and is asked after each.
A script ended by SIGTERM or SIGHUP may leave processes of its own (multiprocessing
workers) behind: the script's processes are noted when such a signal comes, and those still
alive once the script has ended are ended too (irscope, their subreaper meanwhile, collects
them); processes irscope started itself are never touched.
Signals are taken by one thread with ``sigwaitinfo``, which says who sent each; without a
canary a signal the kernel sent (the terminal's) is taken for the group's, and one a process
sent (``kill``) for irscope's alone. Where ``sigwaitinfo`` does not exist, SIGINT is left to
the terminal and SIGTERM and SIGHUP are passed on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
ENDING = (signal.SIGTERM, signal.SIGHUP)  # after these, the script's leftovers are ended
SI_USER = 0  # siginfo si_code of a signal a process sent with kill()
STOP_WAITING = signal.SIGUSR2  # tells the waiting thread to stop
GRACE_S = 3.0  # leftovers get SIGTERM, then SIGKILL after this long
PR_SET_CHILD_SUBREAPER = 36
# The canary's program: for each signal number read, the sender and code of that signal if
# it is pending (sent to the whole group: irscope's got it too), else "-".
CANARY = """
import signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {int(n) for n in sys.argv[1:]})
for line in sys.stdin:
    info = signal.sigtimedwait({int(line)}, 0)
    print(f"{info.si_pid} {info.si_code}" if info else "-", flush=True)
"""


class ScriptSignals:
    """From ``start`` until ``stop``: signals to irscope go to the script's processes."""

    def __init__(self, children: Sequence):
        self.children = list(children)
        self.received: list[int] = []
        self.doomed: set[int] = set()  # the script's processes when a signal ended it
        self._thread: threading.Thread | None = None
        self._previous = None
        self._handlers: dict[int, object] = {}
        self._canary: subprocess.Popen | None = None

    def start(self) -> ScriptSignals:
        if hasattr(signal, "sigwaitinfo") and hasattr(signal, "pthread_sigmask"):
            _become_subreaper()
            self._previous = signal.pthread_sigmask(signal.SIG_BLOCK,
                                                    {*PASSED_ON, STOP_WAITING})
            self._canary = _start_canary()  # born with the signals blocked, as this thread
            self._thread = threading.Thread(target=self._wait, name="irscope-signals",
                                            daemon=True)
            self._thread.start()
        else:  # no sigwaitinfo: the terminal's Ctrl-C reaches the script by itself
            self._handlers = {sig: signal.signal(sig, self._pass_on) for sig in PASSED_ON
                              if sig != signal.SIGINT}
            self._handlers[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
        return self

    def _wait(self) -> None:
        while True:
            info = signal.sigwaitinfo({*PASSED_ON, STOP_WAITING})
            if info.si_signo == STOP_WAITING:
                return
            self.received.append(info.si_signo)
            if info.si_signo in ENDING:
                self.doomed |= descendants([c.pid for c in self.children])
            if not self._reached_the_script(info):
                self._pass_on(info.si_signo)

    def _reached_the_script(self, info) -> bool:
        """Whether the signal went to the script too: sent to the process group (the
        canary got the same, from the same sender: the kernel queues a group's signal to
        every member within the one ``kill()``, long before this thread can ask), or sent
        by irscope itself."""
        if info.si_code == SI_USER and info.si_pid == os.getpid():
            return True
        try:
            self._canary.stdin.write(f"{info.si_signo}\n".encode())
            self._canary.stdin.flush()
            answer = self._canary.stdout.readline()
        except (AttributeError, OSError):
            answer = b""
        if not answer:  # no canary: the kernel's signal is taken for the terminal's
            return info.si_code != SI_USER
        return answer.split() == [str(info.si_pid).encode(), str(info.si_code).encode()]

    def _pass_on(self, signum: int, _frame=None) -> None:
        """The signal to the script and every process it started, as a terminal sends it
        to a whole program (its multiprocessing workers too)."""
        below = descendants([c.pid for c in self.children])
        if signum in ENDING:
            self.doomed |= below
        for child in self.children:
            try:
                child.send_signal(signum)
            except OSError:
                pass
        for pid in below:
            _send(pid, signum)

    def stop(self) -> None:
        """Back to the signals' own handling; the script's leftovers ended if a signal asked
        the script to end."""
        if self._thread is not None:
            signal.pthread_kill(self._thread.ident, STOP_WAITING)
            self._thread.join(timeout=5)
            signal.pthread_sigmask(signal.SIG_SETMASK, self._previous)
        for sig, handler in self._handlers.items():
            signal.signal(sig, handler)
        if self._canary is not None:
            self._canary.kill()  # (a stopped canary too)
            self._canary.communicate()
        if self.doomed:
            end_leftovers(self.doomed - {c.pid for c in self.children})


def _start_canary() -> subprocess.Popen | None:
    """The canary, in irscope's process group with the signals the calling thread blocks
    blocked (a child inherits them): a signal sent to the group stays pending in it."""
    try:
        return subprocess.Popen([sys.executable, "-I", "-S", "-c", CANARY,
                                 *map(str, PASSED_ON)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return None


def _become_subreaper() -> None:
    """Be the parent of the script's orphaned processes (Linux), so they can be ended."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def descendants(roots: Sequence[int]) -> set[int]:
    """The processes below ``roots`` (children, their children...), from /proc (Linux)."""
    parents: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), set(roots)
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def end_leftovers(pids: set[int]) -> list[int]:
    """End those of ``pids`` still alive: SIGTERM, then SIGKILL after GRACE_S; collect the
    ones that became this process's children."""
    alive = [pid for pid in pids if _alive(pid)]
    for pid in alive:
        _send(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(_alive(pid) for pid in alive):
        time.sleep(0.05)
    for pid in alive:
        if _alive(pid):
            _send(pid, signal.SIGKILL)
    return alive


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie of this process is collected, and is not)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass  # not this process's child: look at it
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _send(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass
