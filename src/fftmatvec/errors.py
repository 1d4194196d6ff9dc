"""Exception classes shared by the library and the command line.

``FftmatvecError`` is the base of every error the package raises on purpose;
the CLI prints its message as one line and exits 1.  ``ConfigError`` marks a
usage or configuration mistake (exit 2).
"""


class FftmatvecError(Exception):
    """An expected failure with a message meant for the user."""


class ConfigError(FftmatvecError, ValueError):
    """A bad argument, option, precision code or configuration key."""


class FileFormatError(FftmatvecError):
    """A matrix or vector file that is missing, corrupt or inconsistent.

    The message names the file and the mismatch.
    """
