"""Run a callback right after a package is first imported, so unused frameworks cost nothing."""

from __future__ import annotations

import importlib.abc
import sys
from typing import Callable

Callback = Callable[[object], None]


class PostImportFinder(importlib.abc.MetaPathFinder):
    """A meta-path entry that lets the normal finders load a watched package, then calls back."""

    def __init__(self, callbacks: dict[str, Callback]):
        self.callbacks = dict(callbacks)

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.callbacks:
            return None
        for finder in sys.meta_path:  # the real finders: another watcher would ask back
            if isinstance(finder, PostImportFinder) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_call_back(module):
            exec_module(module)
            # popped only on a real import: importlib.util.find_spec() probes (torch does
            # one for triton) ask for a spec and never execute it; every watcher of the
            # package is called, this one first
            watchers = [self, *(f for f in sys.meta_path
                                if isinstance(f, PostImportFinder) and f is not self)]
            for watcher in watchers:
                callback = watcher.callbacks.pop(fullname, None)
                if callback is not None:
                    callback(module)

        loader.exec_module = exec_then_call_back  # loaders are made per spec: this one only
        return spec


def when_imported(callbacks: dict[str, Callback]) -> PostImportFinder | None:
    """Call each callback now if its package is imported, else right after its first import."""
    pending = {}
    for name, callback in callbacks.items():
        if name in sys.modules:
            callback(sys.modules[name])
        else:
            pending[name] = callback
    if not pending:
        return None
    finder = PostImportFinder(pending)
    sys.meta_path.insert(0, finder)
    return finder


def remove(finder: PostImportFinder | None) -> None:
    if finder is not None and finder in sys.meta_path:
        sys.meta_path.remove(finder)
