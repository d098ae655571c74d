"""``engramdb completion bash|zsh|fish``: a shell completion script, generated from the
parser.

One source: :func:`spec` walks ``build_parser()`` (every command and alias, the global
options and each command's options, the choices argparse has for an option or an
argument, and whether a value is a file), and one small renderer per shell writes a
static script from it (no third-party package, nothing run at completion time). A new
command or option is completed as soon as the parser defines it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from ._commands import Context
from ._parser import COMMANDS, build_parser, command

__all__ = ["SHELLS", "script", "spec"]

# A value or argument named like this is a file (or a SQLite file): the shells offer
# file names for it.
_PATHS = frozenset({"FILE", "PATH", "TARGET"})
# Every word a script holds (flags, command names, choices) is one of these, so that it
# needs no quoting in any of the three shells.
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/+=-]*|-{1,2}[A-Za-z0-9][A-Za-z0-9_-]*")


@dataclass(frozen=True, slots=True)
class Option:
    """One option: its flags, the choices of its value (empty: any value), whether it
    takes a value, whether the value is a file, whether it may be repeated, its help."""

    flags: tuple[str, ...]
    takes_value: bool
    choices: tuple[str, ...]
    path: bool
    repeat: bool
    help: str


@dataclass(frozen=True, slots=True)
class Positional:
    name: str
    choices: tuple[str, ...]
    path: bool
    optional: bool


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str
    aliases: tuple[str, ...]
    summary: str
    options: tuple[Option, ...]  # the global ones included: they go after the command too
    positionals: tuple[Positional, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


@dataclass(frozen=True, slots=True)
class Spec:
    """What completion knows: the options before the command and every command."""

    options: tuple[Option, ...]
    commands: tuple[CommandSpec, ...]


def _word(text: str) -> str:
    if not _WORD.fullmatch(text):
        raise ValueError(f"{text!r} cannot go in a completion script unquoted")
    return text


def _is_path(action: argparse.Action) -> bool:
    return str(action.metavar or action.dest).upper() in _PATHS


def _option(action: argparse.Action) -> Option:
    return Option(
        flags=tuple(_word(flag) for flag in action.option_strings),
        takes_value=action.nargs != 0,
        choices=tuple(_word(str(choice)) for choice in action.choices or ()),
        path=_is_path(action),
        repeat=isinstance(action, argparse._AppendAction),
        help=" ".join((action.help or "").split()),
    )


def _options(parser: argparse.ArgumentParser) -> tuple[Option, ...]:
    return tuple(
        _option(action)
        for action in parser._actions
        if action.option_strings and action.help != argparse.SUPPRESS
    )


def spec(parser: argparse.ArgumentParser | None = None) -> Spec:
    """The commands and options of ``parser`` (default: ``build_parser()``, the servers'
    options included)."""
    parser = parser or build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = []
    for name, entry in COMMANDS.items():
        sub: argparse.ArgumentParser = subparsers.choices[name]
        positionals = tuple(
            Positional(
                name=str(action.metavar or action.dest).lower(),
                choices=tuple(_word(str(choice)) for choice in action.choices or ()),
                path=_is_path(action),
                optional=action.nargs in ("?", "*"),
            )
            for action in sub._actions
            if not action.option_strings
        )
        commands.append(
            CommandSpec(
                name=_word(name),
                aliases=tuple(_word(alias) for alias in entry.aliases),
                summary=entry.summary,
                options=_options(sub),
                positionals=positionals,
            )
        )
    return Spec(_options(parser), tuple(commands))


def _describe(text: str) -> str:
    """A description every shell takes inside single quotes (and zsh inside brackets):
    no quotes, brackets, backslashes or dollars, one line, at most 70 characters."""
    text = re.sub(r"[\[\]'\"`\\$]", "", " ".join(text.split()))
    return text if len(text) <= 70 else text[:67].rstrip() + "..."


def _bash(spec: Spec) -> str:
    def words(items: tuple[str, ...] | list[str]) -> str:
        return " ".join(items)

    value_options = sorted(
        {flag for o in spec.options for flag in o.flags if o.takes_value}
        | {flag for c in spec.commands for o in c.options for flag in o.flags if o.takes_value}
    )
    lines = [
        "# bash completion for engramdb (generated by `engramdb completion bash`)",
        '# Load it from ~/.bashrc: eval "$(engramdb completion bash)"',
        "_engramdb() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="" command="" i word',
        '    (( COMP_CWORD > 0 )) && prev="${COMP_WORDS[COMP_CWORD-1]}"',
        "    for (( i = 1; i < COMP_CWORD; i++ )); do",
        '        word="${COMP_WORDS[i]}"',
        '        case "$word" in',
        f"            {'|'.join(value_options)}) (( i++ )) ;;",
        "            -*) ;;",
        '            *) command="$word"; break ;;',
        "        esac",
        "    done",
        '    local options="" choices=""',
        '    case "$command" in',
        '        "")',
        f'            options="{words([f for o in spec.options for f in o.flags])}"',
        f'            choices="{words([n for c in spec.commands for n in c.names])}" ;;',
    ]
    for entry in spec.commands:
        positional = [c for p in entry.positionals for c in p.choices]
        lines += [
            f"        {'|'.join(entry.names)})",
            f'            options="{words([f for o in entry.options for f in o.flags])}"',
            f'            choices="{words(positional)}" ;;',
        ]
    lines += ["    esac"]
    # the value of an option: its choices, a file name, or nothing to offer
    lines += ['    case "$command $prev" in']
    scoped = [((), spec.options), *((c.names, c.options) for c in spec.commands)]
    for names, options in scoped:
        for option in options:
            if not option.takes_value:
                continue
            keys = "|".join(f'"{name} {flag}"' for name in names or ("",) for flag in option.flags)
            if option.choices:
                reply = f'COMPREPLY=( $(compgen -W "{words(option.choices)}" -- "$cur") )'
            elif option.path:
                reply = 'COMPREPLY=( $(compgen -f -- "$cur") )'
            else:
                reply = "COMPREPLY=()"
            lines.append(f"        {keys}) {reply}; return 0 ;;")
    lines += [
        "    esac",
        '    if [[ "$cur" == -* ]]; then',
        '        COMPREPLY=( $(compgen -W "$options" -- "$cur") )',
        '    elif [[ -n "$choices" ]]; then',
        '        COMPREPLY=( $(compgen -W "$choices" -- "$cur") )',
        "    else",
        "        COMPREPLY=()  # complete -o default: bash offers file names",
        "    fi",
        "    return 0",
        "}",
        "complete -o default -F _engramdb engramdb",
    ]
    return "\n".join(lines) + "\n"


def _zsh_option(option: Option) -> str:
    """One ``_arguments`` spec per flag, e.g. ``'--mode[which legs rank]:mode:(a b)'``."""
    specs = []
    for flag in option.flags:
        text = f"{'*' if option.repeat else ''}{flag}[{_describe(option.help)}]"
        if option.takes_value:
            name = flag.lstrip("-")
            if option.choices:
                text += f":{name}:({' '.join(option.choices)})"
            else:
                text += f":{name}:{'_files' if option.path else ' '}"
        specs.append(f"'{text}'")
    return " \\\n        ".join(specs)


def _zsh(spec: Spec) -> str:
    lines = [
        "#compdef engramdb",
        "# zsh completion for engramdb (generated by `engramdb completion zsh`)",
        "# Save it as _engramdb in a directory of $fpath, or load it from ~/.zshrc:",
        '# eval "$(engramdb completion zsh)" (after compinit)',
        "",
        "_engramdb_commands() {",
        "    local -a commands",
        "    commands=(",
    ]
    for entry in spec.commands:
        for name in entry.names:
            lines.append(f"        '{name}:{_describe(entry.summary)}'")
    lines += [
        "    )",
        "    _describe -t commands 'engramdb command' commands",
        "}",
        "",
        "_engramdb() {",
        '    local curcontext="$curcontext" state line ret=1',
        "    typeset -A opt_args",
        "    _arguments -C \\",
    ]
    lines += [f"        {_zsh_option(option)} \\" for option in spec.options]
    lines += [
        "        '1:command:_engramdb_commands' \\",
        "        '*:: :->arguments' && ret=0",
        '    if [[ "$state" == arguments ]]; then',
        "        case $words[1] in",
    ]
    for entry in spec.commands:
        arguments = [_zsh_option(option) for option in entry.options]
        for number, positional in enumerate(entry.positionals, 1):
            if positional.choices:
                action = f"({' '.join(positional.choices)})"
            elif positional.path:
                action = "_files"
            else:  # free text: a message, and the options once a word starts with -
                action = f'_guard "^-*" {positional.name}'
            colon = "::" if positional.optional else ":"
            arguments.append(f"'{number}{colon}{positional.name}:{action}'")
        lines.append(f"            {'|'.join(entry.names)})")
        lines.append("                _arguments \\")
        lines += [f"        {argument} \\" for argument in arguments[:-1]]
        lines.append(f"        {arguments[-1]} && ret=0 ;;")
    lines += [
        "        esac",
        "    fi",
        "    return ret",
        "}",
        "",
        'if [[ "$funcstack[1]" == _engramdb ]]; then',
        '    _engramdb "$@"',
        "else",
        "    compdef _engramdb engramdb",
        "fi",
    ]
    return "\n".join(lines) + "\n"


def _fish_option(option: Option, condition: str) -> str:
    parts = ["complete -c engramdb"]
    if condition:
        parts.append(f"-n '{condition}'")
    for flag in option.flags:
        if flag.startswith("--"):
            parts.append(f"-l {flag[2:]}")
        elif len(flag) == 2:
            parts.append(f"-s {flag[1:]}")
        else:
            parts.append(f"-o {flag[1:]}")
    if option.takes_value:
        if option.choices:
            parts.append(f"-x -a '{' '.join(option.choices)}'")
        else:
            parts.append("-r -F" if option.path else "-x")
    parts.append(f"-d '{_describe(option.help)}'")
    return " ".join(parts)


def _fish(spec: Spec) -> str:
    every = " ".join(name for entry in spec.commands for name in entry.names)
    before = f"not __fish_seen_subcommand_from {every}"
    lines = [
        "# fish completion for engramdb (generated by `engramdb completion fish`)",
        "# Save it as ~/.config/fish/completions/engramdb.fish",
        "complete -c engramdb -f",
    ]
    lines += [_fish_option(option, before) for option in spec.options]
    for entry in spec.commands:
        for name in entry.names:
            lines.append(
                f"complete -c engramdb -n '{before}' -a {name} -d '{_describe(entry.summary)}'"
            )
    for entry in spec.commands:
        after = f"__fish_seen_subcommand_from {' '.join(entry.names)}"
        lines += [_fish_option(option, after) for option in entry.options]
        for positional in entry.positionals:
            if positional.choices:
                lines.append(
                    f"complete -c engramdb -n '{after}' -a '{' '.join(positional.choices)}'"
                )
            elif positional.path:
                lines.append(f"complete -c engramdb -n '{after}' -F")
    return "\n".join(lines) + "\n"


SHELLS: dict[str, Callable[[Spec], str]] = {"bash": _bash, "zsh": _zsh, "fish": _fish}


def script(shell: str, parser: argparse.ArgumentParser | None = None) -> str:
    """The completion script of ``shell`` (bash, zsh or fish) for ``parser``."""
    return SHELLS[shell](spec(parser))


def _completion_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("shell", choices=list(SHELLS), help="bash, zsh or fish")


@command(
    "completion",
    "print the completion script of a shell (bash, zsh or fish) to load in its start-up file",
    options=_completion_options,
    # it reads no setting and prints a script, never a stored text or JSON
    ignores=frozenset({"db", "embedder", "scope", "session", "config", "json", "raw"}),
)
def completion(ctx: Context) -> int:
    sys.stdout.write(script(ctx.args.shell))
    return 0
