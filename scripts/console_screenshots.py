#!/usr/bin/env python3
"""Take the screenshots of docs/console.md: a fresh sandbox (the release binary), seeded
with cards, transactions and failing webhooks, photographed page by page in headless
Chromium. Rerun after changing a page so the docs show what operators see.

Needs: `cargo build --release -p issuing`, Debian's chromium and chromium-driver,
`pip install selenium pynacl`.

Usage: python3 scripts/console_screenshots.py [--out docs/console]
"""

import argparse
import base64
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "crates" / "cli" / "tests" / "browser"))

from sandbox import Sandbox, chrome  # noqa: E402

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "console"))
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    sandbox = Sandbox()
    profile = tempfile.mkdtemp(prefix="chromium-")
    driver = chrome(profile, width=1360, height=900)
    try:
        cards = sandbox.seed()
        sandbox.wait_failed_deliveries()
        wait = WebDriverWait(driver, 20)

        def shot(name, path, ready="main"):
            driver.get(sandbox.console + path)
            wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, ready)))
            # The whole page, not just the window (at most 2400 px of it).
            height = driver.execute_script("return document.documentElement.scrollHeight")
            png = driver.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": 1360, "height": min(max(height, 600), 2400), "scale": 1},
            })
            (out / f"{name}.png").write_bytes(base64.b64decode(png["data"]))
            print(f"wrote {out / (name + '.png')}")

        shot("login", "/console/login", "form")
        driver.find_element(By.NAME, "email").send_keys(sandbox.email)
        driver.find_element(By.NAME, "password").send_keys(sandbox.password)
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait.until(EC.presence_of_element_located((By.ID, "auth-chart")))
        shot("overview", "/console/", "#auth-chart")
        shot("projects", f"/console/projects/{sandbox.project_id}", "#keys")
        shot("cards", f"/console/cards?q={cards[0]['label']}", "table.cards")
        # Spend controls on bob's card: limits, a blocking rule and a shadow one, and an
        # authorization the blocking rule declines.
        bob = cards[1]["card_id"]
        client = sandbox.client
        client.cards_limits_set(card_id=bob, external_user_id="bob", limits=[
            {"interval": "daily", "amount": "100"}, {"interval": "monthly", "count": 50}])
        client.rules_create(name="No gambling", card_ids=[bob], conditions=[
            {"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}])
        client.rules_create(name="Watch amounts over 10", mode="shadow", conditions=[
            {"attribute": "amount", "operator": "greater_than", "value": "10"}])
        client.simulate_cards_auth(card_id=bob, transactionAmount="20",
                                   merchant={"name": "Lucky Casino", "mcc": "7995", "country": "MT"})
        client.simulate_cards_auth(card_id=bob, transactionAmount="14.20",
                                   merchant={"name": "Coffee Bar", "mcc": "5814", "country": "US"})
        shot("card", f"/console/cards/{bob}", "#limits")
        txs = client.cards_txs(card_id=bob, external_user_id="bob")["items"]
        declined = next(t for t in txs if t["card_tx_data"].get("failure_reason") == "mcc_blocked")
        shot("transaction", f"/console/transactions/{declined['transaction_id']}", "#decline")
        shot("webhooks", "/console/webhooks?state=failed", "table.deliveries")
        driver.get(sandbox.console + "/console/ledger")
        driver.find_element(By.ID, "verify-ledger").click()
        shot("ledger", "/console/ledger", "#verify-result")
        shot("audit", "/console/audit", "#audit")
    finally:
        driver.quit()
        sandbox.close()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
