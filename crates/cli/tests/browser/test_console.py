"""The operator console in a real Chromium (Debian's chromium + chromium-driver, driven
by Selenium): sign in, find a card by its last 4 digits, freeze and unfreeze it,
simulate an authorization, see why one over the card's limit was declined, redeliver a
failed delivery, verify the ledger, watch a live region refresh, and check that the
browser logged no JavaScript error and no CSP violation.

    python3 -m unittest discover -s crates/cli/tests/browser -v

needs `target/release/issuing` (or ISSUING_BIN); ISSUING_BROWSER_DATABASE_URL runs it on
PostgreSQL instead of SQLite.
"""

import shutil
import tempfile
import time
import unittest

from sandbox import Sandbox, chrome

from selenium.common.exceptions import (NoSuchElementException, StaleElementReferenceException,
                                        TimeoutException)
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait


class ConsoleInChromium(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sandbox = Sandbox()
        cls.sandbox.seed()
        cls.profile = tempfile.mkdtemp(prefix="chromium-")
        cls.driver = chrome(cls.profile)
        cls.wait = WebDriverWait(cls.driver, 20)

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.sandbox.close()
        shutil.rmtree(cls.profile, ignore_errors=True)

    def open(self, path):
        self.driver.get(self.sandbox.console + path)

    def text(self, css):
        return self.wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, css))).text

    def click(self, css, confirm=False):
        self.wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, css))).click()
        if confirm:
            self.wait.until(EC.alert_is_present()).accept()

    def flash(self, expected):
        """The flash message once it says `expected`: after a click the old page, with the
        previous action's flash, may still be showing until the new one loads."""
        self.wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#flash"), expected))
        return self.text("#flash")

    def expect_text(self, css, expected):
        """Waits for an element to read exactly `expected` (same reason as flash)."""
        patient = WebDriverWait(self.driver, 20,
                                ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
        try:
            patient.until(lambda d: d.find_element(By.CSS_SELECTOR, css).text == expected)
        except TimeoutException:
            self.fail(f"{css} reads {self.text(css)!r}, expected {expected!r}")

    def assert_clean_console(self):
        """No JavaScript error and no CSP violation (Chromium reports both as SEVERE)."""
        entries = self.driver.get_log("browser")
        bad = [e for e in entries if e["level"] == "SEVERE" or "Content Security Policy" in e["message"]]
        self.assertEqual(bad, [], f"browser console: {entries}")

    def test_operator_day(self):
        d = self.driver
        # Sign in.
        self.open("/console/")
        self.assertTrue(d.current_url.endswith("/console/login"))
        d.find_element(By.NAME, "email").send_keys(self.sandbox.email)
        d.find_element(By.NAME, "password").send_keys(self.sandbox.password)
        d.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        self.wait.until(EC.presence_of_element_located((By.ID, "auth-chart")))
        self.assertIn(self.sandbox.email, self.text("#who"))
        self.assertGreater(len(d.find_elements(By.CSS_SELECTOR, "#auth-chart rect.approved")), 0)
        self.assert_clean_console()

        # Find a card by its last 4 digits.
        card = self.sandbox.cards[2]
        self.open("/console/cards")
        box = d.find_element(By.NAME, "q")
        box.send_keys(card["label"])
        box.submit()
        self.wait.until(EC.url_contains("q=" + card["label"]))
        links = [a.text for a in d.find_elements(By.CSS_SELECTOR, "a.card-link")]
        self.assertIn(card["card_id"], links)
        d.find_element(By.LINK_TEXT, card["card_id"]).click()
        self.assertEqual(self.text("#card-id"), card["card_id"])
        self.assertEqual(self.text("#card-status"), "active")
        self.assertNotIn(card["label"] * 2, d.page_source)

        # Freeze (asks first) and unfreeze.
        self.click("#freeze", confirm=True)
        self.assertIn("frozen", self.flash("frozen"))
        self.expect_text("#card-status", "frozen")
        self.assertEqual(self.sandbox.client.cards_get(card_id=card["card_id"], external_user_id="carol")["status"],
                         "frozen")
        self.click("#unfreeze")
        self.assertIn("active", self.flash("active"))
        self.expect_text("#card-status", "active")

        # Simulate an authorization: it lands on its transaction's page.
        amount = d.find_element(By.CSS_SELECTOR, "#simulate input[name=amount]")
        amount.clear()
        amount.send_keys("3.75")
        d.find_element(By.CSS_SELECTOR, "#simulate button").click()
        self.wait.until(EC.url_contains("/console/transactions/"))
        self.assertIn("Authorization", self.flash("Authorization"))
        self.expect_text("#tx-status", "pending")
        txs = self.sandbox.client.cards_txs(card_id=card["card_id"], external_user_id="carol")
        self.assertIn(d.find_element(By.ID, "tx-id").text, [t["transaction_id"] for t in txs["items"]])

        # A limit set through the API: the card page shows it, and an authorization over
        # it lands on a transaction page that says why it was declined.
        self.sandbox.client.cards_limits_set(card_id=card["card_id"], external_user_id="carol",
                                             limits=[{"interval": "per_authorization", "amount": "5"}])
        self.open(f"/console/cards/{card['card_id']}")
        self.wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#limits"), "per authorization"))
        self.assertIn("5.00 USD", self.text("#limits"))
        amount = self.wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#simulate input[name=amount]")))
        amount.clear()
        amount.send_keys("9.00")
        d.find_element(By.CSS_SELECTOR, "#simulate button").click()
        self.assertIn("spending_limit_exceeded", self.flash("spending_limit_exceeded"))
        self.expect_text("#tx-status", "declined")
        self.expect_text("#decline-reason", "spending_limit_exceeded")
        self.wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#decline-limit"),
                                                          "per-authorization limit of 5.00 USD"))
        self.sandbox.client.cards_limits_set(card_id=card["card_id"], external_user_id="carol", limits=[])

        # Redeliver a failed delivery.
        failed = self.sandbox.wait_failed_deliveries()
        self.sandbox.receiver.succeed = True
        self.open("/console/webhooks?state=failed")
        self.wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "button.redeliver")))
        self.click("button.redeliver")
        self.assertIn("queued again", self.flash("queued again"))
        self.assertTrue(d.current_url.endswith("/console/webhooks?state=failed"))
        redelivered = self.flash("queued again").split()[1]
        self.assertIn(redelivered, [f["delivery_id"] for f in failed])
        deadline = time.time() + 20
        while time.time() < deadline:
            states = {i["delivery_id"]: i["state"] for i in self.sandbox.client.wh_deliveries(limit=100)["items"]}
            if states.get(redelivered) == "succeeded":
                break
            time.sleep(0.3)
        self.assertEqual(states.get(redelivered), "succeeded")

        # Verify the ledger.
        self.open("/console/ledger")
        self.click("#verify-ledger")
        self.assertIn("Ledger ok", self.flash("Ledger ok"))
        self.expect_text("#verify-result", "ok")

        # The audit log shows what was done, by whom.
        self.open("/console/audit")
        audit = self.text("#audit")
        for action in ("card.freeze", "card.unfreeze", "card.simulate_authorization", "webhook.redeliver",
                       "ledger.verify", "console.login"):
            self.assertIn(action, audit)

        # A live region refreshes by itself (htmx, every 10 s while visible).
        self.open("/console/")
        marker = "console-test-marker"
        d.execute_script("document.getElementById('live').setAttribute('data-marker', arguments[0])", marker)
        # The swap this waits for can replace the element between finding it and reading
        # it: a stale element means the refresh came, and the next poll reads the new one.
        WebDriverWait(d, 25, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda drv: drv.find_element(By.ID, "live").get_attribute("data-marker") != marker)
        self.assert_clean_console()

        # Sign out: the console is closed again.
        d.find_element(By.CSS_SELECTOR, "header form button").click()
        self.wait.until(EC.url_contains("/console/login"))
        self.open("/console/cards")
        self.assertTrue(d.current_url.endswith("/console/login"))
        self.assert_clean_console()


if __name__ == "__main__":
    unittest.main()
