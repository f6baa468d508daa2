"""`irscope completion SHELL`: scripts that each shell loads and that complete commands and options."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest


def script(shell: str, tmp_path) -> str:
    done = subprocess.run([sys.executable, "-m", "irscope", "completion", shell],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    path = tmp_path / f"irscope.{shell}"
    path.write_text(done.stdout)
    return str(path)


def run(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_bash_completes_commands_then_that_commands_options(tmp_path):
    path = script("bash", tmp_path)
    out = run("bash", "-c", f"source {path}; "
              "COMP_WORDS=(irscope se); COMP_CWORD=1; _irscope; echo ${COMPREPLY[@]}; "
              "COMP_WORDS=(irscope serve --p); COMP_CWORD=2; _irscope; echo ${COMPREPLY[@]}; "
              "COMP_WORDS=(irscope report run --for); COMP_CWORD=3; _irscope; "
              "echo ${COMPREPLY[@]}")
    assert out.splitlines() == ["serve", "--port", "--format"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_loads_it_as_the_completion_of_irscope(tmp_path):
    path = script("zsh", tmp_path)
    run("zsh", "-n", path)
    out = run("zsh", "-c", f"autoload -U compinit; compinit -u -D; source {path}; "
              "print ${_comps[irscope]}")
    assert out.strip() == "_irscope"


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_commands_and_options(tmp_path):
    path = script("fish", tmp_path)
    run("fish", "-n", path)
    out = run("fish", "-c", f"source {path}; complete -C'irscope se'; "
              "complete -C'irscope serve --po'")
    assert out.splitlines()[0].startswith("serve\t") and "--port\t" in out
