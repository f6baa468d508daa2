"""Worker threads that never hold the app open: quitting leaves a busy worker behind.

Textual runs thread workers on the event loop's default executor, and asyncio waits for that
executor's threads when the app ends: a worker parsing a huge stage, or stuck reading a slow
file system, would keep ``q`` from ending the program. Here each job gets a daemon thread and
shutting down waits for none of them; the process ends and takes them along.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor


class DaemonThreads(ThreadPoolExecutor):
    """An executor running each job on a daemon thread of its own, never waited for."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001  handed to whoever awaits the job
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=run, name="irscope-worker", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to wait for: busy workers are left to end with the process."""
