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
        shot("card", f"/console/cards/{cards[1]['card_id']}", "#card-status")
        txs = sandbox.client.cards_txs(card_id=cards[1]["card_id"], external_user_id="bob")["items"]
        declined = next(t for t in txs if t["transaction_id"] and "declined" in str(t))
        shot("transaction", f"/console/transactions/{declined['transaction_id']}", "#tx-status")
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
