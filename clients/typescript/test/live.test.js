// Live test against a running server; runs only when ISSUING_BASE_URL, ISSUING_API_KEY and
// ISSUING_API_SECRET are set (for example to a fresh sandbox's demo credentials):
//
//     ISSUING_BASE_URL=http://127.0.0.1:8080 ISSUING_API_KEY=pk_... ISSUING_API_SECRET=sk_... \
//         node --test clients/typescript/test/
//
// It creates a user, a cardholder and a card (2.00 issue fee + a 20.00 initial topup and
// its fee from the master balance), so point it at a sandbox.

import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";

import { IssuingClient, IssuingError } from "../index.js";

const env = process.env;
const configured = Boolean(env.ISSUING_BASE_URL && env.ISSUING_API_KEY && env.ISSUING_API_SECRET);
const skip = configured ? false : "set ISSUING_BASE_URL, ISSUING_API_KEY and ISSUING_API_SECRET to run the live test";

const AMOUNT = /^[0-9]+\.[0-9]{2,6}$/;
const OBJECT_ID = /^[0-9a-f]{24}$/;

test("live: a card's life through the TypeScript client", { skip, timeout: 120_000 }, async (t) => {
  const client = IssuingClient.fromEnv();
  const run = randomUUID().slice(0, 8);
  const ext = `ts-live-${run}`;

  await t.test("system/health", async () => {
    assert.equal((await client.systemHealth()).status, "ok");
  });

  await t.test("system/time and the clock offset", async () => {
    const offset = await client.syncClock();
    assert.ok(Math.abs(offset) < 30_000_000, `clock offset ${offset} µs`);
  });

  await t.test("project/balance", async () => {
    const balance = await client.projectBalance();
    assert.match(balance.available, AMOUNT);
    assert.equal(balance.currency, "usdt");
  });

  await t.test("users/create", async () => {
    const user = await client.usersCreate({ external_user_id: ext });
    assert.equal(user.external_user_id, ext);
    assert.match(user.user_id, OBJECT_ID);
  });

  await t.test("cardholders/create with KYC", async () => {
    const holder = await client.cardholdersCreate({
      external_user_id: ext,
      subprovider_code: "sandbox",
      kyc_data: {
        first_name: "Ada",
        last_name: "Lovelace",
        birth_date: "1990-12-10",
        email: "ada@example.com",
        phone_number_full: "+447700900123",
        country_iso: "GB",
      },
    });
    assert.equal(holder.external_user_id, ext);
    assert.equal(holder.registration_status, "active");
    assert.equal(holder.kyc_status, "approved");
  });

  let cardId = "";
  await t.test("cards/create, then waitOrder", async () => {
    const created = await client.cardsCreate({
      external_user_id: ext,
      product_code: "virtual_usd",
      initial_topup: "20.00",
      idempotency_key: `ts-live-card-${run}`,
    });
    assert.match(created.card_id, OBJECT_ID);
    assert.equal(created.order.order_type, "card_issue");
    cardId = created.card_id;
    const order = await client.waitOrder(created.order.order_id, { timeoutMs: 30_000 });
    assert.equal(order.status, "completed", JSON.stringify(order));
    assert.equal(order.is_issued, true);
    const card = await client.cardsGet({ card_id: cardId, external_user_id: ext });
    assert.equal(card.status, "active");
    assert.equal(card.balance.available, "20.00");
  });

  let transactionId = "";
  await t.test("simulate/cards/auth", async () => {
    const auth = await client.simulateCardsAuth({
      card_id: cardId,
      transactionAmount: "12.50",
      merchant: { name: "Coffee Bar", mcc: "5814", country: "US" },
    });
    assert.match(auth.transactionId, OBJECT_ID);
    assert.equal(auth.transaction.card_tx_data.status, "pending");
    assert.equal(auth.transaction.card_tx_data.card_amount, 12.5);
    transactionId = auth.transactionId;
    const balance = await client.cardsBalance({ card_id: cardId, external_user_id: ext });
    assert.equal(balance.available, "7.50");
    assert.equal(balance.pending, "12.50");
  });

  await t.test("cards/txs", async () => {
    const txs = await client.cardsTxs({ card_id: cardId, external_user_id: ext });
    assert.ok(txs.total >= 1);
    assert.ok(txs.items.some((tx) => tx.transaction_id === transactionId), JSON.stringify(txs.items));
  });

  await t.test("a typed error: users/get of an unknown user", async () => {
    await assert.rejects(client.usersGet({ external_user_id: `nobody-${run}` }), (e) => {
      assert.ok(e instanceof IssuingError, String(e));
      assert.equal(e.status, 404);
      assert.equal(e.slug, "user_not_found");
      assert.ok(e.message.length > 0);
      return true;
    });
  });
});
