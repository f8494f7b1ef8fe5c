#!/usr/bin/env python3
"""PostgreSQL failover on a real pg_auto_failover formation (issue 41), end to end.

On loopback: a monitor, a primary and a synchronous standby, run by `pg_autoctl` as the
`postgres` user, and `issuing serve` on a URL naming both nodes with
`target_session_attrs=read-write`. Under load (top-ups with idempotency keys,
authorizations with network message ids, card issues, a subscribed webhook receiver):

1. SIGKILL of the primary's postmaster: the monitor promotes the standby while the
   old primary's pg_autoctl restarts its postmaster (it answers again for a moment,
   then is demoted and rejoins as a standby by itself); every request that got no
   success is sent again with the same key or id until it is answered;
2. the checks: every answered operation is there exactly once, `admin verify-ledger`
   passes, every event is delivered, no 5xx but 503;
3. `pg_autoctl perform switchover` fails back to the old primary under load; the checks;
4. 1-3 again with the whole machine lost: SIGKILL of the postmaster and its pg_autoctl
   at once (the monitor waits `primary_demote_timeout` for it), then `pg_autoctl run`
   brings it back as a standby before the switchover.

Prints a report with the measured times (kill -> promotion -> first successful write),
the 503 answers and the retries. Times are reported, not asserted; a 5xx other than 503,
a lost or doubled operation, an undelivered event or a ledger that does not verify fails
the run (exit 1).

    scripts/failover-formation.py --issuing target/release/issuing --dir DIR

DIR must be an empty directory owned by `postgres`; everything (data directories,
pg_autoctl's configuration and state, logs) goes under it. The script stops what it
started on exit; `.ci/failover-formation` wraps it with a time limit and removes DIR.
Needs root (to run `pg_autoctl` as `postgres`), pg_auto_failover 2.0 and PostgreSQL's
binaries (`/usr/lib/postgresql/<version>/bin`), and PyNaCl.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

from issuing_client import (Client, IssuingApiError, IssuingClientError, derive_key,  # noqa: E402
                            open_envelope)

MONITOR_URI_DB = "pg_auto_failover"
DB = "issuing"
# The monitor's settings (GUCs of its pgautofailover extension). primary_demote_timeout
# is what keeps money safe: how long the monitor waits for an old primary to stop
# before it lets the standby take writes. At 3 s a switchover under load promoted the
# standby while the old primary still committed, and answered orders were lost; 10 s
# lost none. The health checks are tightened for loopback so the kill is seen in ~2 s.
MONITOR_SETTINGS = {
    "primary_demote_timeout": "10000",
    "health_check_period": "1000",
    "health_check_retry_delay": "500",
    "health_check_timeout": "1000",
    "health_check_max_retries": "2",
    "node_considered_unhealthy_timeout": "2000",
}

T0 = time.monotonic()


def now() -> float:
    return time.monotonic() - T0


def log(msg: str) -> None:
    print(f"[{now():7.2f}s] {msg}", flush=True)


class Failed(Exception):
    pass


# ---------------------------------------------------------------------------------------
# The formation


class Formation:
    def __init__(self, base: str, ports: Tuple[int, int, int]):
        self.base = base
        self.monitor_port, self.ports = ports[0], {"node1": ports[1], "node2": ports[2]}
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not bins:
            raise Failed("no /usr/lib/postgresql/*/bin")
        self.path = f"{bins[-1]}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        self.procs: Dict[str, subprocess.Popen] = {}
        self.monitor_uri = f"postgres://autoctl_node@127.0.0.1:{self.monitor_port}/{MONITOR_URI_DB}"

    def env_cmd(self) -> List[str]:
        # pg_autoctl keeps its configuration and state under XDG directories: inside the
        # run's directory, so nothing is left in postgres's home.
        b = self.base
        return ["runuser", "-u", "postgres", "--", "env", f"PATH={self.path}",
                f"XDG_CONFIG_HOME={b}/config", f"XDG_DATA_HOME={b}/share",
                f"XDG_RUNTIME_DIR={b}/run", "PGCONNECT_TIMEOUT=2"]

    def autoctl(self, *args: str, timeout: float = 60) -> str:
        cmd = self.env_cmd() + ["pg_autoctl", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise Failed(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def run(self, name: str) -> None:
        """`pg_autoctl run` in a process group of its own, so one signal reaches the
        supervisor, the keeper and the postmaster with its backends."""
        out = open(os.path.join(self.base, f"{name}.log"), "ab")
        p = subprocess.Popen(self.env_cmd() + ["pg_autoctl", "run", "--pgdata", self.pgdata(name)],
                             stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        self.procs[name] = p
        # For the wrapper's trap, in case this script itself is killed.
        with open(os.path.join(self.base, f"{name}.pgid"), "w") as f:
            f.write(str(p.pid))

    def pgdata(self, name: str) -> str:
        return os.path.join(self.base, name)

    def port(self, name: str) -> int:
        return self.monitor_port if name == "monitor" else self.ports[name]

    def sql(self, name: str, query: str, db: str = DB, user: str = "postgres",
            check: bool = True) -> Optional[str]:
        r = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port(name)), "-U", user,
                            "-d", db, "-XAtqc", query], capture_output=True, text=True,
                           timeout=10, env={**os.environ, "PGCONNECT_TIMEOUT": "1"})
        if r.returncode != 0:
            if check:
                raise Failed(f"psql on {name}: {query}: {r.stderr.strip()}")
            return None
        return r.stdout.strip()

    def wait(self, what: str, cond, within: float, every: float = 0.2):
        deadline = time.monotonic() + within
        while True:
            v = cond()
            if v:
                return v
            if time.monotonic() > deadline:
                raise Failed(f"timed out after {within:.0f} s waiting for {what}\n{self.state()}")
            time.sleep(every)

    def writable(self, name: str) -> bool:
        """As the service asks: a session that accepts writes."""
        return self.sql(name, "SHOW transaction_read_only", check=False) == "off"

    def state(self) -> str:
        return self.sql("monitor", "SELECT string_agg(nodename || ' ' || reportedstate || '/' "
                        "|| goalstate, ', ' ORDER BY nodename) FROM pgautofailover.node",
                        db=MONITOR_URI_DB, check=False) or "(monitor does not answer)"

    def states(self) -> Dict[str, str]:
        out = {}
        for part in self.state().split(", "):
            bits = part.split(" ")
            if len(bits) == 2:
                out[bits[0]] = bits[1]
        return out

    def create(self) -> None:
        common = ["--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl"]
        self.autoctl("create", "monitor", "--pgdata", self.pgdata("monitor"),
                     "--pgport", str(self.monitor_port), *common)
        self.run("monitor")
        self.wait("the monitor", lambda: self.sql("monitor", "SELECT 1", db=MONITOR_URI_DB,
                                                   check=False) == "1", 30)
        for k, v in MONITOR_SETTINGS.items():
            self.sql("monitor", f"ALTER SYSTEM SET pgautofailover.{k} = {v}", db=MONITOR_URI_DB)
        self.sql("monitor", "SELECT pg_reload_conf()", db=MONITOR_URI_DB)
        for name in ("node1", "node2"):
            self.autoctl("create", "postgres", "--pgdata", self.pgdata(name),
                         "--pgport", str(self.ports[name]), "--name", name, "--dbname", DB,
                         "--monitor", self.monitor_uri, *common, timeout=120)
            self.run(name)
            if name == "node1":
                self.wait("node1 to accept writes", lambda: self.writable("node1"), 60)
                # A rejoin whose pg_rewind fails falls back to pg_basebackup, which waits
                # for a checkpoint: spread over checkpoint_timeout unless this is 0.
                # ALTER SYSTEM's file is copied to the standby by its base backup.
                self.sql("node1", "ALTER SYSTEM SET checkpoint_completion_target = 0")
                self.sql("node1", "SELECT pg_reload_conf()")
        self.wait("node1 primary, node2 secondary",
                  lambda: self.states() == {"node1": "primary/primary", "node2": "secondary/secondary"}, 90)
        self.check_sync("node1")

    def check_sync(self, primary: str) -> str:
        names = self.wait(f"synchronous_standby_names on {primary}",
                          lambda: self.sql(primary, "SHOW synchronous_standby_names"), 30)
        sc = self.sql(primary, "SHOW synchronous_commit")
        if sc not in ("on", "remote_apply", "remote_write"):
            raise Failed(f"synchronous_commit is {sc!r} on {primary}")
        return f"{names} (synchronous_commit={sc})"

    def kill_machine(self, name: str) -> None:
        """SIGKILL of the node's postmaster and its pg_autoctl at once: the machine is lost."""
        p = self.procs.pop(name)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        self.forget(name)

    def kill_postmaster(self, name: str) -> None:
        """SIGKILL of the postmaster alone: its pg_autoctl restarts it on the same machine
        a few seconds later, while the monitor is already failing over."""
        with open(os.path.join(self.pgdata(name), "postmaster.pid")) as f:
            pid = int(f.readline())
        os.kill(pid, signal.SIGKILL)

    def stop_all(self) -> None:
        for name, p in list(self.procs.items()):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for name, p in list(self.procs.items()):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
            # Children (postgres) that outlived their supervisor.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.forget(name)
        self.procs.clear()

    def forget(self, name: str) -> None:
        """The group is gone: the wrapper's trap must not signal its id, which the
        system may give to another process later."""
        try:
            os.remove(os.path.join(self.base, f"{name}.pgid"))
        except FileNotFoundError:
            pass


