"""``engramdb completion bash|zsh|fish``: scripts generated from the parser, which name
every command, alias and option (the tests walk the parser themselves), and which
complete for real in the shells installed here."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import cache

import pytest

from engramdb.cli._parser import build_parser

SHELLS = ("bash", "zsh", "fish")


@cache
def script(shell: str) -> str:
    """The script as the command prints it (``python -m engramdb.cli``: this checkout's
    code, whatever ``engramdb`` is on PATH)."""
    done = subprocess.run(
        [sys.executable, "-m", "engramdb.cli", "completion", shell],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def commands() -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Each command's names (its name, then its aliases) and parser, from the parser."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    by_parser: dict[int, list[str]] = {}
    for name, sub in subparsers.choices.items():
        by_parser.setdefault(id(sub), []).append(name)
    for names in by_parser.values():
        yield tuple(names), subparsers.choices[names[0]]


def flags(parser: argparse.ArgumentParser) -> list[str]:
    return [flag for action in parser._actions for flag in action.option_strings]


def section(shell: str, names: tuple[str, ...]) -> str:
    """The part of ``shell``'s script that completes the command ``names``."""
    text = script(shell)
    if shell == "fish":
        mark = f"__fish_seen_subcommand_from {' '.join(names)}'"
        return "\n".join(line for line in text.splitlines() if mark in line)
    start = text.index(f"{' ' * (8 if shell == 'bash' else 12)}{'|'.join(names)})\n")
    part = text[start : text.index(";;", start)]
    if shell == "bash":  # and the values of its options, in the case of "$command $prev"
        part += "\n".join(line for line in text.splitlines() if f'"{names[0]} -' in line)
    return part


def written(shell: str, flag: str) -> str:
    if shell != "fish":
        return flag
    return f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"


@pytest.mark.parametrize("shell", SHELLS)
def test_each_script_names_every_command_alias_and_option_of_the_parser(shell: str) -> None:
    """Walk the parser: every command and alias is offered after ``engramdb``, every
    option of a command in that command's part, and the global options before it."""
    text = script(shell)
    every = [name for names, _ in commands() for name in names]
    assert "remember" in every and "search" in every and "completion" in every
    for name in every:
        assert f" {name}" in text or f"'{name}:" in text, name
    for names, sub in commands():
        part = section(shell, names)
        missing = [flag for flag in flags(sub) if written(shell, flag) not in part]
        assert missing == [], f"{shell}: {names[0]} does not complete {missing}"
    for flag in flags(build_parser()):
        assert written(shell, flag) in text


@pytest.mark.parametrize("shell", SHELLS)
def test_each_script_offers_the_choices_argparse_has(shell: str) -> None:
    """--mode's legs, --format's formats, --on-conflict's answers, the shells."""
    for names, sub in commands():
        part = section(shell, names)
        for action in sub._actions:
            for choice in action.choices or ():
                if not isinstance(action, argparse._SubParsersAction):
                    assert str(choice) in part, (names[0], action.dest, choice)


def bash_complete(*words: str) -> list[str]:
    """What bash offers for ``words`` (the last one is the word being completed), through
    the function ``complete -p engramdb`` registers, called as bash would call it."""
    probe = (
        'eval "$SCRIPT"\n'
        "registration=$(complete -p engramdb)\n"
        "function=${registration##*-F }; function=${function%% *}\n"
        "COMP_WORDS=(" + " ".join(f"'{word}'" for word in words) + ")\n"
        f"COMP_CWORD={len(words) - 1}\n"
        '"$function" engramdb "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", probe],
        env={**os.environ, "SCRIPT": script("bash")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.split()


def test_bash_registers_the_completion_of_engramdb() -> None:
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", 'eval "$SCRIPT"; complete -p engramdb'],
        env={**os.environ, "SCRIPT": script("bash")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "complete -o default -F _engramdb engramdb"


def test_bash_completes_commands_options_and_their_choices() -> None:
    assert bash_complete("engramdb", "rec") == ["recall"]
    assert bash_complete("engramdb", "recall", "--to") == ["--top-k"]
    assert bash_complete("engramdb", "search", "--to") == ["--top-k"]  # the alias
    assert bash_complete("engramdb", "--db", "x.db", "recall", "q", "--ex") == ["--explain"]
    assert bash_complete("engramdb", "recall", "--mode", "") == ["hybrid", "vector", "lexical"]
    assert bash_complete("engramdb", "restore", "--on-conflict", "s") == ["skip"]
    assert bash_complete("engramdb", "completion", "") == list(SHELLS)
    assert bash_complete("engramdb", "--js") == ["--json"]
    assert bash_complete("engramdb", "--scope", "a/b", "li") == ["list"]
    assert bash_complete("engramdb", "recall", "--top-k", "") == []  # a number: no guess


def need(shell: str) -> str:
    path = shutil.which(shell)
    if path is None:
        pytest.skip(f"{shell} is not installed on this machine: its script is not checked")
    return path


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_script_is_valid_syntax_for_its_shell(shell: str) -> None:
    done = subprocess.run(
        [need(shell), "-n"], input=script(shell), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_fish_completes_commands_options_and_their_choices() -> None:
    fish = need("fish")

    def complete(line: str) -> list[str]:
        done = subprocess.run(
            [fish, "--no-config", "-c", f'eval "$SCRIPT"; complete -C "{line}"'],
            env={**os.environ, "SCRIPT": script("fish")},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return [row.split("\t")[0] for row in done.stdout.splitlines()]

    assert complete("engramdb rec") == ["recall"]
    assert complete("engramdb recall --to") == ["--top-k"]
    assert sorted(complete("engramdb recall --mode ")) == ["hybrid", "lexical", "vector"]
    assert complete("engramdb completion ") == sorted(SHELLS)


def test_the_completion_command_prints_a_script_and_refuses_another_shell(
    cli: Callable[..., tuple[int, str, str]],
) -> None:
    status, out, _ = cli("completion", "bash")
    assert (status, out) == (0, script("bash"))
    status, out, err = cli("completion", "tcsh")
    assert (status, out) == (2, "") and "invalid choice: 'tcsh'" in err
