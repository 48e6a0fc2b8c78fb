"""The one way a file a user names is read: a regular file (never a FIFO or device), inside its root, bounded.

Opening a FIFO blocks until someone writes to it and a device can stream forever, so the file is opened
non-blocking and checked with fstat on the open descriptor (no race between the check and the read); at
most `max_bytes` are read whatever the file claims to hold. With `root`, a path that resolves outside it
(a symlink, '..') is refused before anything is read, so no byte of such a file is ever quoted.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from renderer.errors import Problem, UserError

MAX_BYTES = 1 << 20  # text inputs: an Application, a platform file, a CR, overrides
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def absolute(path: Path | str) -> str:
    """The path made absolute without resolving symlinks (the form the user named)."""
    return os.path.abspath(path)


def shown(path: Path) -> str:
    """How a path is named in messages: relative to the working directory when below it."""
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


def _refuse(display: str, message: str) -> UserError:
    return UserError([Problem(display, 1, 1, "", message)])


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def inside(path: Path, root: Path) -> bool:
    """Whether path, with every symlink resolved, is root or below it (root resolved too)."""
    real, real_root = os.path.realpath(path), os.path.realpath(root)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def read_bytes(path: Path, *, display: str | None = None, root: Path | None = None, root_name: str | None = None,
               max_bytes: int = MAX_BYTES, what: str = "the file") -> bytes:
    """The bytes of a regular file; UserError naming the file for anything else.

    `root_name` says what root is in messages (default: its path)."""
    display = display or shown(path)
    where = root_name or (shown(Path(root)) if root is not None else "")
    if root is not None and not inside(path, root):
        raise _refuse(display, f"refused: {what} resolves outside {where} (a symlink or '..' leaves it)")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            raise _refuse(display, f"refused: {what} is a symlink that does not resolve to a file"
                          + (f" inside {where}" if where else "")) from None
        raise _refuse(display, f"cannot read {what}: no such file") from None
    except OSError as e:
        raise _refuse(display, f"cannot read {what}: {e.strerror}") from None
    if not stat.S_ISREG(mode):
        raise _refuse(display, f"refused: {what} is {_kind(mode)}, not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise _refuse(display, f"cannot read {what}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between stat and open
            raise _refuse(display, f"refused: {what} is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise _refuse(display, f"refused: {what} is larger than {max_bytes} bytes")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 16, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as e:
        raise _refuse(display, f"cannot read {what}: {e.strerror}") from None
    finally:
        os.close(fd)
    if total > max_bytes:
        raise _refuse(display, f"refused: {what} is larger than {max_bytes} bytes")
    return b"".join(chunks)


def decode_text(data: bytes, display: str) -> str:
    """UTF-8 text without NUL bytes; UserError at the line and column of the first bad byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start].decode("utf-8", errors="replace")
        line, col = line_col(before, len(before))
        raise UserError([Problem(display, line, col, "", "not UTF-8 text")]) from None
    nul = text.find("\0")
    if nul >= 0:
        raise UserError([Problem(display, *line_col(text, nul), "", "a NUL byte is not allowed in a text file")])
    return text


def read_text(path: Path, *, display: str | None = None, root: Path | None = None, root_name: str | None = None,
              max_bytes: int = MAX_BYTES, what: str = "the file") -> str:
    """A regular file's UTF-8 text (see read_bytes and decode_text)."""
    display = display or shown(path)
    data = read_bytes(path, display=display, root=root, root_name=root_name, max_bytes=max_bytes, what=what)
    return decode_text(data, display)


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
