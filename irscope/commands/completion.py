"""`irscope completion SHELL`: a completion script for bash, zsh or fish, made from the parser.

The script lists every subcommand with its options, so it is regenerated with irscope:
`irscope completion bash > ~/.local/share/bash-completion/completions/irscope`.
"""

from __future__ import annotations

import argparse
import shlex

SHELLS = ("bash", "zsh", "fish")
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


def commands(build_parser) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(name, help, [(option, help)]) of every subcommand of ``build_parser()``'s parser, in
    --help's order."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    out = []
    for name, command in sub.choices.items():
        options = [(flag, action.help or "") for action in command._actions
                   for flag in action.option_strings if flag.startswith("--")]
        out.append((name, helps.get(name, ""), options))
    return out


def bash_script(table) -> str:
    cases = "\n".join(f"        {name}) opts={shlex.quote(' '.join(o for o, _ in options))} ;;"
                      for name, _, options in table)
    names = " ".join(name for name, _, _ in table)
    return f"""# bash completion for irscope (irscope completion bash)
_irscope() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" command="" opts="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in -*) ;; *) command="${{COMP_WORDS[i]}}"; break ;; esac
    done
    if [[ -z "$command" ]]; then
        COMPREPLY=($(compgen -W "{names} --help --version" -- "$cur"))
        return
    fi
    case "$command" in
{cases}
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F _irscope irscope
"""


def _zsh_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "'\\''").replace(":", "\\:")


def zsh_script(table) -> str:
    described = "\n".join(f"    '{name}:{_zsh_quote(help_)}'" for name, help_, _ in table)
    cases = "\n".join(
        f"        {name}) _arguments '*:file:_files' "
        + " ".join(f"'{opt}[{_zsh_quote(h).replace('[', '(').replace(']', ')')}]'"
                   for opt, h in options) + " ;;"
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


def fish_script(table) -> str:
    lines = ["# fish completion for irscope (irscope completion fish)",
             "complete -c irscope -f -n __fish_use_subcommand -l version -d 'print the version'"]
    for name, help_, options in table:
        lines.append(f"complete -c irscope -f -n __fish_use_subcommand -a {name} "
                     f"-d {shlex.quote(help_)}")
        for option, option_help in options:
            lines.append(f"complete -c irscope -n '__fish_seen_subcommand_from {name}' "
                         f"-l {option[2:]} -d {shlex.quote(option_help.split(';')[0][:80])}")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    script = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell]
    print(script(commands(args.build_parser)), end="")
    return 0
