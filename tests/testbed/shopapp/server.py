"""The shop: the user guide's example app, small. It keeps items in its Postgres and its Redis.

  POST /items   the body (text) becomes a row of table `items` in DATABASE_URL's database and an entry of the
                list `<REDIS_PREFIX>items` in REDIS_URL's Redis; answers 201 with what it stored
  GET /items    {"pg": [values, oldest first], "redis": [the same from the list]} as JSON
  DELETE /items every item goes (the rows and the list); answers {"deleted": rows deleted}
  GET /healthz  200 once every backend it was given answers (SELECT 1, PING), 503 with the reason otherwise
  GET /fresh    the same check on NEW connections, opened for this request and closed after it (what a pod that
                opens a connection per request sees: a password refused at login shows at once), 200 "ok" or 503

A backend whose URL is not set is left out (and said so at start): the app runs with what its needs give it.
PORT (default 3000). SIGTERM exits 0 at once. The URLs carry passwords: they are never printed.
"""

import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg2
import redis

DATABASE_URL = os.environ.get("DATABASE_URL", "")
REDIS_URL = os.environ.get("REDIS_URL", "")
PREFIX = os.environ.get("REDIS_PREFIX", "")
LOCK = threading.Lock()  # one connection each, shared by the handler threads


class Backends:
    """The app's connections, opened on first use and again after a failure."""

    def __init__(self):
        self.pg = None
        self.cache = redis.Redis.from_url(REDIS_URL, socket_timeout=2, socket_connect_timeout=2) if REDIS_URL \
            else None

    def db(self):
        if self.pg is None or self.pg.closed:
            self.pg = psycopg2.connect(DATABASE_URL, connect_timeout=2)
            self.pg.autocommit = True
            with self.pg.cursor() as cur:
                cur.execute("CREATE TABLE IF NOT EXISTS items (id serial PRIMARY KEY, value text NOT NULL)")
        return self.pg

    def check(self):
        """None when every backend answers, else why not (no secret in it)."""
        try:
            if DATABASE_URL:
                with self.db().cursor() as cur:
                    cur.execute("SELECT 1")
        except psycopg2.Error as exc:
            self.pg = None
            return f"pg: {type(exc).__name__}"
        try:
            if self.cache is not None:
                self.cache.ping()
        except redis.RedisError as exc:
            return f"redis: {type(exc).__name__}"
        return None

    def fresh(self):
        """None when every backend answers on a connection opened for this call, else why not (no secret in it)."""
        try:
            if DATABASE_URL:
                with psycopg2.connect(DATABASE_URL, connect_timeout=2) as pg, pg.cursor() as cur:
                    cur.execute("SELECT 1")
                pg.close()
        except psycopg2.Error as exc:
            return f"pg: {type(exc).__name__}"
        try:
            if REDIS_URL:
                client = redis.Redis.from_url(REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
                try:
                    client.ping()
                finally:
                    client.close()
        except redis.RedisError as exc:
            return f"redis: {type(exc).__name__}"
        return None

    def add(self, value):
        if DATABASE_URL:
            with self.db().cursor() as cur:
                cur.execute("INSERT INTO items (value) VALUES (%s)", (value,))
        if self.cache is not None:
            self.cache.rpush(PREFIX + "items", value)

    def clear(self):
        deleted = 0
        if DATABASE_URL:
            with self.db().cursor() as cur:
                cur.execute("DELETE FROM items")
                deleted = cur.rowcount
        if self.cache is not None:
            self.cache.delete(PREFIX + "items")
        return deleted

    def items(self):
        found = {}
        if DATABASE_URL:
            with self.db().cursor() as cur:
                cur.execute("SELECT value FROM items ORDER BY id")
                found["pg"] = [row[0] for row in cur.fetchall()]
        if self.cache is not None:
            found["redis"] = [v.decode() for v in self.cache.lrange(PREFIX + "items", 0, -1)]
        return found


BACKENDS = None


class Handler(BaseHTTPRequestHandler):
    def answer(self, status, body, kind="application/json"):
        data = (body if isinstance(body, str) else json.dumps(body)).encode() + b"\n"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/fresh":  # its own connections: no lock
            reason = BACKENDS.fresh()
            self.answer(503 if reason else 200, reason or "ok", "text/plain")
            return
        with LOCK:
            if self.path == "/healthz":
                reason = BACKENDS.check()
                self.answer(503 if reason else 200, reason or "ok", "text/plain")
            elif self.path == "/items":
                try:
                    self.answer(200, BACKENDS.items())
                except (psycopg2.Error, redis.RedisError) as exc:
                    BACKENDS.pg = None
                    self.answer(503, {"error": type(exc).__name__})
            else:
                self.answer(404, "not found", "text/plain")

    def do_POST(self):
        if self.path != "/items":
            self.answer(404, "not found", "text/plain")
            return
        value = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        with LOCK:
            try:
                BACKENDS.add(value)
                self.answer(201, {"stored": value})
            except (psycopg2.Error, redis.RedisError) as exc:
                BACKENDS.pg = None
                self.answer(503, {"error": type(exc).__name__})

    def do_DELETE(self):
        if self.path != "/items":
            self.answer(404, "not found", "text/plain")
            return
        with LOCK:
            try:
                self.answer(200, {"deleted": BACKENDS.clear()})
            except (psycopg2.Error, redis.RedisError) as exc:
                BACKENDS.pg = None
                self.answer(503, {"error": type(exc).__name__})

    def log_message(self, fmt, *args):  # the access log, without bodies (nor the loops' /fresh)
        if self.path != "/fresh":
            print(f"shop: {self.command} {self.path}", flush=True)


def main():
    global BACKENDS
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # PID 1 ignores SIGTERM without a handler
    port = int(os.environ.get("PORT", "3000"))
    BACKENDS = Backends()
    print(f"shop: port {port}, pg {'set' if DATABASE_URL else 'not set'}, redis {'set' if REDIS_URL else 'not set'}, "
          f"prefix {PREFIX!r}", flush=True)
    ThreadingHTTPServer(("", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