# ---------------------------------------------------------------------------------------
# The webhook receiver


class Receiver:
    def __init__(self, api_key: str, api_secret: str):
        self.key = derive_key(api_secret)
        self.api_key = api_key
        self.lock = threading.Lock()
        self.deliveries: Dict[str, Dict[str, Any]] = {}
        self.attempts = 0
        receiver = self

        class Hook(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("API-KEY") != receiver.api_key:
                    return self.answer(401, {"success": False})
                event = json.loads(open_envelope(receiver.key, json.loads(body)["encrypted"]))
                with receiver.lock:
                    receiver.attempts += 1
                    receiver.deliveries.setdefault(event["delivery_id"], event)
                self.answer(200, {"success": True})

            def answer(self, status, body):
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def keys(self) -> Counter:
        """What each delivered event is about, counted once per delivery."""
        c: Counter = Counter()
        with self.lock:
            for ev in self.deliveries.values():
                if "event_type" in ev:
                    c[(ev["event_type"], ev["data"].get("order_id"))] += 1
                elif ev.get("type") == "card_transaction":
                    c[("card_transaction", ev["transaction_id"])] += 1
        return c


# ---------------------------------------------------------------------------------------
# The load


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.status: Counter = Counter()
        self.unanswered = 0  # transport errors: no answer at all
        self.retried_ops = 0
        self.other_5xx: List[str] = []
        self.unexpected: List[str] = []
        self.writes: List[Tuple[float, float]] = []  # (sent, answered) of successful writes
        self.s503: List[float] = []
        self.answers: List[Tuple[float, float, int]] = []  # (sent, answered, status)

    def add(self, **kw):
        with self.lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)


