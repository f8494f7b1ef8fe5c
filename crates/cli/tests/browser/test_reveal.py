"""Reveal sessions (CONTRACT §16) in a real Chromium (Debian's chromium + chromium-driver,
driven by Selenium): a page of the session's origin (`issuing reveal-demo`) frames the
reveal page and the browser shows the card's number, expiry and CVV; a page of another
origin frames one and the browser shows nothing, the API having refused the frame (403)
and left the session usable; a page that sends no Referer is served the frame and the
browser refuses to show it (`frame-ancestors`).

    python3 -m unittest discover -s crates/cli/tests/browser -v

needs `target/release/issuing` (or ISSUING_BIN); ISSUING_BROWSER_DATABASE_URL runs it on
PostgreSQL instead of SQLite.
"""

import http.server
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from sandbox import REPO, Sandbox, chrome

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait


class Pages:
    """Another site on 127.0.0.1 (another port, so another origin): `/frame?src=URL`
    frames URL; with `policy=no-referrer` the page asks the browser to send no Referer."""

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                src = query.get("src", [""])[0]
                body = (f'<!doctype html><html><body><h1>Another site</h1>'
                        f'<iframe id="reveal" src="{src}" width="400" height="170"></iframe>'
                        f'</body></html>').encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                if query.get("policy") == ["no-referrer"]:
                    self.send_header("Referrer-Policy", "no-referrer")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def frame(self, url, policy=None):
        q = {"src": url}
        if policy:
            q["policy"] = policy
        return f"{self.origin}/frame?{urllib.parse.urlencode(q)}"

    def close(self):
        self.server.shutdown()


def fetch(url, referer=None):
    """(status, body) of a GET, as a client outside any browser."""
    req = urllib.request.Request(url, headers={"Referer": referer} if referer else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class RevealInChromium(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sandbox = Sandbox(own_database="reveal")
        card = cls.sandbox.card("rita")
        cls.card_id = card["card_id"]
        details = cls.sandbox.client.cards_details(card_id=cls.card_id, external_user_id="rita")["details"]
        pan = details["card_number"]
        cls.pan = " ".join(pan[i:i + 4] for i in range(0, len(pan), 4))
        cls.cvv = details["cvv"]
        cls.exp = f"{details['expiry_month']:02d}/{details['expiry_year'] % 100:02d}"
        # The project's page: `issuing reveal-demo`, on a port of its own.
        binary = os.environ.get("ISSUING_BIN") or str(REPO / "target" / "release" / "issuing")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ISSUING_")}
        env.update({"ISSUING_BASE_URL": cls.sandbox.base, "ISSUING_API_KEY": cls.sandbox.api_key,
                    "ISSUING_API_SECRET": cls.sandbox.api_secret, "ISSUING_LOG": "warn"})
        cls.demo = subprocess.Popen([binary, "reveal-demo", "--listen", "127.0.0.1:0", "--card-id", cls.card_id,
                                     "--external-user-id", "rita"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        line = cls.demo.stdout.readline()
        if not line.startswith("reveal demo on "):
            raise RuntimeError(f"issuing reveal-demo printed {line!r}")
        cls.demo_url = line.split()[3]
        cls.demo_origin = cls.demo_url.rstrip("/")
        threading.Thread(target=cls.demo.stdout.read, daemon=True).start()
        cls.pages = Pages()
        cls.profile = tempfile.mkdtemp(prefix="chromium-")
        cls.driver = chrome(cls.profile, width=900, height=700)
        cls.wait = WebDriverWait(cls.driver, 20)

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.pages.close()
        cls.demo.terminate()
        try:
            cls.demo.wait(timeout=15)
        except subprocess.TimeoutExpired:
            cls.demo.kill()
        cls.sandbox.close()
        shutil.rmtree(cls.profile, ignore_errors=True)

    def session(self):
        return self.sandbox.client.cards_reveal_create(card_id=self.card_id, external_user_id="rita",
                                                      target_origin=self.demo_origin)

    def frame_text(self, element_id):
        """The text of `element_id` inside the page's frame; None when the frame shows
        no such element (refused, or an error page)."""
        d = self.driver
        frame = self.wait.until(EC.presence_of_element_located((By.ID, "reveal")))
        d.switch_to.frame(frame)
        try:
            found = d.find_elements(By.ID, element_id)
            return found[0].text if found else None
        finally:
            d.switch_to.default_content()

    def test_the_sessions_origin_sees_the_card(self):
        self.driver.get(self.demo_url)
        src = self.wait.until(EC.presence_of_element_located((By.ID, "reveal"))).get_attribute("src")
        self.assertTrue(src.startswith(self.sandbox.base + "/reveal/"), src)
        self.assertEqual(self.frame_text("pan"), self.pan)
        self.assertEqual(self.frame_text("exp"), self.exp)
        self.assertEqual(self.frame_text("cvv"), self.cvv)
        # The demo's server never held the number: its page only names the frame.
        self.assertNotIn(self.pan.replace(" ", ""), self.driver.page_source.replace(" ", "").split("<iframe")[0])
        # Used: a second load of the same link is 410.
        self.assertEqual(fetch(src, referer=self.demo_url)[0], 410)
        # Each load of the project's page frames a new session.
        self.driver.get(self.demo_url)
        again = self.wait.until(EC.presence_of_element_located((By.ID, "reveal"))).get_attribute("src")
        self.assertNotEqual(again, src)
        self.assertEqual(self.frame_text("pan"), self.pan)

    def test_another_origin_is_refused_and_the_session_stays_usable(self):
        s = self.session()
        self.driver.get(self.pages.frame(s["url"]))
        self.assertIsNone(self.frame_text("pan"))
        self.assertNotIn(self.pan, self.driver.page_source)
        # The browser said who asked (Referer), the API refused (403): still unused.
        status, body = fetch(s["url"], referer=self.demo_url)
        self.assertEqual(status, 200)
        self.assertIn(self.pan, body)

    def test_the_browser_refuses_a_frame_served_to_a_page_without_referer(self):
        s = self.session()
        self.driver.get(self.pages.frame(s["url"], policy="no-referrer"))
        self.assertIsNone(self.frame_text("pan"))
        logs = " ".join(e["message"] for e in self.driver.get_log("browser"))
        self.assertIn("frame-ancestors", logs)
        # Served (nothing told the API who asked), so used; shown nowhere.
        self.assertEqual(fetch(s["url"])[0], 410)

    def test_the_demo_from_localhost_is_another_origin(self):
        self.driver.get(self.demo_url.replace("127.0.0.1", "localhost"))
        self.assertIsNone(self.frame_text("pan"))


if __name__ == "__main__":
    unittest.main()
