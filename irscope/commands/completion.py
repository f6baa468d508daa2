"""`irscope completion SHELL`: a completion script for bash, zsh or fish, made from the parser.

The script lists every subcommand with its options, so it is regenerated with irscope:
`irscope completion bash > ~/.local/share/bash-completion/completions/irscope`. Every name
and help text enters quoted for the shell that reads it, twice where the shell evaluates the
text again when completing (bash's ``compgen -W``, fish's ``-a`` and ``-n``).
"""

from __future__ import annotations

import argparse
import re
import shlex
from typing import NamedTuple

SHELLS = ("bash", "zsh", "fish")
FISH_PLAIN = re.compile(r"[\w.,:/=+@-]+")  # a word fish reads as it is written
INSTALL = {
    "bash": "irscope completion bash > ~/.local/share/bash-completion/completions/irscope",
    "zsh": "irscope completion zsh > ~/.zfunc/_irscope  (with fpath+=~/.zfunc before compinit)",
    "fish": "irscope completion fish > ~/.config/fish/completions/irscope.fish",
}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "completion", help="print a shell completion script (bash, zsh, fish)",
        description="Print a completion script for subcommands and their options. Install: "
                    + "; ".join(INSTALL.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=run)


class Option(NamedTuple):
    """One option of a subcommand, as the scripts complete it."""

    flag: str  # its long form, --format
    help: str
    aliases: tuple[str, ...] = ()  # its short forms, -f
    choices: tuple[str, ...] = ()  # the values it takes, where the parser lists them


def commands(build_parser) -> list[tuple[str, str, list[Option]]]:
    """(name, help, options) of every subcommand of ``build_parser()``'s parser, in --help's
    order."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    out = []
    for name, command in sub.choices.items():
        options = []
        for action in command._actions:
            short = tuple(f for f in action.option_strings if not f.startswith("--"))
            choices = tuple(map(str, action.choices or ())) if action.nargs != 0 else ()
            options += [Option(flag, action.help or "", short, choices)
                        for flag in action.option_strings if flag.startswith("--")]
        out.append((name, helps.get(name, ""), options))
    return out


def _options(entries) -> list[Option]:
    """A table's options as ``Option``s (a plain (flag, help) pair is one)."""
    return [Option(*entry) for entry in entries]


def _bash_words(words) -> str:
    """Words for ``compgen -W``, which expands its list again: each quoted, then the list."""
    return shlex.quote(" ".join(shlex.quote(w) for w in words))


def _bash_case(name: str, options: list[Option]) -> str:
    """The bash ``case`` branch of one subcommand: its options, and the values of those
    that take one of a list after them."""
    branch = f"        {shlex.quote(name)}) opts={_bash_words(o.flag for o in options)}"
    valued = [o for o in options if o.choices]
    if valued:
        branch += '\n            case "$prev" in ' + " ".join(
            f"{'|'.join(shlex.quote(f) for f in (o.flag, *o.aliases))}) "
            f"values={_bash_words(o.choices)} ;;" for o in valued) + " esac"
    return branch + " ;;"


def bash_script(table) -> str:
    cases = "\n".join(_bash_case(name, _options(options)) for name, _, options in table)
    names = _bash_words([*(name for name, _, _ in table), "--help", "--version"])
    return f"""# bash completion for irscope (irscope completion bash)
_irscope() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    local command="" opts="" values="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in -*) ;; *) command="${{COMP_WORDS[i]}}"; break ;; esac
    done
    if [[ -z "$command" ]]; then
        COMPREPLY=($(compgen -W {names} -- "$cur"))
        return
    fi
    case "$command" in
{cases}
    esac
    if [[ -n "$values" ]]; then
        COMPREPLY=($(compgen -W "$values" -- "$cur"))
    elif [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F _irscope irscope
"""


def _zsh_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "'\\''").replace(":", "\\:")


def _zsh_option(option: Option) -> str:
    """An ``_arguments`` spec: the option, its help, and the values it takes, if listed."""
    described = _zsh_quote(option.help).replace("[", "(").replace("]", ")")
    values = (":value:(" + " ".join(_zsh_quote(c).replace(" ", "\\ ") for c in option.choices)
              + ")") if option.choices else ""
    return f"'{_zsh_quote(option.flag)}[{described}]{values}'"


def zsh_script(table) -> str:
    described = "\n".join(f"    '{_zsh_quote(name)}:{_zsh_quote(help_)}'"
                          for name, help_, _ in table)
    cases = "\n".join(
        f"        {shlex.quote(name)}) _arguments '*:file:_files' "
        + " ".join(_zsh_option(option) for option in _options(options)) + " ;;"
        for name, _, options in table)
    return f"""#compdef irscope
# zsh completion for irscope (irscope completion zsh)
_irscope() {{
  local -a commands
  commands=(
{described}
  )
  if (( CURRENT == 2 )); then
    _describe 'irscope command' commands
    return
  fi
  case ${{words[2]}} in
{cases}
  esac
}}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
  _irscope "$@"
else
  compdef _irscope irscope
fi
"""


def _fish_quote(text: str) -> str:
    """``text`` as one fish word: as it is when plain, else single-quoted with its
    backslashes and quotes escaped (fish reads ``\\`` and ``\'`` inside single quotes,
    unlike POSIX shells)."""
    if FISH_PLAIN.fullmatch(text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_script(table) -> str:
    lines = ["# fish completion for irscope (irscope completion fish)",
             "complete -c irscope -f -n __fish_use_subcommand -l version -d 'print the version'"]
    for name, help_, options in table:
        word = _fish_quote(name)  # -a and -n are read again as fish when completing
        lines.append(f"complete -c irscope -f -n __fish_use_subcommand -a {_fish_quote(word)} "
                     f"-d {_fish_quote(help_)}")
        seen = _fish_quote(f"__fish_seen_subcommand_from {word}")
        for option in _options(options):
            shorts = "".join(f" -s {_fish_quote(a[1:])}" for a in option.aliases if len(a) == 2)
            values = (f" -x -a {_fish_quote(' '.join(map(_fish_quote, option.choices)))}"
                      if option.choices else "")  # -a is read again as fish
            lines.append(f"complete -c irscope -n {seen} -l {_fish_quote(option.flag[2:])}"
                         f"{shorts}{values} -d {_fish_quote(option.help.split(';')[0][:80])}")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    script = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell]
    print(script(commands(args.build_parser)), end="")
    return 0