class Load:
    """Operations, each sent until it is answered: a success is recorded with what it
    returned; a 503, no answer, or a key still in progress are sent again, with the same
    idempotency key or network message id."""

    def __init__(self, client: Client, stats: Stats, user: str, auth_cards: List[str],
                 setup_orders: List[str]):
        self.c = client
        self.setup_orders = setup_orders
        self.stats = stats
        self.user = user
        self.auth_cards = auth_cards
        self.lock = threading.Lock()
        self.topups: Dict[str, str] = {}  # idempotency key -> order_id
        self.issues: Dict[str, Tuple[str, str]] = {}  # key -> (order_id, card_id)
        self.auths: Dict[str, Tuple[str, str]] = {}  # network_message_id -> (card_id, transaction_id)
        self.completed: set = set()  # orders seen completed by an earlier check
        self.answered_at: Dict[str, float] = {}  # order or transaction id -> when answered
        self.read = Read()
        self.stop = threading.Event()
        self.threads: List[threading.Thread] = []

    def send(self, path: str, fields: Dict[str, Any], key: Optional[str] = None) -> Dict[str, Any]:
        tries = 0
        while True:
            tries += 1
            if tries == 2:
                self.stats.add(retried_ops=1)
            sent = now()
            try:
                status, body = self.c.request(path, fields, idempotency_key=key)
            except IssuingClientError:
                self.stats.add(unanswered=1)
                time.sleep(0.25)
                continue
            answered = now()
            with self.stats.lock:
                self.stats.answers.append((sent, answered, status))
                self.stats.status[status] += 1
                if status == 503:
                    self.stats.s503.append(answered)
            if status == 200 and body.get("success") is True:
                with self.stats.lock:
                    self.stats.writes.append((sent, answered))
                return body
            if status == 503:
                if body.get("error_slug") != "service_unavailable":
                    self.stats.unexpected.append(f"{path}: 503 {body}")
                time.sleep(0.25)
                continue
            if status >= 500:
                self.stats.other_5xx.append(f"{path}: {status} {body}")
                time.sleep(0.25)
                continue
            if status == 400 and body.get("error_slug") == "idempotency_conflict" \
                    and "in progress" in str(body.get("error")):
                time.sleep(0.5)
                continue
            self.stats.unexpected.append(f"{path} {fields}: {status} {body}")
            raise Failed(f"{path}: unexpected answer {status} {body}")

    def topup(self, card: str) -> None:
        key = f"fo-topup-{uuid.uuid4().hex}"
        body = self.send("cards/topup", {"card_id": card, "amount": "10"}, key)
        with self.lock:
            self.topups[key] = body["order_id"]
            self.answered_at[body["order_id"]] = now()

    def issue(self) -> None:
        key = f"fo-card-{uuid.uuid4().hex}"
        body = self.send("cards/create", {"external_user_id": self.user,
                                          "product_code": "virtual_usd"}, key)
        with self.lock:
            self.issues[key] = (body["order"]["order_id"], body["card_id"])
            self.answered_at[body["order"]["order_id"]] = now()

    def auth(self, card: str) -> None:
        mid = f"fo-net-{uuid.uuid4().hex}"
        body = self.send("simulate/cards/auth", {"card_id": card, "transactionAmount": "1.00",
                                                 "network_message_id": mid})
        with self.lock:
            self.auths[mid] = (card, body["transactionId"])
            self.answered_at[body["transactionId"]] = now()

    def worker(self, n: int) -> None:
        rnd = random.Random(n)
        try:
            while not self.stop.is_set():
                kind = rnd.choice(("topup", "topup", "auth", "auth", "issue"))
                card = rnd.choice(self.auth_cards)
                if kind == "topup":
                    self.topup(card)
                elif kind == "auth":
                    self.auth(card)
                else:
                    self.issue()
                # A steady load, not a flood: the checks wait for every order to finish.
                time.sleep(0.05)
        except Failed as e:
            self.stats.unexpected.append(str(e))

    def start(self, workers: int) -> None:
        self.stop.clear()
        self.threads = [threading.Thread(target=self.worker, args=(i,), daemon=True)
                        for i in range(workers)]
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        """Stops the load; every operation begun is answered before this returns."""
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)
            if t.is_alive():
                raise Failed("a load thread did not finish within 120 s")


