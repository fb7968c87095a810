// The SDK against a live Breakpoint Manager, as an agent (BPM_URL, BPM_TOKEN) and as a
// reviewer (BPM_REVIEWER_TOKEN, user BPM_REVIEWER_NAME) who decides while the agent waits.
// tests/live/clients/test_typescript_sdk.py starts the system, makes the tokens and runs
// this file on the build output (`npm run build` first).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { describe, test } from "node:test";

import {
  ApiError,
  Client,
  IdempotencyConflict,
  InvalidState,
  NotAuthenticated,
  NotFound,
  ReceiptInvalid,
  WaitTimeout,
  payloadDigest,
  valuesDigest,
} from "../dist/index.js";

const live = Boolean(process.env.BPM_URL && process.env.BPM_TOKEN && process.env.BPM_REVIEWER_TOKEN);
const SAFETY_MS = 60_000; // a bound on a hanging wait, never an assertion

const agent = () => new Client(); // BPM_URL and BPM_TOKEN from the environment
const reviewer = () => new Client({ token: process.env.BPM_REVIEWER_TOKEN });
const reviewerName = () => process.env.BPM_REVIEWER_NAME;
const unique = (text) => `${text} (${randomUUID().slice(0, 8)})`;

const SCALE_FORM = {
  type: "object",
  required: ["replicas"],
  properties: { replicas: { type: "integer", minimum: 1, maximum: 10 } },
};

/** A signal that aborts after `ms`, for the test's own reasons. */
function abortAfter(ms) {
  const controller = new AbortController();
  setTimeout(() => controller.abort(), ms).unref();
  return controller.signal;
}

/** Resolves once the breakpoint's wait request has had time to reach the server. */
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A server on 127.0.0.1 in front of the service that breaks the first wait requests: it
 * drops the first one's connection, answers the second 503 with Retry-After, and passes
 * the rest through. Its `seen` lists what it did to each wait request. */
