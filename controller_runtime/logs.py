"""Structured logs: one JSON object per line on stderr, with the object's namespace/name as fields."""

from __future__ import annotations

import datetime
import json
import logging
import sys

__all__ = ["JsonFormatter", "setup"]

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """{"ts", "level", "logger", "msg", ...extra fields}; a traceback goes in "trace"."""

    def format(self, record: logging.LogRecord) -> str:
        data = {"ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
                "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        data.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            data["trace"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def setup(level: str = "info", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
