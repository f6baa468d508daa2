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
              "echo ${COMPREPLY[@]}; "
              "COMP_WORDS=(irscope report run --format ''); COMP_CWORD=4; _irscope; "
              "echo ${COMPREPLY[@]}; "
              "COMP_WORDS=(irscope report -f m); COMP_CWORD=3; _irscope; echo ${COMPREPLY[@]}")
    assert out.splitlines() == ["serve", "--port", "--format", "table json csv md html", "md"]


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
              "complete -C'irscope serve --po'; complete -C'irscope report -f j'")
    assert out.splitlines()[0].startswith("serve\t") and "--port\t" in out
    assert out.splitlines()[-1].startswith("json\t")


# -- quoting: names and help texts never run as commands -----------------------------------------
def hostile_table(marker) -> list:
    """A parser table whose every name and help text would run a command if left unquoted."""
    run = f"$(id>{marker}1)`id>{marker}2`"  # no space: bash splits compgen's words
    return [(f"x{run}", f"it's \\ {run} [a]:b\nnext", [(f"--o{run}", f"h\\'\\ {run}")]),
            ("plain", "a 'quoted' help\\", [("--p", "ends in \\")])]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_names_and_help_texts_enter_the_script_as_text(tmp_path, shell):
    from irscope.commands import completion

    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    marker = tmp_path / "RAN"
    table = hostile_table(marker)
    path = tmp_path / f"irscope.{shell}"
    path.write_text({"bash": completion.bash_script, "zsh": completion.zsh_script,
                     "fish": completion.fish_script}[shell](table))
    name = table[0][0]
    if shell == "bash":  # complete the commands, then the options of the hostile one
        out = run("bash", "-c", f"source {path}; COMP_WORDS=(irscope x); COMP_CWORD=1; "
                  "_irscope; printf '%s\\n' \"${COMPREPLY[@]}\"; "
                  f"COMP_WORDS=(irscope {shlex_quote(name)} --); COMP_CWORD=2; _irscope; "
                  "printf '%s\\n' \"${COMPREPLY[@]}\"")
        assert out.splitlines() == [name, table[0][2][0][0]]
    elif shell == "zsh":
        run("zsh", "-n", str(path))
        run("zsh", "-c", f"autoload -U compinit; compinit -u -D; source {path}")
    else:
        run("fish", "-n", str(path))
        out = run("fish", "-c", f"source {path}; complete -C'irscope '; "
                  f"complete -C{shlex_quote('irscope ' + name + ' --')}")
        assert f"{name}\t" in out and "--p" not in out
    assert not list(tmp_path.glob("RAN*")), "a name in the completion script ran"


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)