async function flakyFront(target) {
  const seen = [];
  const server = createServer(async (request, response) => {
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    const waitRequest = request.url.includes("wait=");
    if (waitRequest && seen.length === 0) {
      seen.push("dropped");
      request.socket.destroy();
      return;
    }
    if (waitRequest && seen.length === 1) {
      seen.push("503");
      response.writeHead(503, { "Content-Type": "application/json", "Retry-After": "1" });
      response.end(JSON.stringify({ error: { code: "unavailable", message: "down", details: {} } }));
      return;
    }
    if (waitRequest) seen.push("passed");
    const headers = { ...request.headers };
    delete headers.host;
    const answer = await fetch(new URL(request.url, target), {
      method: request.method,
      headers,
      body: chunks.length ? Buffer.concat(chunks) : undefined,
    });
    response.writeHead(answer.status, { "Content-Type": answer.headers.get("content-type") ?? "application/json" });
    response.end(Buffer.from(await answer.arrayBuffer()));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, seen, close: () => server.close() };
}

describe("breakpoint-manager against a live service", { skip: !live && "BPM_URL, BPM_TOKEN, BPM_REVIEWER_TOKEN unset" }, () => {
  test("create answers with a waiting breakpoint that get and status read back", async () => {
    const client = agent();
    const question = unique("Deploy to production?");
    const created = await client.create({ payload: { question }, tags: ["deploy"], title: "Deploy" });
    assert.equal(created.status, "waiting");
    assert.match(created.breakpointId, /\S/);
    const read = await client.get(created.breakpointId);
    assert.equal(read.question, question);
    assert.deepEqual(read.tags, ["deploy"]);
    assert.equal(read.payloadDigest, payloadDigest(read));
    const status = await client.status(created.breakpointId);
    assert.equal(status.status, "waiting");
    assert.equal(status.result, null);
  });

  test("wait returns the approval a reviewer makes while it waits", async () => {
    const client = agent();
    const created = await client.create({
      payload: { question: unique("Scale web?"), form: SCALE_FORM, proposal: { replicas: 3 } },
    });
    const waiting = client.wait(created.breakpointId, { signal: AbortSignal.timeout(SAFETY_MS) });
    await pause(300);
    await reviewer().release(created.breakpointId, { comment: "Two will do", values: { replicas: 2 } });
    const status = await waiting;
    assert.equal(status.status, "released");
    assert.equal(status.result.approved, true);
    assert.equal(status.result.respondedBy, reviewerName());
    assert.equal(status.result.response, "Two will do");
    assert.deepEqual(status.result.values, { replicas: 2 });
    assert.equal(status.result.edited, true);
    assert.equal(status.result.valuesDigest, valuesDigest({ replicas: 2 }));
  });

  test("wait reconnects through a dropped connection and a 503, then returns the approval", async () => {
    const front = await flakyFront(process.env.BPM_URL);
    try {
      const client = new Client({ url: front.url });
      const created = await client.create({ payload: { question: unique("Through a flaky network?") } });
      const waiting = client.wait(created.breakpointId, { signal: AbortSignal.timeout(SAFETY_MS) });
      while (!front.seen.includes("passed")) await pause(100);
      await reviewer().release(created.breakpointId, { comment: "made it" });
      const status = await waiting;
      assert.equal(status.status, "released");
      assert.equal(status.result.response, "made it");
      assert.deepEqual(front.seen.slice(0, 3), ["dropped", "503", "passed"]);
    } finally {
      front.close();
    }
  });

  test("ask returns a rejection with the reviewer's comment, its receipt verified", async () => {
    const client = agent();
    const body = { payload: { question: unique("Drop the old table?") } };
    const idempotencyKey = `test-${randomUUID()}`;
    // The same key finds the same breakpoint: the reviewer learns its id, ask resumes it.
    const created = await client.create(body, { idempotencyKey });
    const asking = client.ask(body, { idempotencyKey, signal: AbortSignal.timeout(SAFETY_MS) });
    await pause(300);
    await reviewer().release(created.breakpointId, { approved: false, comment: "Not on a Friday" });
    const decision = await asking;
    assert.equal(decision.breakpointId, created.breakpointId);
    assert.equal(decision.status, "released");
    assert.equal(decision.approved, false);
    assert.equal(decision.feedback, "Not on a Friday");
    assert.equal(decision.respondedBy, reviewerName());
    assert.equal(decision.verified, true);
  });

  test("a breakpoint past its TTL expires, and wait returns the expiry", async () => {
    const client = agent();
    const created = await client.create({ payload: { question: unique("Anyone there?") }, ttlSeconds: 1 });
    const status = await client.wait(created.breakpointId, { signal: AbortSignal.timeout(SAFETY_MS) });
    assert.equal(status.status, "expired");
    assert.equal(status.result.approved, false);
    const read = await client.get(created.breakpointId);
    assert.notEqual(read.expiredAt, null);
  });

  test("aborting a wait ends it and leaves the breakpoint waiting", async () => {
    const client = agent();
    const created = await client.create({ payload: { question: unique("Wait for me?") } });
    await assert.rejects(client.wait(created.breakpointId, { signal: abortAfter(500) }), { name: "AbortError" });
    await assert.rejects(client.wait(created.breakpointId, { signal: AbortSignal.abort() }), { name: "AbortError" });
    assert.equal((await client.status(created.breakpointId)).status, "waiting");
  });

  test("aborting an ask with cancelOnAbort cancels the breakpoint on the server", async () => {
    const client = agent();
    const body = { payload: { question: unique("Cancel me?") } };
    const idempotencyKey = `test-${randomUUID()}`;
    const reason = new Error("the user pressed stop");
    const controller = new AbortController();
    const asking = client.ask(body, { idempotencyKey, signal: controller.signal, cancelOnAbort: true });
    await pause(500);
    controller.abort(reason);
    await assert.rejects(asking, (error) => error === reason);
    const { breakpointId } = await client.create(body, { idempotencyKey });
    const status = await client.status(breakpointId);
    assert.equal(status.status, "cancelled");
    assert.equal(status.result.approved, false);
  });

  test("cancel cancels, and a decided breakpoint cannot be cancelled", async () => {
    const client = agent();
    const first = await client.create({ payload: { question: unique("Cancel this one?") } });
    assert.equal(await client.cancel(first.breakpointId, "plans changed"), "cancelled");
    assert.equal(await client.cancel(first.breakpointId), "cancelled");
    const status = await client.status(first.breakpointId);
    assert.equal(status.result.feedback, "plans changed");
    const second = await client.create({ payload: { question: unique("Approve this one?") } });
    await reviewer().release(second.breakpointId, { comment: "ok" });
    await assert.rejects(client.cancel(second.breakpointId), (error) => {
      assert.ok(error instanceof InvalidState);
      assert.equal(error.code, "invalid_state");
      assert.equal(error.status, 409);
      assert.equal(error.details.currentStatus, "released");
      return true;
    });
  });

  test("waitAny returns every entry once one of them is decided", async () => {
    const client = agent();
    const ids = [];
    for (const n of [1, 2, 3]) {
      ids.push((await client.create({ payload: { question: unique(`Step ${n}?`) } })).breakpointId);
    }
    const waiting = client.waitAny(ids, { signal: AbortSignal.timeout(SAFETY_MS) });
    await pause(300);
    await reviewer().release(ids[1], { comment: "step 2 is fine" });
    const entries = await waiting;
    assert.deepEqual(
      entries.map((entry) => entry.breakpointId),
      ids,
    );
    assert.deepEqual(
      entries.map((entry) => entry.status),
      ["waiting", "released", "waiting"],
    );
    assert.equal(entries[1].result.response, "step 2 is fine");
  });

  test("waitAny and wait give up with WaitTimeout when nothing is decided in time", async () => {
    const client = agent();
    const created = await client.create({ payload: { question: unique("Nobody answers?") } });
    await assert.rejects(client.wait(created.breakpointId, { timeoutSeconds: 1 }), WaitTimeout);
    await assert.rejects(client.waitAny([created.breakpointId], { timeoutSeconds: 1 }), WaitTimeout);
  });

  test("verify accepts a genuine receipt and refuses a tampered one", async () => {
    const client = agent();
    const body = { payload: { question: unique("Scale api?"), form: SCALE_FORM, proposal: { replicas: 4 } } };
    const idempotencyKey = `test-${randomUUID()}`;
    const created = await client.create(body, { idempotencyKey });
    await reviewer().release(created.breakpointId, { comment: "fine" });
    const decision = await client.ask(body, { idempotencyKey });
    assert.equal(decision.verified, true);
    const claims = await client.verify(decision);
    assert.equal(claims.breakpointId, created.breakpointId);
    assert.equal(claims.approved, true);
    assert.equal(claims.valuesDigest, valuesDigest({ replicas: 4 }));
    assert.equal(claims.payloadDigest, payloadDigest(created));

    // A receipt whose claims were changed (approved: false -> true is the classic) fails
    // its signature; so does one whose signature was.
    const [header, payload, signature] = decision.receipt.split(".");
    const forged = { ...JSON.parse(Buffer.from(payload, "base64url")), valuesDigest: valuesDigest({ replicas: 9 }) };
    const forgedPayload = Buffer.from(JSON.stringify(forged)).toString("base64url");
    await assert.rejects(client.verify({ ...decision, receipt: `${header}.${forgedPayload}.${signature}` }), ReceiptInvalid);
    const flipped = signature[0] === "A" ? `B${signature.slice(1)}` : `A${signature.slice(1)}`;
    await assert.rejects(client.verify({ ...decision, receipt: `${header}.${payload}.${flipped}` }), ReceiptInvalid);
    await assert.rejects(client.verify({ ...decision, receipt: `${decision.receipt}==` }), ReceiptInvalid);

    // A genuine receipt does not vouch for other values, another payload or another breakpoint.
    await assert.rejects(client.verify(decision, { values: { replicas: 9 } }), /valuesDigest/);
    await assert.rejects(
      client.verify(decision, { content: { ...created, payload: { ...created.payload, proposal: { replicas: 9 } } } }),
      /payloadDigest/,
    );
    const other = await client.create({ payload: { question: unique("Another?") } });
    await assert.rejects(client.verify({ ...decision, breakpointId: other.breakpointId }), /breakpointId/);
    await assert.rejects(client.verify({ ...decision, breakpointId: undefined }), /which breakpoint/);
  });

  test("the same idempotency key returns the first breakpoint; with another body it is a conflict", async () => {
    const client = agent();
    const idempotencyKey = `test-${randomUUID()}`;
    const body = { payload: { question: unique("Once only?") } };
    const first = await client.create(body, { idempotencyKey });
    const again = await client.create(body, { idempotencyKey });
    assert.equal(again.breakpointId, first.breakpointId);
    await assert.rejects(client.create({ payload: { question: unique("Something else?") } }, { idempotencyKey }), (error) => {
      assert.ok(error instanceof IdempotencyConflict);
      assert.equal(error.code, "idempotency_conflict");
      assert.equal(error.status, 409);
      return true;
    });
  });

  test("errors carry the envelope's code: not found, not authenticated", async () => {
    await assert.rejects(agent().get("bp-does-not-exist"), (error) => {
      assert.ok(error instanceof NotFound && error instanceof ApiError);
      assert.equal(error.code, "not_found");
      assert.equal(error.status, 404);
      assert.match(error.requestId, /\S/);
      return true;
    });
    const stranger = new Client({ token: "not-a-real-token" });
    await assert.rejects(stranger.status("bp-any"), (error) => error instanceof NotAuthenticated && error.code === "not_authenticated");
  });
});
