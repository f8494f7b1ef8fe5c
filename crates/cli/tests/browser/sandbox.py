"""A live `issuing serve` sandbox for the console's browser tests and screenshots.

Starts the release binary on a fresh data directory (SQLite, or a PostgreSQL URL given
with ISSUING_BROWSER_DATABASE_URL), reads the first-run banner (demo API credentials,
the console's address and its admin password), and seeds what the pages show: cards,
card transactions (one declined), a top-up, and webhook deliveries that fail against a
local receiver answering 500 until told otherwise.
"""

import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO / "clients" / "python"))

from issuing_client import Client  # noqa: E402

KYC = {
    "first_name": "Ada", "last_name": "Lovelace", "birth_date": "1990-12-10",
    "email": "ada@example.com", "phone_number_full": "+447700900123", "country_iso": "GB",
}


class Receiver:
    """A webhook receiver on 127.0.0.1: answers 500 until `succeed` is set."""

    def __init__(self):
        self.succeed = False
        self.hits = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.hits += 1
                body = b'{"success": true}' if outer.succeed else b'{"success": false}'
                self.send_response(200 if outer.succeed else 500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def postgres_beside(url, suffix):
    """A new database `<name>_<suffix>` on the server of `url` (through psql), its URL
    and how to drop it: each sandbox's first run needs an empty database."""
    base, _, query = url.partition("?")
    server, name = base.rsplit("/", 1)
    fresh = f"{name}_{suffix}"
    admin = f"{server}/postgres" + (f"?{query}" if query else "")
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {fresh}"], check=True)

    def drop():
        subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {fresh} WITH (FORCE)"], check=False)

    return f"{server}/{fresh}" + (f"?{query}" if query else ""), drop


class Sandbox:
    def __init__(self, binary=None, database_url=None, own_database=None):
        """`own_database`: on PostgreSQL, run on a new database named after it beside
        ISSUING_BROWSER_DATABASE_URL's (dropped at `close`), so several test classes
        each get a first run."""
        binary = binary or os.environ.get("ISSUING_BIN") or str(REPO / "target" / "release" / "issuing")
        database_url = database_url or os.environ.get("ISSUING_BROWSER_DATABASE_URL")
        self.drop_database = None
        if database_url and own_database:
            database_url, self.drop_database = postgres_beside(database_url, own_database)
        self.dir = tempfile.mkdtemp(prefix="issuing-console-")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ISSUING_")}
        env.update({
            "ISSUING_CONSOLE_LISTEN": "127.0.0.1:0",
            "ISSUING_WEBHOOK_RETRY_INTERVAL": "1",
            "ISSUING_WEBHOOK_MAX_AGE": "3",
            "ISSUING_LOG": "warn",
        })
        args = [binary, "--data-dir", self.dir]
        if database_url:
            args += ["--database-url", database_url]
        args += ["serve", "--listen", "127.0.0.1:0"]
        self.stderr = open(Path(self.dir) / "stderr.log", "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env)
        banner = {}
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"issuing serve exited: {banner}")
            m = re.match(r"^\s*(\w+):\s+(\S+)", line)
            if m:
                banner[m.group(1)] = m.group(2)
            if line.startswith("issuing console on "):
                self.console = line.split()[-1].rstrip("/").removesuffix("/console")
            if line.startswith("issuing listening on "):
                self.base = line.split()[-1].removesuffix("/api/v2")
                break
        # Keep draining stdout so the server never blocks on a full pipe.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.email = banner["console_email"]
        self.password = banner["console_password"]
        self.project_id = banner["project_id"]
        self.api_key = banner["api_key"]
        self.api_secret = banner["api_secret"]
        self.client = Client(self.base, self.api_key, self.api_secret)
        self.receiver = Receiver()

    def card(self, user, topup=None):
        """A user's active card (optionally topped up); returns cards/get."""
        self.client.cardholders_create(external_user_id=user, subprovider_code="sandbox", kyc_data=KYC)
        created = self.client.cards_create(external_user_id=user, product_code="virtual_usd",
                                           idempotency_key=f"card-{user}")
        order = self.client.wait_order(created["order"]["order_id"])
        assert order["status"] == "completed", order
        card_id = created["card_id"]
        if topup:
            top = self.client.cards_topup(card_id=card_id, amount=topup, idempotency_key=f"top-{user}")
            self.client.wait_order(top["order"]["order_id"] if "order" in top else top["order_id"])
        return self.client.cards_get(card_id=card_id, external_user_id=user)

    def seed(self):
        """Cards, transactions, and deliveries that fail until the receiver succeeds."""
        self.client.wh_subscribe(url=self.receiver.url, title="console demo")
        cards = [self.card(u, topup="50") for u in ("alice", "bob", "carol")]
        for card in cards:
            self.client.simulate_cards_auth(card_id=card["card_id"], transactionAmount="12.50",
                                            merchant={"name": "Coffee Bar", "mcc": "5814", "country": "US"})
        auth = self.client.simulate_cards_auth(card_id=cards[0]["card_id"], transactionAmount="7.20",
                                               merchant={"name": "Book Shop", "mcc": "5942", "country": "GB"})
        self.client.simulate_cards_clear(transactionId=auth["transactionId"])
        self.client.simulate_cards_auth(card_id=cards[1]["card_id"], transactionAmount="900",
                                        merchant={"name": "Yacht Club", "mcc": "4457", "country": "US"})
        self.cards = cards
        return cards

    def wait_failed_deliveries(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            page = self.client.wh_deliveries(state="failed")
            if page.get("total", 0) > 0:
                return page["items"]
            time.sleep(0.5)
        raise AssertionError("no delivery failed in time")

    def close(self):
        self.receiver.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.drop_database:
            self.drop_database()


def chrome(user_data_dir, width=1400, height=1000):
    """Debian's Chromium through its chromedriver: nothing is downloaded at run time."""
    os.environ.setdefault("SE_OFFLINE", "true")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--window-size={width},{height}",
                 f"--user-data-dir={user_data_dir}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=options)
