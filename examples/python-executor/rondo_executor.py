#!/usr/bin/env python3
"""A rondo executor in Python (executor protocol version 1).

Written from ``docs/executor-protocol.md`` alone; section numbers (§n) below
refer to that document.  Dependencies: the standard library, ``pika`` (AMQP)
and ``redis`` (redis-py).

Threads and who owns what:

* **amqp** owns the pika ``BlockingConnection`` (pika is not thread-safe).
  It declares the topology, consumes the executor and control queues,
  dead-letters malformed messages, acks/nacks deliveries and publishes every
  event.  Other threads hand it work through a call queue and wake it with
  ``add_callback_threadsafe`` (§12).
* **registrar** renews the lease and writes the registry hash (§3); it talks
  only to Redis, so no handler and no broker stall can delay the lease.
* **job lines** (a small thread pool): every job id has a serial mailbox, so
  all decisions about one job (block strategy, claims, kills, turns) happen
  one at a time and in arrival order, while different jobs proceed side by
  side (§7.1).
* **run threads**: each started trigger gets a supervisor thread (timeout,
  kill and cover grace, result) and a handler thread.  A handler that ignores
  its cancellation is abandoned after the 1 s grace; Python cannot kill a
  thread, so it keeps running in the background but no longer holds a slot.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import functools
import json
import logging
import os
import queue
import random
import re
import secrets
import signal
import socket
import sys
import threading
import time
import urllib.parse
from typing import Any, Callable, Iterable, Optional

import pika
import pika.exceptions
import redis

log = logging.getLogger("rondo_executor")

PROTOCOL_VERSION = 1
NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")

TRIGGER_TYPES = frozenset({"CRON", "MISFIRE", "MANUAL", "RETRY", "PARENT"})
SERIAL_EXECUTION = "SERIAL_EXECUTION"
DISCARD_LATER = "DISCARD_LATER"
COVER_EARLY = "COVER_EARLY"
BLOCK_STRATEGIES = frozenset({SERIAL_EXECUTION, DISCARD_LATER, COVER_EARLY})

MAX_TRIGGER_ID_BYTES = 512  # §10
MAX_MSG_BYTES = 4096  # §7.6
MAX_LOG_LINE_BYTES = 16 * 1024  # §8.3
MAX_EVENTS_PER_MESSAGE = 500  # §8.1
MAX_EVENTS_MESSAGE_BYTES = 1 << 20  # §8.1, "about 1 MiB"
MAX_LINES_PER_EVENT = 500  # §8.3

KILL_GRACE_S = 1.0  # §7.2, §7.3: a cancelled handler gets 1 s to return
PUBLISH_GRACE_S = 5.0  # §9.4 step 4
CONTROL_RETRY_S = 5.0  # §4: retry a locked control queue every 5 s
CONTROL_PREFETCH = 16  # §4
REQUEUE_DELAY_S = 1.0  # §9.2
RUNNING_JOBS_COALESCE_S = 0.05  # §3.2: full write 50 ms after running_jobs changed
CLAIM_TRIES = 3  # §6.2
# §3.2: the drain allowance added to the hash TTL on retire is
# shutdown_grace_ms + 1 s kill grace + 5 s publish grace + 2 s abandon wait
# + 10 s hook timeout.
DRAIN_EXTRA_MS = 18_000

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def now_ms() -> int:
    """Milliseconds since the Unix epoch, UTC (the protocol's clock)."""
    return time.time_ns() // 1_000_000


def to_json(value: Any) -> str:
    """Compact JSON, UTF-8 text kept as is (like the Rust side's serde_json)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def cut_utf8(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, ``…`` marking a cut."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    ellipsis = "…"
    keep = limit - len(ellipsis.encode("utf-8"))
    return raw[:keep].decode("utf-8", "ignore") + ellipsis


def redact_url(url: str) -> str:
    """The URL with its password replaced, for logs."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class Backoff:
    """Jittered exponential backoff."""

    def __init__(self, first_s: float, cap_s: float) -> None:
        self._first, self._cap, self._next = first_s, cap_s, first_s

    def next(self) -> float:
        delay = self._next
        self._next = min(self._cap, self._next * 2)
        return delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self._next = self._first


# --------------------------------------------------------------------------
# Configuration


@dataclasses.dataclass(frozen=True)
class Config:
    namespace: str
    redis_url: str
    amqp_url: str
    app: str
    executor_id: str
    lease_ms: int
    heartbeat_ms: int
    dead_after_ms: int
    dedupe_ttl_s: int
    prefetch: int
    shutdown_grace_ms: int
    log_flush_ms: int

    @property
    def hash_ttl_ms(self) -> int:
        """§3.1: 2 × max(dead_after_ms, 3 × heartbeat_ms)."""
        return 2 * max(self.dead_after_ms, 3 * self.heartbeat_ms)

    @property
    def lease_tick_s(self) -> float:
        """§3.2: the lease is renewed every lease_ms / 4 (at least 1 ms)."""
        return max(self.lease_ms // 4, 1) / 1000


# (flag, environment variable, default, type, help).  The environment names
# follow the cluster's RONDO_<SECTION>_<KEY> convention.
OPTIONS: list[tuple[str, str, Any, type, str]] = [
    ("--namespace", "RONDO_NAMESPACE", "rondo", str, "cluster namespace"),
    ("--redis-url", "RONDO_REDIS_URL", "redis://127.0.0.1:6379", str, "Redis URL"),
    (
        "--amqp-url",
        "RONDO_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
        str,
        "RabbitMQ URL",
    ),
    ("--app", "RONDO_EXECUTOR_APP", None, str, "executor group (required)"),
    ("--id", "RONDO_EXECUTOR_ID", None, str, "executor id (default <app>-<hostname>)"),
    ("--lease-ms", "RONDO_REGISTRY_LEASE_MS", 2000, int, "registry.lease_ms"),
    ("--heartbeat-ms", "RONDO_REGISTRY_HEARTBEAT_MS", 30000, int, "registry.heartbeat_ms"),
    ("--dead-after-ms", "RONDO_REGISTRY_DEAD_AFTER_MS", 90000, int, "registry.dead_after_ms"),
    ("--dedupe-ttl-s", "RONDO_EXECUTOR_DEDUPE_TTL_S", 604800, int, "executor.dedupe_ttl_s"),
    ("--prefetch", "RONDO_EXECUTOR_PREFETCH", 64, int, "executor.prefetch"),
    (
        "--shutdown-grace-ms",
        "RONDO_EXECUTOR_SHUTDOWN_GRACE_MS",
        10000,
        int,
        "executor.shutdown_grace_ms",
    ),
    ("--log-flush-ms", "RONDO_EXECUTOR_LOG_FLUSH_MS", 500, int, "executor.log_flush_ms"),
    ("--log-level", "RONDO_LOG_LEVEL", "INFO", str, "this process's own log level"),
]


def default_executor_id(app: str) -> str:
    """§2: ``<app>-<hostname>``, other characters replaced by ``-``, 64 bytes."""
    host = re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname())
    return f"{app}-{host}"[:64]


def parse_config(argv: Optional[list[str]]) -> tuple[Config, str]:
    parser = argparse.ArgumentParser(
        description="rondo executor (protocol v1) in Python",
        epilog="Every flag falls back to the environment variable shown.",
    )
    for flag, env, default, kind, text in OPTIONS:
        shown = redact_url(default) if flag.endswith("-url") else default
        parser.add_argument(
            flag,
            type=kind,
            default=os.environ.get(env, default),
            # argparse %-formats help texts; the AMQP default holds "%2f".
            help=f"{text} (env {env}, default {shown})".replace("%", "%%"),
        )
    args = parser.parse_args(argv)
    if not args.app:
        parser.error("--app (or RONDO_EXECUTOR_APP) is required")
    args.id = args.id or default_executor_id(args.app)
    for flag, value in (("--namespace", args.namespace), ("--app", args.app), ("--id", args.id)):
        if not NAME_RE.fullmatch(value):
            parser.error(f"{flag} must match [A-Za-z0-9_-]{{1,64}}, got {value!r}")
    for flag, value, low in (
        ("--lease-ms", args.lease_ms, 1),
        ("--heartbeat-ms", args.heartbeat_ms, 1),
        ("--dead-after-ms", args.dead_after_ms, 1),
        ("--dedupe-ttl-s", args.dedupe_ttl_s, 1),
        ("--prefetch", args.prefetch, 1),
        ("--shutdown-grace-ms", args.shutdown_grace_ms, 0),
        ("--log-flush-ms", args.log_flush_ms, 1),
    ):
        if int(value) < low:
            parser.error(f"{flag} must be at least {low}, got {value}")
    if args.prefetch > 65535:
        parser.error("--prefetch must be at most 65535")
    config = Config(
        namespace=args.namespace,
        redis_url=args.redis_url,
        amqp_url=args.amqp_url,
        app=args.app,
        executor_id=args.id,
        lease_ms=args.lease_ms,
        heartbeat_ms=args.heartbeat_ms,
        dead_after_ms=args.dead_after_ms,
        dedupe_ttl_s=args.dedupe_ttl_s,
        prefetch=args.prefetch,
        shutdown_grace_ms=args.shutdown_grace_ms,
        log_flush_ms=args.log_flush_ms,
    )
    return config, args.log_level


class Names:
    """Every Redis key and AMQP name an executor touches (§2)."""

    def __init__(self, config: Config) -> None:
        ns, app, eid = config.namespace, config.app, config.executor_id
        self.ns = ns
        self.registry = f"{ns}:registry:{app}"
        self.executor_hash = f"{ns}:executor:{eid}"
        self.trigger_exchange = f"{ns}.triggers"
        # Our routing key on the (topic) trigger exchange.
        self.trigger_key = f"{app}.{eid}"
        self.control_exchange = f"{ns}.control"
        self.events_exchange = f"{ns}.events"
        self.dlx = f"{ns}.dlx"
        self.exec_queue = f"{ns}.exec.{app}.{eid}"
        self.control_queue = f"{ns}.ctl.{eid}"
        self.dead_queue = f"{ns}.dead"
        # The broker user every message is signed with (AMQP ``user_id``,
        # §8.1): the one the connection signs in as.
        self.publisher = pika.URLParameters(config.amqp_url).credentials.username

    def registry_of(self, app: str) -> str:
        return f"{self.ns}:registry:{app}"

    def dedupe(self, app: str, trigger_id: str) -> str:
        return f"{self.ns}:dedupe:{app}:{trigger_id}"


# --------------------------------------------------------------------------
# Wire formats: trigger batch (§5), control message (§7.3), marks (§6), results (§8)


class Malformed(Exception):
    """A message to dead-letter; the text is its ``x-rondo-reason`` (§10)."""


@dataclasses.dataclass(frozen=True)
class Trigger:
    trigger_id: str
    job_id: int
    group: str
    executor_id: str
    handler: str
    params: str
    trigger_type: str
    fire_ms: int
    sent_ms: int
    shard_index: int
    shard_total: int
    timeout_s: int
    block: str
    retry_count: int
    # The object as received: a hand-back republishes it unchanged (§9.4).
    raw: dict = dataclasses.field(repr=False, compare=False)


def _is_int(value: Any, low: int, high: int) -> bool:
    # bool is an int subclass in Python; JSON true/false are not integers.
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


_STR = ("a string", lambda v: isinstance(v, str))
_U32 = ("an unsigned 32-bit integer", lambda v: _is_int(v, 0, U32_MAX))
_U64 = ("an unsigned 64-bit integer", lambda v: _is_int(v, 0, U64_MAX))
_I64 = ("a 64-bit integer", lambda v: _is_int(v, I64_MIN, I64_MAX))

TRIGGER_FIELDS = [
    ("trigger_id", _STR),
    ("job_id", _U64),
    ("group", _STR),
    ("executor_id", _STR),
    ("handler", _STR),
    ("params", _STR),
    ("trigger_type", _STR),
    ("fire_ms", _I64),
    ("sent_ms", _I64),
    ("shard_index", _U32),
    ("shard_total", _U32),
    ("timeout_s", _U32),
    ("block", _STR),
    ("retry_count", _U32),
]


def _field(obj: dict, name: str, spec: tuple[str, Callable[[Any], bool]], where: str) -> Any:
    if name not in obj:
        raise ValueError(f"missing field `{name}`{where}")
    kind, check = spec
    if not check(obj[name]):
        raise ValueError(f"field `{name}`{where} is not {kind}: {to_json(obj[name])[:80]}")
    return obj[name]


def _version(doc: Any, what: str) -> None:
    """Checks ``v`` first: a later version may change everything else."""
    if not isinstance(doc, dict):
        raise Malformed(f"malformed {what}: expected a JSON object")
    if "v" not in doc:
        raise Malformed(f"malformed {what}: missing field `v`")
    version = doc["v"]
    if not _is_int(version, I64_MIN, U64_MAX):
        raise Malformed(f"malformed {what}: field `v` is not an integer")
    if version != PROTOCOL_VERSION:
        raise Malformed(
            f"unsupported {what} version {version} "
            f"(this executor reads version {PROTOCOL_VERSION})"
        )


def _load_json(body: bytes, what: str) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise Malformed(f"malformed {what}: {err}") from None


def decode_batch(body: bytes) -> list[Trigger]:
    """The triggers of a trigger-queue message, or ``Malformed`` (§5, §10)."""
    doc = _load_json(body, "trigger batch")
    _version(doc, "trigger batch")
    triggers = []
    try:
        items = doc.get("triggers")
        if items is None:
            raise ValueError("missing field `triggers`")
        if not isinstance(items, list):
            raise ValueError("field `triggers` is not an array")
        for index, item in enumerate(items):
            where = f" in trigger {index}"
            if not isinstance(item, dict):
                raise ValueError(f"trigger {index} is not an object")
            values = {name: _field(item, name, spec, where) for name, spec in TRIGGER_FIELDS}
            if values["trigger_type"] not in TRIGGER_TYPES:
                raise ValueError(f"unknown trigger_type {values['trigger_type']!r}{where}")
            if values["block"] not in BLOCK_STRATEGIES:
                raise ValueError(f"unknown block {values['block']!r}{where}")
            triggers.append(Trigger(**values, raw=item))
    except ValueError as err:
        raise Malformed(f"malformed trigger batch: {err}") from None
    if not triggers:
        raise Malformed("empty trigger list")
    for index, trigger in enumerate(triggers):
        if not trigger.trigger_id:
            raise Malformed(f"trigger {index} has an empty trigger_id")
        if len(trigger.trigger_id.encode("utf-8")) > MAX_TRIGGER_ID_BYTES:
            raise Malformed(
                f"trigger {index} has a trigger_id longer than {MAX_TRIGGER_ID_BYTES} bytes"
            )
    return triggers


@dataclasses.dataclass(frozen=True)
class KillRequest:
    trigger_id: str
    job_id: int


def decode_control(body: bytes) -> KillRequest:
    """A control message (§7.3), or ``Malformed`` (§10)."""
    doc = _load_json(body, "control message")
    _version(doc, "control message")
    try:
        action = _field(doc, "action", _STR, "")
        if action != "kill":
            raise ValueError(f"unknown action {action!r}")
        trigger_id = _field(doc, "trigger_id", _STR, "")
        job_id = _field(doc, "job_id", _U64, "")
    except ValueError as err:
        raise Malformed(f"malformed control message: {err}") from None
    if not trigger_id:
        raise Malformed("control message with an empty trigger_id")
    return KillRequest(trigger_id, job_id)


@dataclasses.dataclass(frozen=True)
class Mark:
    """A dedupe mark (§6.1); ``state == "foreign"`` for anything else."""

    state: str
    executor: Optional[str] = None
    incarnation: Optional[str] = None
    since_ms: Optional[int] = None
    result: Optional[dict] = None


FOREIGN = Mark("foreign")

RESULT_FIELDS = [
    ("trigger_id", _STR),
    ("job_id", _U64),
    ("executor_id", _STR),
    ("fire_ms", _I64),
    ("start_ms", _I64),
    ("end_ms", _I64),
    ("msg", _STR),
]


def parse_mark(text: str) -> Mark:
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            return FOREIGN
        state = doc.get("state")
        if state == "killed":
            _field(doc, "by", _STR, "")
            _field(doc, "at_ms", _I64, "")
            return Mark("killed")
        executor = _field(doc, "executor", _STR, "")
        if state == "running":
            return Mark(
                "running",
                executor,
                incarnation=_field(doc, "incarnation", _STR, ""),
                since_ms=_field(doc, "since_ms", _I64, ""),
            )
        if state == "finished":
            result = doc.get("result")
            if not isinstance(result, dict):
                return FOREIGN
            for name, spec in RESULT_FIELDS:
                _field(result, name, spec, "")
            if not _is_int(result.get("code"), 1, 65535):
                return FOREIGN
            return Mark("finished", executor, result=result)
        if state == "confirmed":
            _field(doc, "code", _U32, "")
            return Mark("confirmed", executor)
    except (ValueError, RecursionError):
        pass
    return FOREIGN


def secrets_of(trigger: Trigger) -> dict:
    """The trigger's named secrets (§5): name -> value, or empty."""
    secrets = trigger.raw.get("secrets") or {}
    if not isinstance(secrets, dict):
        return {}
    return {k: v for k, v in secrets.items() if isinstance(k, str) and isinstance(v, str) and v}


def expand_secrets(params: str, secrets: dict) -> str:
    """``params`` with each ``${secret.NAME}`` of a known secret filled in."""
    for name, value in secrets.items():
        params = params.replace("${secret.%s}" % name, value)
    return params


def mask_secrets(text: str, secrets: dict) -> str:
    """``text`` with every secret value shown as ``***``, longest first."""
    for value in sorted(secrets.values(), key=len, reverse=True):
        text = text.replace(value, "***")
    return text


def result_fields(
    trigger: Trigger,
    executor_id: str,
    code: int,
    msg: str,
    retryable: bool,
    start_ms: int,
    end_ms: int,
) -> dict:
    """A result object without ``type``, in the documented field order (§8.2)."""
    return {
        "trigger_id": trigger.trigger_id,
        "job_id": trigger.job_id,
        "executor_id": executor_id,
        "fire_ms": trigger.fire_ms,
        "start_ms": start_ms,
        "end_ms": end_ms,
        "code": code,
        "msg": cut_utf8(mask_secrets(msg, secrets_of(trigger)), MAX_MSG_BYTES),
        "retryable": retryable,
    }


@dataclasses.dataclass(frozen=True)
class Outcome:
    code: int
    msg: str
    retryable: bool


SUCCESS = Outcome(200, "", False)
KILLED = Outcome(500, "killed", False)
DISCARDED = Outcome(500, "block strategy DISCARD_LATER: job is running, trigger discarded", False)


def covered(by_trigger_id: str) -> Outcome:
    return Outcome(500, f"block strategy COVER_EARLY: replaced by trigger {by_trigger_id}", False)


# --------------------------------------------------------------------------
# Handlers


class Failure(Exception):
    """A handler failure: 500 with this text, retryable (§7.6)."""


class Abort(Exception):
    """A do-not-retry failure: 500 ``aborted: <text>``, not retryable (§7.6)."""


class Context:
    """What a handler gets: its trigger, a log function, a cancellation event.

    ``cancelled`` is set on a kill, a timeout, a COVER_EARLY replacement or a
    shutdown; a handler should return promptly (it has 1 s) once it is set.
    """

    def __init__(self, run: "Run") -> None:
        trigger = run.trigger
        self.trigger_id = trigger.trigger_id
        self.job_id = trigger.job_id
        # The job's named secrets (§5); ``params`` has its placeholders
        # filled, and a value written to the log reads ``***``.
        self.secrets = secrets_of(trigger)
        self.params = expand_secrets(trigger.params, self.secrets)
        self.shard_index = trigger.shard_index
        self.shard_total = trigger.shard_total
        self.retry_count = trigger.retry_count
        self.trigger_type = trigger.trigger_type
        self.cancelled = run.cancelled
        self._run = run

    def log(self, text: str) -> None:
        """Adds a line to the trigger's log (shipped as ``log`` events, §8.3)."""
        self._run.add_line(str(text))


Handler = Callable[[Context], None]
HANDLERS: dict[str, Handler] = {}


def handler(name: str) -> Callable[[Handler], Handler]:
    if not name or re.search(r"[,\s]", name):
        raise ValueError(f"handler name {name!r} must not be empty or hold commas or spaces")

    def register(function: Handler) -> Handler:
        HANDLERS[name] = function
        return function

    return register


def _millis(params: str) -> Optional[int]:
    text = params.strip()
    return int(text) if re.fullmatch(r"[0-9]+", text) and int(text) <= U64_MAX else None


@handler("demo")
def demo(ctx: Context) -> None:
    """Params ``fail`` fails; an unsigned integer sleeps that many ms."""
    ctx.log(
        f"demo: trigger {ctx.trigger_id} params {ctx.params} "
        f"shard {ctx.shard_index}/{ctx.shard_total}"
    )
    if ctx.params.strip() == "fail":
        raise Failure("demo: failure requested by params")
    millis = _millis(ctx.params)
    if millis is not None and ctx.cancelled.wait(millis / 1000):
        raise Failure("demo: cancelled")
    ctx.log("demo: done")


@handler("py_echo")
def py_echo(ctx: Context) -> None:
    """Logs its params and shard, succeeds: tells a Python run from a Rust one."""
    ctx.log(f"py_echo: {ctx.params} (shard {ctx.shard_index}/{ctx.shard_total})")


@handler("py_abort")
def py_abort(ctx: Context) -> None:
    """Fails without retry (``aborted: <params>``)."""
    raise Abort(ctx.params or "py_abort: abort requested")


@handler("py_raise")
def py_raise(ctx: Context) -> None:
    """Crashes with an exception (``handler panicked: …``, retryable)."""
    raise RuntimeError(ctx.params or "py_raise: exception requested")


@handler("py_stubborn")
def py_stubborn(ctx: Context) -> None:
    """Sleeps ``params`` ms ignoring cancellation: exercises abandoning a run."""
    ctx.log("py_stubborn: ignoring cancellation")
    time.sleep((_millis(ctx.params) or 0) / 1000)


# --------------------------------------------------------------------------
# Dedupe marks in Redis (§6)


class Dedupe:
    def __init__(self, client: redis.Redis, names: Names, config: Config, incarnation: str):
        self._redis, self._names = client, names
        self._id, self._app, self._incarnation, self._ttl = (
            config.executor_id,
            config.app,
            incarnation,
            config.dedupe_ttl_s,
        )

    def claim(self, trigger_id: str) -> Optional[Mark]:
        """``None`` if this executor won the trigger, else the mark found.

        Raises ``redis.RedisError`` when Redis is unavailable (§6.2).
        """
        key = self._names.dedupe(self._app, trigger_id)
        for _ in range(CLAIM_TRIES):
            mark = to_json(
                {
                    "state": "running",
                    "executor": self._id,
                    "incarnation": self._incarnation,
                    "since_ms": now_ms(),
                }
            )
            if self._redis.set(key, mark, nx=True, ex=self._ttl):
                return None
            found = self._redis.get(key)
            if found is not None:
                return parse_mark(found)
        raise redis.exceptions.ConnectionError(f"dedupe mark {key} kept vanishing")

    def finished(self, fields: dict) -> None:
        self._write(
            fields["trigger_id"],
            {"state": "finished", "executor": self._id, "result": fields},
        )

    def confirmed(self, trigger_id: str, code: int) -> None:
        self._write(trigger_id, {"state": "confirmed", "executor": self._id, "code": code})

    def _write(self, trigger_id: str, mark: dict) -> None:
        """Steps 2 and 4 of §6.2: failures are logged, never fatal."""
        try:
            self._redis.set(self._names.dedupe(self._app, trigger_id), to_json(mark), ex=self._ttl)
        except redis.RedisError as err:
            log.warning("writing the %s mark of %s failed: %s", mark["state"], trigger_id, err)

    def release(self, trigger_id: str) -> bool:
        """Gives a claimed, unstarted trigger back (§6.2); False if that failed."""
        try:
            self._redis.delete(self._names.dedupe(self._app, trigger_id))
            return True
        except redis.RedisError as err:
            log.warning("releasing the mark of %s failed: %s", trigger_id, err)
            return False


def answer_for_mark(mark: Mark, trigger: Trigger, executor_id: str, incarnation: str) -> Optional[dict]:
    """§6.3: what to publish for a trigger whose mark already exists.

    ``None``: publish nothing, the trigger is settled.  Never runs the handler.
    """
    now = now_ms()
    if mark.state == "killed":
        return result_fields(trigger, executor_id, 500, "killed", False, now, now)
    if mark.executor != executor_id:  # another executor's mark, or foreign
        return None
    if mark.state == "running" and mark.incarnation != incarnation:
        msg = (
            f"executor {executor_id} restarted while the handler ran "
            f"(incarnation {mark.incarnation}); the run's outcome is unknown"
        )
        return result_fields(trigger, executor_id, 500, msg, True, mark.since_ms, now)
    if mark.state == "finished":
        return mark.result
    return None  # running here (this incarnation) or already confirmed


# --------------------------------------------------------------------------
# Registration (§3)


class Registrar(threading.Thread):
    """Lease every lease_ms / 4, full write every heartbeat_ms and on changes."""

    def __init__(
        self,
        client: redis.Redis,
        names: Names,
        config: Config,
        incarnation: str,
        running_jobs: Callable[[], str],
    ) -> None:
        super().__init__(name="registrar", daemon=True)
        self._redis, self._names, self._config = client, names, config
        self._running_jobs = running_jobs
        self._static = {
            "app": config.app,
            "host": socket.gethostname(),
            "handlers": ",".join(sorted(HANDLERS)),
            "started_ms": str(now_ms()),
            "pid": str(os.getpid()),
            "incarnation": incarnation,
        }
        self._cond = threading.Condition()
        self._stopped = False
        self._changed_at: Optional[float] = None

    def jobs_changed(self) -> None:
        with self._cond:
            if self._changed_at is None:
                self._changed_at = time.monotonic()
            self._cond.notify()

    def run(self) -> None:
        config, tick = self._config, self._config.lease_tick_s
        backoff = Backoff(0.25, min(5.0, config.heartbeat_ms / 1000))
        next_full = next_lease = time.monotonic()
        written_jobs: Optional[str] = None
        failing = False
        while True:
            with self._cond:
                if self._stopped:
                    return
                now = time.monotonic()
                changed_due = (
                    self._changed_at is not None
                    and now >= self._changed_at + RUNNING_JOBS_COALESCE_S
                )
                if changed_due:
                    self._changed_at = None
            # Outside our lock: the engine calls jobs_changed() under its own.
            jobs = self._running_jobs()
            if changed_due and jobs != written_jobs:
                next_full = now
            try:
                if now >= next_full:
                    self._full_write(jobs)
                    written_jobs = jobs
                    backoff.reset()
                    next_full = now + config.heartbeat_ms / 1000
                    next_lease = now + tick
                elif now >= next_lease:
                    self._redis.zadd(self._names.registry, {config.executor_id: now_ms()})
                    next_lease = now + tick
                if failing:
                    log.info("registry writes work again")
                    failing = False
            except redis.RedisError as err:
                if not failing:
                    log.warning("registry write failed (retrying): %s", err)
                    failing = True
                # The lease is retried at the next tick; a full write backs off.
                next_lease = now + tick
                if now >= next_full:
                    next_full = now + backoff.next()
            with self._cond:
                wake = min(next_full, next_lease)
                if self._changed_at is not None:
                    wake = min(wake, self._changed_at + RUNNING_JOBS_COALESCE_S)
                if not self._stopped:
                    self._cond.wait(max(0.0, wake - time.monotonic()))

    def _full_write(self, jobs: str) -> None:
        stamp = now_ms()
        pipe = self._redis.pipeline(transaction=False)  # never MULTI (§2)
        pipe.zadd(self._names.registry, {self._config.executor_id: stamp})
        pipe.hset(
            self._names.executor_hash,
            mapping={**self._static, "heartbeat_ms": str(stamp), "running_jobs": jobs},
        )
        pipe.pexpire(self._names.executor_hash, self._config.hash_ttl_ms)
        pipe.execute()

    def _stop_thread(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self.is_alive():
            self.join()

    def retire(self) -> None:
        """Score 1, hash kept for the drain (§3.2, §9.4 step 2)."""
        self._stop_thread()
        drain_ms = self._config.shutdown_grace_ms + DRAIN_EXTRA_MS

        def write() -> None:
            pipe = self._redis.pipeline(transaction=False)
            pipe.zadd(self._names.registry, {self._config.executor_id: 1})
            pipe.pexpire(self._names.executor_hash, self._config.hash_ttl_ms + drain_ms)
            pipe.execute()

        self._persist("retire", write)

    def leave(self) -> None:
        """Deletes the hash, after the AMQP connection is closed (§3.2)."""
        self._stop_thread()
        self._persist("leave", lambda: self._redis.delete(self._names.executor_hash))

    def _persist(self, what: str, write: Callable[[], Any], tries: int = 5) -> None:
        backoff = Backoff(0.25, 2.0)
        for attempt in range(tries):
            try:
                write()
                log.info("registry: %s done", what)
                return
            except redis.RedisError as err:
                log.warning("registry: %s failed (%d/%d): %s", what, attempt + 1, tries, err)
                time.sleep(backoff.next())


def check_id_not_live_elsewhere(client: redis.Redis, names: Names, config: Config) -> Optional[str]:
    """Open question 1: refuse to start when this id is live in another group."""
    other = client.hget(names.executor_hash, "app")
    if other is None or other == config.app:
        return None
    score = client.zscore(names.registry_of(other), config.executor_id)
    if score is not None and score >= now_ms() - config.lease_ms:
        return other
    return None


# --------------------------------------------------------------------------
# Runs, deliveries and the outbox


class Delivery:
    """One trigger-queue message, acked once all its triggers are done (§9.1)."""

    def __init__(self, generation: int, tag: int) -> None:
        self.generation = generation  # which AMQP connection delivered it
        self.tag = tag
        self.pending: dict[str, "Run"] = {}
        self.requeue = False  # nack(requeue) instead of ack (§9.2, §9.4)
        self.requeue_delay_s = REQUEUE_DELAY_S


@dataclasses.dataclass(frozen=True)
class StopReason:
    """Why a running handler was cancelled; ``outcome`` None = shutdown (§7.5)."""

    outcome: Optional[Outcome]


SHUTDOWN = StopReason(None)

# Run states, as seen by the run's job line.
WAITING = "waiting"  # queued behind its job's current run, not claimed
TURN = "turn"  # claimed and its job's turn, waiting for a handler slot
RUNNING = "running"  # handler started (maybe already ended)
OTHER = "other"  # being answered, refused, settled, or handed back


class Run:
    """One trigger in this process, from admission until its result is confirmed."""

    def __init__(self, trigger: Trigger, engine: "Engine") -> None:
        self.trigger = trigger
        self.engine = engine
        self.deliveries: list[Delivery] = []
        self.state = OTHER
        self.claimed = False
        self.counted = False  # counted in running_jobs
        # Shared between the supervisor, the handler and the job line:
        self.cond = threading.Condition()
        self.cancelled = threading.Event()
        self.stop_reason: Optional[StopReason] = None
        self.stop_at = 0.0
        self.handler_done = False
        self.outcome: Optional[Outcome] = None
        self.lines_open = False
        self.lines: list[dict] = []
        self.next_seq = 0

    def stop(self, reason: StopReason) -> bool:
        """Cancels the running handler; False if it already ended or was stopped."""
        with self.cond:
            if self.handler_done or self.stop_reason is not None:
                return False
            self.stop_reason = reason
            self.stop_at = time.monotonic()
            self.cancelled.set()
            self.cond.notify_all()
        return True

    def add_line(self, text: str) -> None:
        with self.cond:
            if not self.lines_open:
                return  # lines written after the handler ended are dropped (§8.3)
            text = mask_secrets(text, secrets_of(self.trigger))
            self.lines.append({"ts_ms": now_ms(), "text": cut_utf8(text, MAX_LOG_LINE_BYTES)})
            full = len(self.lines) >= MAX_LINES_PER_EVENT
        if full:
            self.engine.broker.request_log_flush()

    def take_log_events(self) -> list[dict]:
        """The unshipped lines as ``log`` events; caller holds ``cond``."""
        events = []
        for start in range(0, len(self.lines), MAX_LINES_PER_EVENT):
            chunk = self.lines[start : start + MAX_LINES_PER_EVENT]
            events.append(
                {
                    "type": "log",
                    "trigger_id": self.trigger.trigger_id,
                    "job_id": self.trigger.job_id,
                    "first_seq": self.next_seq,
                    "lines": chunk,
                }
            )
            self.next_seq += len(chunk)
        self.lines = []
        return events


class _Item:
    """One thing to publish; removed from the outbox once confirmed."""

    __slots__ = ("exchange", "routing_key", "body", "mandatory", "future", "is_event")

    def __init__(self, exchange, routing_key, body, mandatory, future, is_event):
        self.exchange, self.routing_key, self.body = exchange, routing_key, body
        self.mandatory, self.future, self.is_event = mandatory, future, is_event


class Outbox:
    """Events and hand-backs waiting to be published by the AMQP thread.

    Events are batched at flush time: every pending ``log`` event is published
    (and confirmed) before any result, so a trigger's lines precede its result
    (§8.3).  An event is retried until confirmed, across reconnects.
    """

    def __init__(self, names: Names, wake: Callable[[], None]) -> None:
        self._names, self._wake = names, wake
        self._lock = threading.Lock()
        self._items: list[_Item] = []

    def _event_item(self, event: dict, future: Optional[concurrent.futures.Future]) -> _Item:
        if event["type"] == "log":
            key = "log.lines"
        else:
            key = "result.success" if event["code"] == 200 else "result.fail"
        body = to_json(event).encode("utf-8")
        return _Item(self._names.events_exchange, key, body, False, future, True)

    def put_logs(self, events: list[dict]) -> None:
        if events:
            with self._lock:
                self._items.extend(self._event_item(e, None) for e in events)
            self._wake()

    def put_result(self, fields: dict, log_events: list[dict]) -> concurrent.futures.Future:
        """Queues the remaining lines, then the result; resolved when confirmed."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        items = [self._event_item(e, None) for e in log_events]
        items.append(self._event_item({"type": "result", **fields}, future))
        with self._lock:
            self._items.extend(items)
        self._wake()
        return future

    def put_handback(self, triggers: list[Trigger], own_id: str) -> concurrent.futures.Future:
        """§9.4 step 3: unstarted triggers back to our own queue, confirmed."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        body = to_json({"v": PROTOCOL_VERSION, "triggers": [t.raw for t in triggers]})
        item = _Item(self._names.trigger_exchange, self._names.trigger_key, body.encode("utf-8"), True, future, False)
        with self._lock:
            self._items.append(item)
        self._wake()
        return future

    def empty(self) -> bool:
        with self._lock:
            return not self._items

    def flush(self, channel) -> bool:
        """Publishes what is pending on a confirm channel (AMQP thread only).

        Returns False if the broker refused (nack) a batch of events, which
        are then kept for a later try.  Connection errors propagate, items kept.
        """
        with self._lock:
            snapshot = list(self._items)
        if not snapshot:
            return True
        logs = [i for i in snapshot if i.is_event and i.routing_key == "log.lines"]
        results = [i for i in snapshot if i.is_event and i.routing_key != "log.lines"]
        handbacks = [i for i in snapshot if not i.is_event]
        for batch in self._batches(logs):
            if not self._publish_events(channel, batch):
                return False  # results stay behind their lines
        ok = True
        for key in ("result.success", "result.fail"):
            for batch in self._batches([i for i in results if i.routing_key == key]):
                ok = self._publish_events(channel, batch) and ok
        for item in handbacks:
            self._publish_handback(channel, item)
        return ok

    @staticmethod
    def _batches(items: list[_Item]) -> Iterable[list[_Item]]:
        batch: list[_Item] = []
        size = 0
        for item in items:
            if batch and (
                len(batch) >= MAX_EVENTS_PER_MESSAGE
                or size + len(item.body) + 1 > MAX_EVENTS_MESSAGE_BYTES
            ):
                yield batch
                batch, size = [], 0
            batch.append(item)
            size += len(item.body) + 1
        if batch:
            yield batch

    def _publish_events(self, channel, batch: list[_Item]) -> bool:
        body = b"[" + b",".join(i.body for i in batch) + b"]"
        try:
            channel.basic_publish(
                batch[0].exchange,
                batch[0].routing_key,
                body,
                pika.BasicProperties(
                    delivery_mode=2, content_type="application/json", user_id=self._names.publisher
                ),
            )
        except pika.exceptions.NackError:
            log.warning("broker refused %d %s event(s); retrying", len(batch), batch[0].routing_key)
            return False
        self._done(batch)
        for item in batch:
            if item.future is not None:
                item.future.set_result(None)
        return True

    def _publish_handback(self, channel, item: _Item) -> None:
        try:
            channel.basic_publish(
                item.exchange,
                item.routing_key,
                item.body,
                pika.BasicProperties(
                    delivery_mode=2, content_type="application/json", user_id=self._names.publisher
                ),
                mandatory=True,
            )
        except (pika.exceptions.NackError, pika.exceptions.UnroutableError) as err:
            self._done([item])
            item.future.set_exception(err)
            return
        self._done([item])
        item.future.set_result(None)

    def _done(self, items: list[_Item]) -> None:
        gone = {id(i) for i in items}
        with self._lock:
            self._items = [i for i in self._items if id(i) not in gone]

    def abandon(self) -> int:
        """At exit: drops what could not be published; returns how many."""
        with self._lock:
            items, self._items = self._items, []
        for item in items:
            if item.future is not None:
                item.future.cancel()
        return len(items)


# --------------------------------------------------------------------------
# The broker connection (AMQP thread)


class FatalTopology(Exception):
    """A declaration the broker refuses with 406: retrying cannot help (§4)."""


class Broker:
    def __init__(self, config: Config, names: Names, incarnation: str) -> None:
        self._config, self._names = config, names
        self._consumer_tag = f"{config.executor_id}.{incarnation}"
        self.outbox = Outbox(names, self.wake)
        self.engine: Optional["Engine"] = None  # set by the wiring in main()
        self.consuming = threading.Event()  # the executor queue was consumed once
        self.fatal: Optional[str] = None
        self.failed = threading.Event()  # set together with ``fatal``
        self._want_consume = True
        self._closing = threading.Event()
        self._calls: "queue.SimpleQueue[Callable[[], None]]" = queue.SimpleQueue()
        self._conn_lock = threading.Lock()
        self._conn: Optional[pika.BlockingConnection] = None
        self._generation = 0
        self._channel = None  # consume channel (confirm mode)
        self._consuming_on = None  # the consume channel, while it consumes
        self._events = None  # events channel (confirm mode)
        self._control = None  # control channel (confirm mode)
        self._control_retry_at: Optional[float] = None
        self._log_flush_at = 0.0
        self._log_flush_now = False
        self._outbox_retry_at = 0.0
        self._thread = threading.Thread(target=self._run, name="amqp", daemon=True)

    # ---- thread-safe API

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        with self._conn_lock:
            conn = self._conn
        if conn is not None:
            try:
                conn.add_callback_threadsafe(lambda: None)
            except Exception:  # closing or closed: the loop will look anyway
                pass

    def call(self, function: Callable[[], None]) -> None:
        """Runs ``function`` on the AMQP thread."""
        self._calls.put(function)
        self.wake()

    def settle(self, delivery: Delivery) -> None:
        self.call(functools.partial(self._settle, delivery))

    def request_log_flush(self) -> None:
        self._log_flush_now = True
        self.wake()

    def stop_consuming(self, timeout_s: float) -> None:
        """§9.4 step 1: cancel the consumer; pika requeues undispatched deliveries."""
        self._want_consume = False
        done = threading.Event()

        def cancel() -> None:
            try:
                channel = self._consuming_on
                if channel is not None and channel.is_open:
                    channel.basic_cancel(self._consumer_tag)
            finally:
                done.set()

        self.call(cancel)
        if not done.wait(timeout_s):
            log.warning("consumer cancel not confirmed within %.0f s", timeout_s)

    def close(self, timeout_s: float) -> None:
        self._closing.set()
        self.wake()
        self._thread.join(timeout_s)

    # ---- AMQP thread

    def _run(self) -> None:
        backoff = Backoff(0.25, 5.0)
        while not self._closing.is_set():
            try:
                self._serve()
                backoff.reset()
            except FatalTopology as err:
                self.fatal = str(err)
                self._want_consume = False
                log.error("%s", err)
                self.failed.set()
                self._closing.wait(backoff.next())
            except Exception as err:  # any broker error: reconnect (§12 step 8)
                log.warning("AMQP connection lost (%s: %s); reconnecting", type(err).__name__, err)
                self._closing.wait(backoff.next())
        dropped = self.outbox.abandon()
        if dropped:
            log.warning("%d publish(es) dropped at exit (marks settle them on redelivery)", dropped)

    def _serve(self) -> None:
        params = pika.URLParameters(self._config.amqp_url)
        params.client_properties = {"connection_name": f"rondo-executor {self._config.executor_id}"}
        params.blocked_connection_timeout = 60
        conn = pika.BlockingConnection(params)
        with self._conn_lock:
            self._conn = conn
            self._generation += 1
        try:
            self._open(conn)
            while True:
                if self._closing.is_set():
                    self._run_calls()
                    self.outbox.flush(self._events)
                    return
                conn.process_data_events(time_limit=0.1)
                self._run_calls()
                if not (self._channel.is_open and self._events.is_open):
                    raise pika.exceptions.AMQPChannelError("a channel was closed")
                self._ship_logs()
                if time.monotonic() >= self._outbox_retry_at and not self.outbox.flush(self._events):
                    self._outbox_retry_at = time.monotonic() + 1.0
                self._keep_control(conn)
        finally:
            with self._conn_lock:
                self._conn = None
            self._channel = self._events = self._control = self._consuming_on = None
            try:
                if conn.is_open:
                    conn.close()
            except Exception:
                pass

    def _open(self, conn) -> None:
        """§4: topology, own queue, confirm channels, control queue, consume."""
        names, config = self._names, self._config
        dlx_args = {"x-dead-letter-exchange": names.dlx}
        channel = conn.channel()
        if self.fatal is None:
            try:
                for exchange, kind in (
                    (names.trigger_exchange, "topic"),
                    (names.control_exchange, "direct"),
                    (names.events_exchange, "topic"),
                    (names.dlx, "fanout"),
                ):
                    channel.exchange_declare(exchange, exchange_type=kind, durable=True)
                channel.queue_declare(names.dead_queue, durable=True)
                channel.queue_bind(names.dead_queue, names.dlx, routing_key="")
                # persist and monitor are the scheduler's and the worker's
                # to declare: an executor has no read on the events exchange.
                channel.queue_declare(names.exec_queue, durable=True, arguments=dlx_args)
                channel.queue_bind(names.exec_queue, names.trigger_exchange, routing_key=names.trigger_key)
            except pika.exceptions.ChannelClosedByBroker as err:
                if err.reply_code == 406:
                    raise FatalTopology(
                        f"the broker refused a declaration ({err.reply_text}); "
                        f"queue {names.exec_queue} or the shared topology exists with other arguments"
                    ) from None
                raise
        channel.confirm_delivery()
        events = conn.channel()
        events.confirm_delivery()
        self._channel, self._events = channel, events
        self._control = None
        self._control_retry_at = 0.0
        self._keep_control(conn)
        if self._want_consume:
            channel.basic_qos(prefetch_count=config.prefetch)
            channel.basic_consume(
                names.exec_queue,
                self._on_trigger,
                auto_ack=False,
                consumer_tag=self._consumer_tag,
            )
            self._consuming_on = channel
            log.info(
                "consuming %s on %s (prefetch %d)",
                names.exec_queue,
                redact_url(config.amqp_url),
                config.prefetch,
            )
            self.consuming.set()

    def _keep_control(self, conn) -> None:
        """Declares and consumes the control queue, every 5 s while locked."""
        if self._control is not None and self._control.is_open:
            return
        if self._control is not None:
            log.warning("control channel closed; reopening in %.0f s", CONTROL_RETRY_S)
            self._control = None
            self._control_retry_at = time.monotonic() + CONTROL_RETRY_S
            return
        if self._control_retry_at is None or time.monotonic() < self._control_retry_at:
            return
        names = self._names
        try:
            control = conn.channel()
            control.queue_declare(
                names.control_queue,
                durable=False,
                exclusive=True,
                auto_delete=True,
                arguments={"x-dead-letter-exchange": names.dlx},
            )
            control.queue_bind(names.control_queue, names.control_exchange, routing_key=self._config.executor_id)
            control.confirm_delivery()
            control.basic_qos(prefetch_count=CONTROL_PREFETCH)
            control.basic_consume(
                names.control_queue,
                self._on_control,
                auto_ack=False,
                consumer_tag=f"{self._consumer_tag}.ctl",
            )
        except pika.exceptions.ChannelClosedByBroker as err:
            log.warning(
                "control queue %s unavailable (%s %s); retrying in %.0f s",
                names.control_queue,
                err.reply_code,
                err.reply_text,
                CONTROL_RETRY_S,
            )
            self._control_retry_at = time.monotonic() + CONTROL_RETRY_S
            return
        self._control = control
        self._control_retry_at = None

    def _run_calls(self) -> None:
        while True:
            try:
                function = self._calls.get_nowait()
            except queue.Empty:
                return
            function()

    def _ship_logs(self) -> None:
        now = time.monotonic()
        if self._log_flush_now or now >= self._log_flush_at:
            self._log_flush_now = False
            self._log_flush_at = now + self._config.log_flush_ms / 1000
            self.engine.ship_logs()

    def _on_trigger(self, channel, method, properties, body: bytes) -> None:
        if not self._want_consume:  # stopping: hand it back at once (§9.4 step 1)
            channel.basic_nack(method.delivery_tag, requeue=True)
            return
        try:
            triggers = decode_batch(body)
        except Malformed as err:
            self._dead_letter(channel, method, properties, body, str(err), self._names.exec_queue)
            return
        except Exception as err:  # never crash on a message
            reason = f"malformed trigger batch: {type(err).__name__}: {err}"
            self._dead_letter(channel, method, properties, body, reason, self._names.exec_queue)
            return
        self.engine.admit(Delivery(self._generation, method.delivery_tag), triggers)

    def _on_control(self, channel, method, properties, body: bytes) -> None:
        try:
            kill = decode_control(body)
        except Malformed as err:
            self._dead_letter(channel, method, properties, body, str(err), self._names.control_queue)
            return
        except Exception as err:
            reason = f"malformed control message: {type(err).__name__}: {err}"
            self._dead_letter(channel, method, properties, body, reason, self._names.control_queue)
            return
        self.engine.kill(kill)
        channel.basic_ack(method.delivery_tag)

    def _dead_letter(self, channel, method, properties, body: bytes, reason: str, source: str) -> None:
        """§10: unchanged body to the DLX with the reason, confirmed, then ack."""
        log.warning("dead-lettering a message from %s: %s", source, reason)
        headers = dict(properties.headers or {})
        headers["x-rondo-reason"] = reason
        headers["x-rondo-source-queue"] = source
        try:
            channel.basic_publish(
                self._names.dlx,
                "",
                body,
                pika.BasicProperties(
                    delivery_mode=2,
                    content_type="application/json",
                    headers=headers,
                    user_id=self._names.publisher,
                ),
            )
        except (pika.exceptions.NackError, pika.exceptions.UnroutableError) as err:
            log.error("dead-letter publish refused (%s); rejecting without requeue", err)
            if source == self._names.control_queue:
                channel.basic_reject(method.delivery_tag, requeue=False)
            else:
                channel.basic_nack(method.delivery_tag, requeue=False)
            return
        channel.basic_ack(method.delivery_tag)

    def _settle(self, delivery: Delivery) -> None:
        """Acks (or nacks) a delivery if its connection is still the current one."""
        if delivery.generation != self._generation or self._channel is None:
            return  # that connection is gone: the broker requeued the message
        channel = self._channel
        if not delivery.requeue:
            channel.basic_ack(delivery.tag)
            return

        def nack() -> None:
            if delivery.generation == self._generation and channel.is_open:
                channel.basic_nack(delivery.tag, requeue=True)

        if delivery.requeue_delay_s > 0:
            self._conn.call_later(delivery.requeue_delay_s, nack)
        else:
            nack()


# --------------------------------------------------------------------------
# Admission, block strategies and runs (§5 – §9)


class Slots:
    """At most ``prefetch`` handlers at once; claimed triggers wait FIFO (§9.3)."""

    def __init__(self, count: int, grant: Callable[[Run], None]) -> None:
        self._free, self._grant = count, grant
        self._queue: collections.deque[Run] = collections.deque()
        self._lock = threading.Lock()

    def request(self, run: Run) -> None:
        with self._lock:
            granted = self._free > 0
            if granted:
                self._free -= 1
            else:
                self._queue.append(run)
        if granted:
            self._grant(run)

    def release(self) -> None:
        with self._lock:
            run = self._queue.popleft() if self._queue else None
            if run is None:
                self._free += 1
        if run is not None:
            self._grant(run)

    def withdraw(self, run: Run) -> None:
        """Takes a run out of the queue (a grant already under way is returned
        by the job line when it sees the run is no longer its turn)."""
        with self._lock:
            try:
                self._queue.remove(run)
            except ValueError:
                pass


class HandBack:
    """Collects the unstarted runs of every job line at a graceful stop."""

    def __init__(self, lines: int) -> None:
        self._left = lines
        self._runs: list[Run] = []
        self._cond = threading.Condition()

    def add(self, runs: list[Run]) -> None:
        with self._cond:
            self._runs.extend(runs)
            self._left -= 1
            self._cond.notify_all()

    def wait(self, timeout_s: float) -> list[Run]:
        with self._cond:
            if not self._cond.wait_for(lambda: self._left <= 0, timeout_s):
                log.warning("hand-back: %d job line(s) did not answer in time", self._left)
            return list(self._runs)


class JobLine:
    """Everything about one job id, one step at a time, in arrival order (§7.1).

    Only the pool thread draining the mailbox touches ``current``,
    ``successor`` and ``waiting``; steps may block on Redis.
    """

    def __init__(self, engine: "Engine", job_id: int) -> None:
        self.engine, self.job_id = engine, job_id
        self.mailbox: collections.deque[Callable[[], None]] = collections.deque()
        self.draining = False
        self.current: Optional[Run] = None  # has the turn: TURN or RUNNING
        self.successor: Optional[Run] = None  # claimed COVER_EARLY run, next
        self.waiting: collections.deque[Run] = collections.deque()  # unclaimed
        self.stopped = False

    def post_locked(self, step: Callable[..., None], *args: Any) -> None:
        """Queues a step; the caller holds the engine lock."""
        self.mailbox.append(functools.partial(step, self, *args))
        if not self.draining:
            self.draining = True
            self.engine.pool.submit(self._drain)

    def idle(self) -> bool:
        return self.current is None and self.successor is None and not self.waiting and not self.mailbox

    def _drain(self) -> None:
        engine = self.engine
        while True:
            with engine.lock:
                if not self.mailbox:
                    self.draining = False
                    if self.idle() and engine.jobs.get(self.job_id) is self:
                        del engine.jobs[self.job_id]
                    return
                step = self.mailbox.popleft()
            try:
                step()
            except Exception:
                log.exception("job %d: internal error in a job line step", self.job_id)

    # ---- steps

    def arrive(self, run: Run) -> None:
        engine, block = self.engine, run.trigger.block
        busy = self.current is not None or self.successor is not None or bool(self.waiting)
        if block == COVER_EARLY:
            # Claim first: a redelivered trigger must never stop the current run.
            if not engine.claim(run):
                return
            if busy:
                self._cover(run)
            else:
                self._take_turn(run)
        elif not busy:
            self.current = run
            if engine.claim(run):
                self._take_turn(run)
            else:
                self.current = None
                self._advance()
        elif block == SERIAL_EXECUTION:
            run.state = WAITING
            self.waiting.append(run)
        else:  # DISCARD_LATER
            self._refuse(run, DISCARDED)

    def granted(self, run: Run) -> None:
        engine = self.engine
        if run is not self.current or run.state != TURN or engine.stopping:
            engine.slots.release()  # withdrawn meanwhile; at a stop it is handed back
            return
        run.state = RUNNING
        engine.start(run)

    def ended(self, run: Run) -> None:
        """The run's handler returned or was abandoned: free its slot and turn."""
        if run is self.current:
            self.current = None
        self.engine.slots.release()
        self._advance()

    def kill(self, request: KillRequest) -> None:
        engine = self.engine
        with engine.lock:
            run = engine.inflight.get(request.trigger_id)
        if run is None or run.trigger.job_id != request.job_id:
            log.info("kill of %s (job %d) ignored: not here", request.trigger_id, request.job_id)
            return
        if run.state == WAITING and run in self.waiting:
            self.waiting.remove(run)
            self._refuse(run, KILLED)
        elif run is self.successor:
            self.successor = None
            engine.answer(run, KILLED)
        elif run is self.current and run.state == TURN:
            self._drop_current(KILLED)
        elif run is self.current and run.stop(StopReason(KILLED)):
            run.add_line("[rondo] run stopped: killed")
            log.info("killing %s", request.trigger_id)
        else:
            log.info("kill of %s ignored: not running or waiting here", request.trigger_id)

    def stop(self, collector: HandBack) -> None:
        """§9.4 step 3: release and collect every run that has not started."""
        engine = self.engine
        self.stopped = True
        unstarted = list(self.waiting)
        self.waiting.clear()
        if self.successor is not None:
            unstarted.append(self.successor)
            self.successor = None
        if self.current is not None and self.current.state == TURN:
            engine.slots.withdraw(self.current)
            unstarted.append(self.current)
            self.current = None
        handed = []
        for run in unstarted:
            if run.claimed and not engine.dedupe.release(run.trigger.trigger_id):
                msg = f"executor {engine.config.executor_id} shut down before the run started"
                engine.answer(run, Outcome(500, msg, True))
            else:
                handed.append(run)
        collector.add(handed)

    # ---- helpers

    def _take_turn(self, run: Run) -> None:
        self.current = run
        run.state = TURN
        self.engine.slots.request(run)

    def _advance(self) -> None:
        """Gives the turn to the next run: a covering one first, then FIFO."""
        engine = self.engine
        while self.current is None and not self.stopped:
            if self.successor is not None:
                run, self.successor = self.successor, None
                self._take_turn(run)
                return
            if not self.waiting or engine.stopping:
                return  # at a stop, waiting runs are handed back unclaimed
            run = self.waiting.popleft()
            self.current = run
            if engine.claim(run):
                self._take_turn(run)
                return
            self.current = None

    def _refuse(self, run: Run, outcome: Outcome) -> None:
        """Claim, then answer without running (§6.2, §7.1)."""
        if self.engine.claim(run):
            self.engine.answer(run, outcome)

    def _drop_current(self, outcome: Outcome) -> None:
        """Answers the current run that has the turn but has not started."""
        run = self.current
        self.engine.slots.withdraw(run)
        self.current = None
        self.engine.answer(run, outcome)
        self._advance()

    def _cover(self, run: Run) -> None:
        """COVER_EARLY: refuse the waiting ones, stop the current, run ``run`` next."""
        outcome = covered(run.trigger.trigger_id)
        while self.waiting:
            self._refuse(self.waiting.popleft(), outcome)
        if self.successor is not None:
            self.engine.answer(self.successor, outcome)
        self.successor = run
        current = self.current
        if current is None:
            self._advance()
        elif current.state == TURN:
            self._drop_current(outcome)
        else:
            # Its end (at most the 1 s kill grace later) starts the successor.
            current.stop(StopReason(outcome))


class Engine:
    """Admission, claims, runs, results and settlement of deliveries."""

    def __init__(
        self,
        config: Config,
        names: Names,
        incarnation: str,
        client: redis.Redis,
        broker: Broker,
    ) -> None:
        self.config, self.names, self.incarnation = config, names, incarnation
        self.broker = broker
        self.dedupe = Dedupe(client, names, config, incarnation)
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.inflight: dict[str, Run] = {}
        self.jobs: dict[int, JobLine] = {}
        self.job_counts: collections.Counter[int] = collections.Counter()
        self.stopping = False
        self.on_jobs_changed: Callable[[], None] = lambda: None
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(8, min(64, config.prefetch)), thread_name_prefix="job-line"
        )
        self.slots = Slots(config.prefetch, self._grant)

    # ---- bookkeeping (engine lock)

    def running_jobs(self) -> str:
        with self.lock:
            return ",".join(str(job) for job in sorted(self.job_counts))

    def _count_locked(self, run: Run) -> None:
        run.counted = True
        self.job_counts[run.trigger.job_id] += 1
        if self.job_counts[run.trigger.job_id] == 1:
            self.on_jobs_changed()

    def uncount(self, run: Run) -> None:
        """The run's handler ended, or it was decided not to run (§3.1)."""
        with self.lock:
            if not run.counted:
                return
            run.counted = False
            job = run.trigger.job_id
            self.job_counts[job] -= 1
            if self.job_counts[job] <= 0:
                del self.job_counts[job]
                self.on_jobs_changed()

    def _line_locked(self, job_id: int) -> JobLine:
        line = self.jobs.get(job_id)
        if line is None:
            line = self.jobs[job_id] = JobLine(self, job_id)
        return line

    def _post(self, job_id: int, step: Callable[..., None], *args: Any) -> None:
        with self.lock:
            self._line_locked(job_id).post_locked(step, *args)

    def _grant(self, run: Run) -> None:
        self._post(run.trigger.job_id, JobLine.granted, run)

    def complete(self, run: Run, requeue: bool = False) -> None:
        """The trigger is done (or to be requeued): settle its deliveries."""
        ready = []
        with self.lock:
            tid = run.trigger.trigger_id
            if self.inflight.get(tid) is run:
                del self.inflight[tid]
            for delivery in run.deliveries:
                if delivery.pending.pop(tid, None) is None:
                    continue
                delivery.requeue = delivery.requeue or requeue
                if not delivery.pending:
                    ready.append(delivery)
            run.deliveries = []
            self.idle.notify_all()
        self.uncount(run)
        for delivery in ready:
            self.broker.settle(delivery)

    # ---- admission (AMQP thread)

    def admit(self, delivery: Delivery, triggers: list[Trigger]) -> None:
        unknown = []
        with self.lock:
            for trigger in triggers:
                tid = trigger.trigger_id
                if trigger.executor_id != self.config.executor_id or trigger.group != self.config.app:
                    log.warning(
                        "trigger %s was routed to %s in group %s; running it here anyway",
                        tid,
                        trigger.executor_id,
                        trigger.group,
                    )
                run = self.inflight.get(tid)
                if run is None:
                    run = self.inflight[tid] = Run(trigger, self)
                    if trigger.handler in HANDLERS:
                        self._count_locked(run)
                        self._line_locked(trigger.job_id).post_locked(JobLine.arrive, run)
                    else:
                        unknown.append(run)
                # else: a duplicate of a trigger in flight here; it settles with it.
                run.deliveries.append(delivery)
                delivery.pending[tid] = run
        for run in unknown:
            self.pool.submit(self._answer_unknown_handler, run)

    def _answer_unknown_handler(self, run: Run) -> None:
        """Answered at once, before any block strategy (§5.2, §7.6)."""
        if self.claim(run):
            msg = (
                f'no handler named "{run.trigger.handler}" on executor '
                f"{self.config.executor_id} (it has: {','.join(sorted(HANDLERS))})"
            )
            self.answer(run, Outcome(500, msg, True))

    def kill(self, request: KillRequest) -> None:
        with self.lock:
            line = self.jobs.get(request.job_id)
            if line is not None:
                line.post_locked(JobLine.kill, request)
                return
        log.info("kill of %s (job %d) ignored: nothing of that job here", request.trigger_id, request.job_id)

    # ---- claims and answers (job-line / pool threads)

    def claim(self, run: Run) -> bool:
        """True if this executor won the trigger (§6.2).

        Otherwise the trigger is already dealt with: answered or settled by
        the mark found (§6.3), or requeued because Redis failed (§9.2).
        """
        trigger = run.trigger
        try:
            mark = self.dedupe.claim(trigger.trigger_id)
        except redis.RedisError as err:
            log.warning("claim of %s failed, requeueing its message: %s", trigger.trigger_id, err)
            run.state = OTHER
            self.complete(run, requeue=True)
            return False
        if mark is None:
            run.claimed = True
            return True
        run.state = OTHER
        self.uncount(run)
        answer = answer_for_mark(mark, trigger, self.config.executor_id, self.incarnation)
        log.info(
            "trigger %s already marked %s%s",
            trigger.trigger_id,
            mark.state,
            f" by {mark.executor}" if mark.executor else "",
        )
        if answer is None:
            self.complete(run)
        else:
            self.publish(run, answer, write_finished=False)
        return False

    def answer(self, run: Run, outcome: Outcome) -> None:
        """Answers a claimed trigger without running it."""
        run.state = OTHER
        self.uncount(run)
        now = now_ms()
        fields = result_fields(
            run.trigger,
            self.config.executor_id,
            outcome.code,
            outcome.msg,
            outcome.retryable,
            now,
            now,
        )
        self.publish(run, fields, write_finished=True)

    def publish(self, run: Run, fields: dict, write_finished: bool) -> None:
        """§6.2 steps 2–4: finished mark, lines then result (confirmed), confirmed mark."""
        if write_finished:
            self.dedupe.finished(fields)
        with run.cond:
            run.lines_open = False
            future = self.broker.outbox.put_result(fields, run.take_log_events())
        log.info(
            "trigger %s: %d %s",
            fields["trigger_id"],
            fields["code"],
            fields["msg"] or "ok",
        )
        future.add_done_callback(functools.partial(self._on_confirmed, run, fields))

    def _on_confirmed(self, run: Run, fields: dict, future: concurrent.futures.Future) -> None:
        if future.cancelled():
            return  # exiting: the unacked message comes back, its mark settles it
        try:
            self.pool.submit(self._after_confirm, run, fields)
        except RuntimeError:  # pool shut down at exit
            pass

    def _after_confirm(self, run: Run, fields: dict) -> None:
        self.dedupe.confirmed(fields["trigger_id"], fields["code"])
        self.complete(run)

    # ---- running a handler

    def start(self, run: Run) -> None:
        threading.Thread(
            target=self._supervise,
            args=(run,),
            name=f"run {run.trigger.trigger_id}",
            daemon=True,
        ).start()

    def _supervise(self, run: Run) -> None:
        """Runs the handler with its timeout, kill and cover handling (§7)."""
        trigger = run.trigger
        function = HANDLERS[trigger.handler]
        with run.cond:
            run.lines_open = True
        start = now_ms()
        threading.Thread(
            target=self._call_handler,
            args=(run, function),
            name=f"handler {trigger.trigger_id}",
            daemon=True,
        ).start()
        deadline = time.monotonic() + trigger.timeout_s if trigger.timeout_s > 0 else None
        with run.cond:
            run.cond.wait_for(
                lambda: run.handler_done or run.stop_reason is not None,
                None if deadline is None else max(0.0, deadline - time.monotonic()),
            )
        if deadline is not None:
            timeout = Outcome(502, f"timeout after {trigger.timeout_s}s", True)
            if run.stop(StopReason(timeout)):
                log.info("trigger %s timed out after %d s", trigger.trigger_id, trigger.timeout_s)
        with run.cond:
            if not run.handler_done:
                grace_end = run.stop_at + KILL_GRACE_S
                run.cond.wait_for(
                    lambda: run.handler_done,
                    max(0.0, grace_end - time.monotonic()),
                )
            if not run.handler_done:
                log.warning("trigger %s: handler did not return in time; abandoned", trigger.trigger_id)
            reason = run.stop_reason
            handler_outcome = run.outcome if run.handler_done else None
            run.lines_open = False
        end = now_ms()
        if reason is not None and reason.outcome is not None:
            outcome = reason.outcome  # kill, timeout, cover: whatever the handler answered
        elif handler_outcome is not None:
            outcome = handler_outcome  # includes a shutdown the handler answered in time
        else:
            outcome = Outcome(500, "killed: the executor shut down while the handler ran", True)
        self.uncount(run)
        self._post(trigger.job_id, JobLine.ended, run)
        fields = result_fields(
            trigger,
            self.config.executor_id,
            outcome.code,
            outcome.msg,
            outcome.retryable,
            start,
            end,
        )
        self.publish(run, fields, write_finished=True)

    @staticmethod
    def _call_handler(run: Run, function: Handler) -> None:
        try:
            function(Context(run))
            outcome = SUCCESS
        except Abort as err:
            outcome = Outcome(500, f"aborted: {err}", False)
        except Failure as err:
            outcome = Outcome(500, str(err), True)
        except BaseException as err:  # a crash, in any form
            outcome = Outcome(500, f"handler panicked: {type(err).__name__}: {err}", True)
        with run.cond:
            run.outcome = outcome
            run.handler_done = True
            run.cond.notify_all()

    # ---- log shipping (AMQP thread)

    def ship_logs(self) -> None:
        with self.lock:
            runs = list(self.inflight.values())
        for run in runs:
            with run.cond:
                if run.lines:
                    self.broker.outbox.put_logs(run.take_log_events())

    # ---- graceful stop (§9.4)

    def hand_back(self, timeout_s: float) -> None:
        """Step 3: unstarted triggers back to the broker, marks released first."""
        with self.lock:
            self.stopping = True
            lines = list(self.jobs.values())
            collector = HandBack(len(lines))
            for line in lines:
                line.post_locked(JobLine.stop, collector)
        handed = collector.wait(timeout_s)
        groups: dict[int, tuple[Delivery, list[Run]]] = {}
        with self.lock:
            for run in handed:
                run.state = OTHER
                if self.inflight.get(run.trigger.trigger_id) is run:
                    del self.inflight[run.trigger.trigger_id]
                for delivery in run.deliveries:
                    groups.setdefault(id(delivery), (delivery, []))[1].append(run)
            self.idle.notify_all()
        for run in handed:
            self.uncount(run)
        for delivery, runs in groups.values():
            self._hand_back_delivery(delivery, runs)
        if handed:
            log.info("handed back %d unstarted trigger(s)", len(handed))

    def _hand_back_delivery(self, delivery: Delivery, runs: list[Run]) -> None:
        tids = {run.trigger.trigger_id for run in runs}
        with self.lock:
            others = [tid for tid in delivery.pending if tid not in tids]
            if not others:  # the whole message is unstarted: nack it
                delivery.pending.clear()
                delivery.requeue = True
                delivery.requeue_delay_s = 0
        if not others:
            self.broker.settle(delivery)
            return
        unique = {run.trigger.trigger_id: run.trigger for run in runs}
        future = self.broker.outbox.put_handback(list(unique.values()), self.config.executor_id)
        future.add_done_callback(functools.partial(self._handed_back, delivery, tids))

    def _handed_back(self, delivery: Delivery, tids: set[str], future: concurrent.futures.Future) -> None:
        if future.cancelled():
            return
        failed = future.exception() is not None
        if failed:
            log.warning("hand-back publish failed (%s); its message will be requeued", future.exception())
        with self.lock:
            for tid in tids:
                delivery.pending.pop(tid, None)
            if failed:
                delivery.requeue = True
                delivery.requeue_delay_s = 0
            ready = not delivery.pending
        if ready:
            self.broker.settle(delivery)

    def wait_idle(self, timeout_s: float) -> bool:
        with self.lock:
            return self.idle.wait_for(lambda: not self.inflight, timeout_s)

    def cancel_running(self) -> None:
        """Step 4: runs still going after the grace are cancelled (§7.5)."""
        with self.lock:
            runs = list(self.inflight.values())
        stopped = sum(1 for run in runs if run.state == RUNNING and run.stop(SHUTDOWN))
        if stopped:
            log.warning("cancelled %d run(s) still going after the shutdown grace", stopped)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


# --------------------------------------------------------------------------
# Process


def main(argv: Optional[list[str]] = None) -> int:
    config, log_level = parse_config(argv)
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(threadName)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("pika").setLevel(logging.WARNING)
    names = Names(config)
    incarnation = secrets.token_hex(8)
    log.info(
        "rondo python executor %s (group %s, namespace %s, incarnation %s), redis %s, handlers %s",
        config.executor_id,
        config.app,
        config.namespace,
        incarnation,
        redact_url(config.redis_url),
        ",".join(sorted(HANDLERS)),
    )

    stop = threading.Event()

    def on_signal(signum, _frame) -> None:
        if stop.is_set():
            log.warning("second signal: exiting at once")
            os._exit(1)
        log.info("signal %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    socket_timeout = max(0.5, config.lease_ms / 2000)
    client = redis.Redis.from_url(
        config.redis_url,
        decode_responses=True,
        socket_timeout=5,
        socket_connect_timeout=5,
        health_check_interval=30,
    )
    registry_client = redis.Redis.from_url(
        config.redis_url,
        decode_responses=True,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_timeout,
    )

    backoff = Backoff(0.25, 5.0)
    while True:
        try:
            other = check_id_not_live_elsewhere(client, names, config)
            break
        except redis.RedisError as err:
            log.warning("Redis unavailable at start (%s); retrying", err)
            if stop.wait(backoff.next()):
                return 0
    if other is not None:
        log.error(
            "executor id %s is live in group %s; ids must be unique in the namespace. Not starting.",
            config.executor_id,
            other,
        )
        return 2

    broker = Broker(config, names, incarnation)
    engine = Engine(config, names, incarnation, client, broker)
    broker.engine = engine
    registrar = Registrar(registry_client, names, config, incarnation, engine.running_jobs)
    engine.on_jobs_changed = registrar.jobs_changed

    broker.start()
    while not (broker.consuming.wait(0.2) or broker.failed.is_set() or stop.is_set()):
        pass
    if broker.consuming.is_set():
        registrar.start()  # only once the queue exists and is consumed (§3.2)
        log.info("registered in %s", names.registry)
    while not (stop.wait(0.5) or broker.failed.is_set()):
        pass
    return shutdown(config, broker, engine, registrar)


def shutdown(config: Config, broker: Broker, engine: Engine, registrar: Registrar) -> int:
    """§9.4: cancel, retire, hand back, let runs finish, close, leave."""
    log.info("graceful stop")
    registered = registrar.ident is not None  # the thread was started
    broker.stop_consuming(timeout_s=5.0)
    if registered:
        registrar.retire()
    engine.hand_back(timeout_s=10.0)
    if not engine.wait_idle(config.shutdown_grace_ms / 1000):
        engine.cancel_running()
        engine.wait_idle(KILL_GRACE_S + PUBLISH_GRACE_S)
    broker.close(timeout_s=10.0)
    if registered:
        registrar.leave()
    engine.close()
    if broker.fatal is not None:
        log.error("stopped after a fatal broker error: %s", broker.fatal)
        return 1
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
