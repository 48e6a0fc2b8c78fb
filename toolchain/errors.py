"""The one error tree: every failure the toolchain reports is an AppRafterError that knows its exit code, its
lines and its retry class (whether doing the same again may succeed: the operator's loop requeues those).

    AppRafterError                 exit 2 unless a subclass says otherwise
    ├── UserError                  exit 1, not retryable: the user's input, one Problem (file:line:col: field: message)
    │   ├── cmp.argo_env.ContractError, platform_stack.errors.StackError, compatibility.shape.Unreadable, ...
    └── ToolFailure                exit 2, retryable: a tool, registry or environment problem, with its remedy
        └── toolchain.tools.ToolError, renderer.cue.Budget, platform_stack.errors.StackToolError, RegistryFailure, ...

It lives in the base layer so that every package, toolchain included, raises into the same tree; the
edges (apprafter/errors.py) turn any AppRafterError into stderr lines and its exit code. The controller runtime
owns its errors (controller_runtime.errors.KubeFailure: KubeError, retryable by HTTP status, and KubeConfigError):
the CLI reports them as a ToolFailure, the operator's manager maps them by their retry class as it maps these.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from toolchain.record import TYPE_CHECKING, Record
from toolchain.regex import lazy

if TYPE_CHECKING:
    from typing import ClassVar

__all__ = ["TOOL_EXIT", "USER_EXIT", "AppRafterError", "Problem", "ToolFailure", "UserError", "field_path",
           "one_line"]

USER_EXIT, TOOL_EXIT = 1, 2
_IDENTIFIER = lazy(r"[A-Za-z_$#][A-Za-z0-9_$#]*|\d+")
# Line breaks and other control characters a user's label or value may carry: escaped when printed.
_CONTROL = lazy(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def field_path(path: Sequence[str | int]) -> str:
    """A field path the way cue prints one: labels that are not identifiers are quoted (`env."a b"`)."""
    return ".".join(str(p) if _IDENTIFIER.fullmatch(str(p)) else _quote(str(p)) for p in path)


def _quote(label: str) -> str:
    return '"' + one_line(label.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def one_line(text: str) -> str:
    """text with every line break and control character escaped, so a problem is always one line."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class AppRafterError(Exception):
    """Base of every failure the toolchain reports on purpose (anything else escaping is a bug)."""

    exit_code: ClassVar[int] = TOOL_EXIT
    retry: ClassVar[bool] = True  # the class's retry class; `retryable` may refine it per instance

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed later without anyone changing the input (a registry back, a timeout)."""
        return self.retry

    def lines(self) -> list[str]:
        """What to print on stderr, one line per problem."""
        return [str(self)]


class Problem(Record):  # a Record, not a dataclass or typing.NamedTuple: start-up (toolchain.record)
    """One problem in the user's file, printed as `file:line:col: field: message` (ordered by position)."""

    file: str
    line: int
    col: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.col}" if self.line else self.file
        text = f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        return one_line(text)


class UserError(AppRafterError):
    """The user's input is invalid; carries every problem found, in file order."""

    exit_code = USER_EXIT
    retry = False

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = sorted(set(problems))
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


class ToolFailure(AppRafterError):
    """A tool or environment problem (cue missing, crashed, out of time, a registry down); names the remedy."""

    def lines(self) -> list[str]:
        return [f"apprafter: {self}"]
