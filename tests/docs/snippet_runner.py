"""Runs documentation snippets as a reader runs a pasted file, each in a fresh process.

``python -W error tests/docs/snippet_runner.py`` imports engramdb once, with pytest made
unimportable (a reader has engramdb, not our test tools), then reads directories from
stdin, one a line. For each it forks a child that runs ``snippet.py`` there as
``python snippet.py`` would (``__main__``, the directory first on ``sys.path``, its
other ``.py`` files importable), with stdout and stderr in ``output.txt`` beside it, and
answers the child's exit code on stdout. A child still running after 300 s is ended by
its alarm, so a snippet that hangs fails instead of stalling the test.

The child starts with nothing of the snippets before it: a fresh namespace in a fresh
process whose only history is ``import engramdb``, which is how every snippet starts
anyway; forking it costs milliseconds where a new interpreter's import costs most of a
second.
"""

import os
import runpy
import signal
import sys
import traceback

sys.modules["pytest"] = sys.modules["_pytest"] = None  # type: ignore[assignment]
import engramdb  # noqa: E402, F401  (loaded once, before the forks)


def run(directory: str) -> None:
    """In the child: run ``directory/snippet.py`` as ``__main__`` and exit with its code."""
    signal.alarm(300)
    os.chdir(directory)
    output = os.open("output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.environ["XDG_CONFIG_HOME"] = os.path.join(directory, "config")  # not yours
    sys.path[0] = directory
    sys.argv = ["snippet.py"]
    code = 0
    try:
        runpy.run_path("snippet.py", run_name="__main__")
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


for line in sys.stdin:
    child = os.fork()
    if child == 0:
        run(line.rstrip("\n"))
    _, status = os.waitpid(child, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