# ---------------------------------------------------------------------------------------
# The checks


class Read:
    """What the checks have read so far: each check reads only what is new (paging over
    everything each time grows with the square of the run)."""

    def __init__(self):
        self.master: Dict[str, Dict[str, Any]] = {}  # ledger entry id -> movement
        self.since: Optional[str] = None
        self.auths: Dict[str, set] = {}  # card -> its authorizations' transaction ids

    def master_moves(self, c: Client) -> List[Dict[str, Any]]:
        # Every type, filtered here: the `types` filter took seconds a page on these
        # freshly filled tables (their planner statistics not gathered yet).
        fields: Dict[str, Any] = {"sort_dir": "asc"}
        if self.since:
            fields["created_from"] = self.since  # inclusive: entries are keyed by id
        skip = 0
        while True:
            body = c.invoke("project/txs", {**fields, "skip": skip, "limit": 100})
            for t in body["items"]:
                self.master[t["id"]] = t
                self.since = max(self.since or t["created_at"], t["created_at"])
            skip += len(body["items"])
            if skip >= body["total"] or not body["items"]:
                return list(self.master.values())

    def card_auths(self, c: Client, card: str, user: str) -> set:
        """Newest first, until a page holds nothing new (an authorization left pending
        does not change, so what was read before is all behind)."""
        known = self.auths.setdefault(card, set())
        skip = 0
        while True:
            body = c.invoke("cards/txs", {"card_id": card, "external_user_id": user, "slug": "auth",
                                          "skip": skip, "limit": 100, "sort_dir": "desc"})
            ids = [t["transaction_id"] for t in body["items"]]
            new = [i for i in ids if i not in known]
            known.update(ids)
            skip += len(ids)
            if not new or skip >= body["total"]:
                return known


def once(what: str, answered: List[str], seen: Counter, total: int,
         at: Optional[Dict[str, float]] = None) -> List[str]:
    problems = []
    for oid in answered:
        if seen[oid] != 1:
            when = f" (answered at {at[oid]:.2f} s)" if at and oid in at else ""
            problems.append(f"{what} {oid} answered success{when} but found {seen[oid]} times")
    extra = [k for k, n in seen.items() if n != 1]
    if extra:
        problems.append(f"{what}: {len(extra)} ids more than once, e.g. {extra[:3]}")
    if sum(seen.values()) != total:
        problems.append(f"{what}: {sum(seen.values())} found, {total} sent")
    return problems


