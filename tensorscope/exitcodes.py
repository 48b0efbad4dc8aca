"""Exit codes of the `tensorscope` command (the README table is generated from these)."""

import enum


class ExitCode(enum.IntEnum):
    """What `tensorscope` exits with.

    `run` mirrors plain python: the program's own exit status (0, 1 for an
    uncaught exception, n for ``sys.exit(n)``), so only the values below that
    python never uses for a program are tensorscope's own.
    """

    #: run: the program exited 0. explain: nothing found.
    OK = 0
    #: run: the program raised (as python). explain: a failure or hazard was diagnosed.
    FOUND = 1
    #: usage error: missing file, a directory, a bad option, empty input (python also uses 2 for a missing file).
    USAGE = 2
    #: explain - / --message: the text is not a failure tensorscope knows.
    UNRECOGNISED = 3
    #: an internal error in tensorscope itself (please report it; --traceback shows it).
    INTERNAL = 4
    #: --fail-on hazard|diagnosis found what it names; replaces the program's own exit status
    #: (python's handling of the program is untouched otherwise: its output is the same).
    FAIL_ON = 5
    #: -o FILE could not be written (a full disk, a file size limit, /dev/full): the previous FILE is
    #: untouched. Also: the report could not be printed on stdout (full, closed, a pipe whose reader left).
    #: Replaces the program's status, 5 and 124; a run ended by a signal still dies by it.
    NOT_WRITTEN = 6
    #: --timeout expired; the partial report is still produced.
    TIMEOUT = 124
    #: interrupted (Ctrl-C / KeyboardInterrupt); like python, the process dies by SIGINT (shells show 130).
    INTERRUPTED = 130