def check(load: Load, setup_issues: int, c: Client, rx: Receiver, issuing: str,
          env: Dict[str, str], label: str) -> Dict[str, Any]:
    problems: List[str] = []
    began = now()
    txs = [t for t in load.read.master_moves(c) if t["type"] in ("card_topup", "card_issue")]
    read_master = now() - began
    topups = Counter(t["order_id"] for t in txs if t["type"] == "card_topup")
    issues = Counter(t["order_id"] for t in txs if t["type"] == "card_issue")
    # The setup cards' initial top-ups are lines of their card_issue order's.
    setup_orders = set(load.setup_orders)
    topups_only = Counter({k: v for k, v in topups.items() if k not in setup_orders})
    problems += once("top-up order", list(load.topups.values()), topups_only, len(load.topups),
                     load.answered_at)
    issue_ids = [o for o, _ in load.issues.values()]
    problems += once("card issue order", issue_ids + list(setup_orders), issues,
                     len(load.issues) + setup_issues, load.answered_at)
    # Authorizations: per card, every network message id gave one transaction.
    by_card: Dict[str, List[str]] = {}
    for card, tx in load.auths.values():
        by_card.setdefault(card, []).append(tx)
    auth_count = 0
    for card, answered in by_card.items():
        items = load.read.card_auths(c, card, load.user)
        seen = Counter(items)
        problems += once(f"authorization on {card}", answered, seen, len(answered), load.answered_at)
        auth_count += len(items)
    log(f"read {len(txs)} master movements ({read_master:.1f} s) and {auth_count} authorizations "
        f"({now() - began - read_master:.1f} s)")
    # Orders finish by themselves.
    orders = [o for o in list(load.topups.values()) + issue_ids if o not in load.completed]

    def finished(oid: str) -> str:
        try:
            return c.wait_order(oid, timeout=90, interval=0.5)["status"]
        except IssuingApiError as e:
            problems.append(f"order {oid}, answered at {load.answered_at.get(oid, 0):.2f} s: {e}")
            return e.slug

    started = now()
    with ThreadPoolExecutor(8) as ex:
        statuses = Counter(ex.map(finished, orders))
    log(f"{len(orders)} orders finished ({dict(statuses)}) within {now() - started:.1f} s of the check")
    if set(statuses) == {"completed"}:
        load.completed.update(orders)
    if set(statuses) - {"completed"}:
        problems.append(f"orders not completed: {dict(statuses)}")
    # Every event is delivered: the receiver has each one, and nothing is left pending.
    want = set()
    for oid in load.topups.values():
        want.add(("card.topup", oid))
    for oid in issue_ids:
        want.add(("card.created", oid))
    for _, tx in load.auths.values():
        want.add(("card_transaction", tx))
    deadline = time.monotonic() + 60
    while True:
        got = rx.keys()
        missing = want - set(got)
        pending = c.invoke("wh/deliveries", {"state": "pending", "limit": 1})["total"]
        if (not missing and pending == 0) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    failed = c.invoke("wh/deliveries", {"state": "failed", "limit": 1})["total"]
    if missing:
        problems.append(f"{len(missing)} events never reached the receiver, e.g. {sorted(missing)[:3]}")
    if pending or failed:
        problems.append(f"deliveries pending {pending}, failed {failed}")
    r = subprocess.run([issuing, "admin", "verify-ledger"], capture_output=True, text=True,
                       env=env, timeout=120)
    if r.returncode != 0 or "ledger ok" not in r.stdout:
        problems.append(f"verify-ledger: {r.stdout}{r.stderr}")
    if problems:
        raise Failed(f"checks after {label}:\n  " + "\n  ".join(problems))
    result = {"topups": len(load.topups), "card_issues": len(load.issues),
              "authorizations": auth_count, "events_delivered": len(want),
              "receiver_attempts": rx.attempts}
    log(f"checks after {label}: ok {result}; verify-ledger: ledger ok")
    return result


# ---------------------------------------------------------------------------------------
# The run


def metrics(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def ready(base: str) -> int:
    try:
        with urllib.request.urlopen(f"{base}/ready", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Watch:
    """Polls whether `node` accepts writes and whether the service is ready (a psql and a
    GET, then 100 ms: about every 0.2 s) and records when each changed. Polls `old`, the
    primary being replaced, too: whether it ever accepted writes with no synchronous
    standby (what it commits then is on it alone, and lost when it is rewound)."""

    def __init__(self, f: Formation, node: str, old: str, base: str):
        self.writable_at: Optional[float] = None
        self.ready_down_at: Optional[float] = None
        self.ready_at: Optional[float] = None
        self.alone: List[float] = []  # when `old` was seen writable without a sync standby
        self.stop = threading.Event()

        def run():
            while not self.stop.is_set():
                if self.writable_at is None and f.writable(node):
                    self.writable_at = now()
                s = ready(base)
                if s != 200 and self.ready_down_at is None:
                    self.ready_down_at = now()
                if s == 200 and self.ready_down_at is not None and self.ready_at is None:
                    self.ready_at = now()
                time.sleep(0.1)

        def run_old():
            while not self.stop.is_set():
                got = f.sql(old, "SELECT current_setting('transaction_read_only') || '|' || "
                            "current_setting('synchronous_standby_names')", check=False)
                if got == "off|":
                    self.alone.append(now())
                time.sleep(0.1)

        self.threads = [threading.Thread(target=run, daemon=True),
                        threading.Thread(target=run_old, daemon=True)]
        for t in self.threads:
            t.start()

    def done(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def phase(name: str, start: float, w: Watch, stats: Stats, s503_before: int) -> Dict[str, Any]:
    promo = w.writable_at
    first = min((a for s, a in stats.writes if promo is not None and a > promo), default=None)
    s503 = stats.s503[s503_before:]
    out = {
        "phase": name,
        "to_promotion_s": round(promo - start, 2) if promo else None,
        "promotion_to_first_write_s": round(first - promo, 2) if first and promo else None,
        "ready_503_s": round(w.ready_at - w.ready_down_at, 2) if w.ready_at and w.ready_down_at else None,
        "answered_503": len(s503),
        "first_503_to_last_503_s": round(s503[-1] - s503[0], 2) if s503 else None,
    }
    # The slowest answer of the phase: a 503 is meant to come at once, not after a wait.
    slow = max(((a - s, st) for s, a, st in stats.answers if a >= start), default=(0.0, 0))
    out["slowest_answer_s"] = round(slow[0], 2)
    out["slowest_answer_status"] = slow[1]
    # Seen writable with no synchronous standby: from the first to the last such sample.
    out["old_primary_alone_s"] = round(w.alone[-1] - w.alone[0] + 0.1, 2) if w.alone else 0
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--issuing", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ports", default="55430,55431,55432")
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--keep-logs", help="on failure, copy the nodes' and the service's logs here")
    args = ap.parse_args()
    ports = tuple(int(p) for p in args.ports.split(","))
    issuing = os.path.abspath(args.issuing)
    base_dir = os.path.abspath(args.dir)
    f = Formation(base_dir, ports)  # type: ignore[arg-type]
    serve: Optional[subprocess.Popen] = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    report: Dict[str, Any] = {}
    try:
        log(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: creating the formation: "
            "the monitor, node1 (primary) and node2 (standby)")
        f.create()
        nss = f.autoctl("get", "formation", "number-sync-standbys", "--monitor", f.monitor_uri).strip()
        log(f"formation: {f.state()}; number_sync_standbys {nss}; synchronous_standby_names on node1: "
            f"{f.check_sync('node1')}; max_connections {f.sql('node1', 'SHOW max_connections')}")

        url = (f"postgres://postgres@127.0.0.1:{ports[1]},127.0.0.1:{ports[2]}/{DB}"
               "?target_session_attrs=read-write")
        data = os.path.join(base_dir, "issuing")
        os.makedirs(data)
        env = {**os.environ, "ISSUING_DATABASE_URL": url, "ISSUING_DATA_DIR": data}
        metrics_url = f"http://127.0.0.1:{free_port()}/metrics"
        out = open(os.path.join(base_dir, "serve.out"), "w")
        err = open(os.path.join(base_dir, "serve.err"), "w")
        serve = subprocess.Popen([issuing, "serve", "--listen", "127.0.0.1:0",
                                  "--metrics-listen", metrics_url.split("/")[2],
                                  "--console-listen", "off", "--webhook-retry-interval", "1"],
                                 stdout=out, stderr=err, env=env)
        text = ""
        deadline = time.monotonic() + 60
        while "issuing listening on" not in text:
            if serve.poll() is not None or time.monotonic() > deadline:
                raise Failed(f"issuing serve did not start:\n{open(err.name).read()[-3000:]}")
            time.sleep(0.2)
            text = open(out.name).read()
        base = re.search(r"issuing listening on (\S+)/api/v2", text).group(1)  # type: ignore[union-attr]
        key = re.search(r"api_key:\s*(\S+)", text).group(1)  # type: ignore[union-attr]
        secret = re.search(r"api_secret:\s*(\S+)", text).group(1)  # type: ignore[union-attr]
        log(f"issuing serve on {base}, database {url}")

        c = Client(base, key, secret, timeout=15)
        c.sync_clock()
        c.invoke("simulate/project/deposit", {"amount": "1000000"})
        rx = Receiver(key, secret)
        c.invoke("wh/subscribe", {"url": rx.url})
        user = "fo-holder"
        c.invoke("cardholders/create", {
            "external_user_id": user, "subprovider_code": "sandbox",
            "kyc_data": {"first_name": "Ada", "last_name": "Lovelace", "birth_date": "1990-12-10",
                         "email": "ada@example.com", "phone_number_full": "+447700900123",
                         "country_iso": "GB", "address": {"line1": "1 Analytical Way", "city": "London",
                                                          "postal_code": "N1 1AA", "country_iso": "GB"}}})
        cards, setup_orders = [], []
        for i in range(4):
            body = c.invoke("cards/create", {"external_user_id": user, "product_code": "virtual_usd",
                                             "initial_topup": "5000"}, idempotency_key=f"fo-setup-{i}")
            cards.append(body["card_id"])
            setup_orders.append(body["order"]["order_id"])
        for oid in setup_orders:
            if c.wait_order(oid)["status"] != "completed":
                raise Failed(f"setup card order {oid} did not complete")
        stats = Stats()
        load = Load(c, stats, user, cards, setup_orders)

        report["phases"] = []

        def failover(kind: str) -> None:
            """node1, the primary, is lost under load; node2 is promoted."""
            load.start(args.workers)
            time.sleep(4)
            w = Watch(f, "node2", "node1", base)
            what = "postmaster" if kind == "postmaster" else "postmaster and pg_autoctl (the machine)"
            log(f"load running ({args.workers} threads); SIGKILL of node1's {what}")
            n503 = len(stats.s503)
            killed = now()
            if kind == "postmaster":
                f.kill_postmaster("node1")
            else:
                f.kill_machine("node1")
            f.wait("node2 to be promoted", lambda: w.writable_at, 90, every=0.1)
            log(f"node2 accepts writes {w.writable_at - killed:.2f} s after the kill; {f.state()}")
            f.wait("the service's first write after the promotion",
                   lambda: any(a > w.writable_at for _, a in stats.writes), 60, every=0.1)
            f.wait("/ready to answer 200 again", lambda: w.ready_at, 30, every=0.1)
            time.sleep(3)
            load.finish()
            w.done()
            r = phase(f"failover: SIGKILL of the primary's {what}", killed, w, stats, n503)
            log(f"{r}")
            r["checked"] = check(load, len(setup_orders), c, rx, issuing, env, r["phase"])
            report["phases"].append(r)

        def failback(kind: str) -> None:
            """node1 is a synchronous standby again; a switchover under load makes it the
            primary."""
            load.start(args.workers)
            back = now()
            if kind == "machine":
                f.run("node1")
            f.wait("node1 to rejoin as a standby",
                   lambda: f.states() == {"node1": "secondary/secondary", "node2": "primary/primary"}, 120)
            rejoin = now() - back
            log(f"node1 is a standby again {rejoin:.2f} s after the checks"
                f"{' and its restart' if kind == 'machine' else ''}; synchronous_standby_names on node2: "
                f"{f.check_sync('node2')}")
            time.sleep(2)
            w = Watch(f, "node1", "node2", base)
            n503 = len(stats.s503)
            switched = now()
            log("pg_autoctl perform switchover (back to node1), under load")
            f.autoctl("perform", "switchover", "--monitor", f.monitor_uri, timeout=120)
            f.wait("node1 to be promoted", lambda: w.writable_at, 90, every=0.1)
            f.wait("the service's first write after the switchover",
                   lambda: any(a > w.writable_at for _, a in stats.writes), 60, every=0.1)
            f.wait("node1 primary, node2 secondary",
                   lambda: f.states() == {"node1": "primary/primary", "node2": "secondary/secondary"}, 120)
            time.sleep(3)
            load.finish()
            w.done()
            r = phase("failback: switchover to the old primary", switched, w, stats, n503)
            r["rejoin_s"] = round(rejoin, 2)
            log(f"{r}")
            r["checked"] = check(load, len(setup_orders), c, rx, issuing, env, r["phase"])
            report["phases"].append(r)

        # The postmaster alone first: its pg_autoctl restarts it while the monitor is
        # already promoting node2, so the old primary answers again for a moment (the
        # service may go back to it) before it is demoted. Then the whole machine: the
        # monitor waits primary_demote_timeout for a primary that never answers.
        for kind in ("postmaster", "machine"):
            failover(kind)
            failback(kind)

        # -- The service's own account.
        text = metrics(metrics_url)
        http_5xx = {}
        for m in re.finditer(r'^issuing_http_requests_total\{[^}]*status="(5\d\d)"[^}]*\} (\d+)', text, re.M):
            http_5xx[m.group(1)] = http_5xx.get(m.group(1), 0) + int(m.group(2))
        outages = re.search(r"^issuing_database_unavailable_total (\d+)", text, re.M)
        # The watcher's own lines: one per outage, move and recovery.
        logs = [ln for ln in open(err.name).read().splitlines() if "issuing_store::db::hosts" in ln]
        report["requests"] = dict(sorted(Counter({str(k): v for k, v in stats.status.items()}).items()))
        report["unanswered_requests"] = stats.unanswered
        report["operations_retried"] = stats.retried_ops
        report["metrics_5xx"] = http_5xx
        report["metrics_outages"] = int(outages.group(1)) if outages else None
        if stats.other_5xx or any(k != "503" for k in http_5xx):
            raise Failed(f"5xx other than 503: {stats.other_5xx[:5]} metrics {http_5xx}")
        if stats.unexpected:
            raise Failed(f"unexpected answers: {stats.unexpected[:5]}")

        print("\n== PostgreSQL failover on a pg_auto_failover formation: report ==")
        for r in report["phases"]:
            print(f"{r['phase']}:")
            verb = "kill" if r["phase"].startswith("failover") else "switchover"
            if "rejoin_s" in r:
                print(f"  old primary a synchronous standby again: {r['rejoin_s']} s")
            print(f"  {verb} -> new primary accepts writes: {r['to_promotion_s']} s")
            print(f"  promotion -> the service's first successful write: {r['promotion_to_first_write_s']} s")
            print(f"  /ready not 200 for: {r['ready_503_s']} s")
            print(f"  requests answered 503: {r['answered_503']} "
                  f"(first to last: {r['first_503_to_last_503_s']} s)")
            print(f"  slowest answer: {r['slowest_answer_s']} s (HTTP {r['slowest_answer_status']})")
            print(f"  old primary seen writable without a synchronous standby: {r['old_primary_alone_s']} s")
        print(f"answers by status: {report['requests']}; no answer (sent again): "
              f"{report['unanswered_requests']}; operations sent more than once: {report['operations_retried']}")
        print(f"metrics: 5xx by status {report['metrics_5xx']}, "
              f"issuing_database_unavailable_total {report['metrics_outages']}")
        print(f"checked after each phase, in all: {report['phases'][-1]['checked']} -- each answered "
              "operation exactly once, every event delivered, ledger ok")
        print("service logs:")
        for ln in logs:
            print(f"  {ln[:300]}")
        print(f"total {now():.1f} s")
        print("RESULT: ok")
        return 0
    except (Failed, IssuingClientError, IssuingApiError, OSError, subprocess.SubprocessError) as e:
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        if args.keep_logs:
            os.makedirs(args.keep_logs, exist_ok=True)
            for p in glob.glob(os.path.join(base_dir, "*.log")) + glob.glob(os.path.join(base_dir, "serve.*")):
                subprocess.run(["cp", p, args.keep_logs])
            for name in ("node1", "node2"):
                subprocess.run(["cp", "-r", os.path.join(base_dir, name, "log"),
                                os.path.join(args.keep_logs, f"{name}-pglog")])
            try:
                with open(os.path.join(args.keep_logs, "events.txt"), "w") as out:
                    out.write(f.autoctl("show", "events", "--count", "200", "--monitor", f.monitor_uri))
            except (Failed, subprocess.SubprocessError) as e2:
                print(f"no events: {e2}", file=sys.stderr)
            print(f"logs kept in {args.keep_logs}", file=sys.stderr)
        for name in ("node1", "node2", "monitor"):
            p = os.path.join(base_dir, f"{name}.log")
            if os.path.exists(p):
                print(f"--- {name}.log (tail)", file=sys.stderr)
                print("".join(open(p, errors="replace").readlines()[-15:]), file=sys.stderr)
        p = os.path.join(base_dir, "serve.err")
        if os.path.exists(p):
            print("--- serve.err (tail)", file=sys.stderr)
            print("".join(open(p, errors="replace").readlines()[-30:]), file=sys.stderr)
        return 1
    finally:
        if serve is not None and serve.poll() is None:
            serve.terminate()
            try:
                serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                serve.kill()
        f.stop_all()


if __name__ == "__main__":
    sys.exit(main())
