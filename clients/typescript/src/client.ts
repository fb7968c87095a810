/**
 * The client: talk to Breakpoint Manager as an agent (or as a reviewer, with a reviewer's
 * token). Every method is one API call, or one wait; `ask` creates and waits.
 */
import { randomUUID } from "node:crypto";

import { ConfigurationError, ReceiptInvalid, JwksUnavailable, WaitTimeout } from "./errors.js";
import { DEFAULT_RETRY, Transport, sleep, type Call, type RetryPolicy } from "./http.js";
import { JWKS_PATH, JwksCache, checkResult, expectedBreakpoint, isJwks, receiptKid } from "./receipts.js";
import type {
  Breakpoint,
  CreateBody,
  Decision,
  Event,
  FeedbackBody,
  FeedbackCreated,
  Jwks,
  ReceiptClaims,
  ReviewedContent,
  Status,
  StatusEntry,
  StatusName,
  VerifiableResult,
} from "./types.js";

export const DEFAULT_URL = "http://127.0.0.1:8000";
const MAX_HOLD_SECONDS = 60; // the server holds a long-poll at most this long
const MAX_IDS_PER_WAIT = 100;
// How much longer than the hold the whole answer may take (network, a busy server).
const READ_MARGIN_MS = 15_000;
const FINAL_STATUSES: ReadonlySet<string> = new Set(["released", "expired", "cancelled"]);

export interface ClientOptions {
  /** The server (default: the environment's BPM_URL, else http://127.0.0.1:8000). */
  url?: string;
  /** An API token (default: the environment's BPM_TOKEN). */
  token?: string;
  /** Milliseconds an ordinary call may take (default 30 s). */
  timeoutMs?: number;
  /** Resends of ordinary calls (default: 4, backoff from 0.5 s to 10 s). */
  retry?: RetryPolicy;
  /** While waiting, how long the server may stay unreachable (a restart, a network blip)
   * before the wait fails with ConnectionFailed (default 300 s). */
  reconnectForSeconds?: number;
  /** The long-poll length asked of the server, 1-60 seconds (default 50). */
  holdSeconds?: number;
  /** Pin the receipt keys (a JWK Set) instead of fetching the server's. */
  jwks?: Jwks;
  /** A fetch to use instead of the global one. */
  fetch?: typeof globalThis.fetch;
}

export interface CreateOptions {
  /** The same key and body within 24 h return the first breakpoint instead of a new one
   * (a fresh key is made when none is given, so a resent create never makes two). */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export interface WaitOptions {
  /** WaitTimeout after this many seconds (the breakpoint keeps waiting). */
  timeoutSeconds?: number;
  /** Aborting it ends the wait: the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface AskOptions extends WaitOptions {
  idempotencyKey?: string;
  /** When `signal` aborts the wait, cancel the breakpoint on the server too (by default it
   * stays waiting, for a later `wait`). */
  cancelOnAbort?: boolean;
  /** Hears of the breakpoint before the wait begins (to show its id or consoleUrl). */
  onCreated?: (breakpoint: Breakpoint) => void;
}

export interface ReleaseOptions {
  comment?: string;
  /** false rejects (default: approve). */
  approved?: boolean;
  option?: string;
  /** The answer to the breakpoint's form (default: its proposal as it is). */
  values?: Record<string, unknown>;
}

export interface VerifyOptions {
  /** The breakpoint the receipt must name (required when the result does not say). */
  breakpointId?: string;
  /** The values about to be run (default: the result's own). */
  values?: Record<string, unknown>;
  /** What the reviewers were shown (the breakpoint's question, title and payload); fetched
   * with `get` when left out, to recompute the payloadDigest. */
  content?: ReviewedContent;
}

function path(breakpointId: string, action = ""): string {
  // An id is one path segment, whatever it holds.
  return `/api/breakpoints/${encodeURIComponent(breakpointId)}${action}`;
}

function isDone(status: StatusName | undefined): boolean {
  return status !== undefined && FINAL_STATUSES.has(status);
}

export class Client {
  /** The server's URL, without a trailing slash. */
  readonly url: string;
  private readonly http: Transport;
  private readonly retry: RetryPolicy;
  private readonly reconnect: RetryPolicy;
  private readonly holdSeconds: number;
  private readonly pinnedJwks: Jwks | null;
  private readonly serverJwks: JwksCache;

  constructor(options: ClientOptions = {}) {
    const url = (options.url ?? process.env.BPM_URL ?? DEFAULT_URL).replace(/\/+$/, "");
    if (!/^https?:\/\//.test(url)) {
      throw new ConfigurationError(`the server URL must start with http:// or https://: ${JSON.stringify(url)}`);
    }
    const token = options.token ?? process.env.BPM_TOKEN;
    if (!token) throw new ConfigurationError("no API token: set BPM_TOKEN (or pass { token })");
    const holdSeconds = options.holdSeconds ?? 50;
    if (!Number.isInteger(holdSeconds) || holdSeconds < 1 || holdSeconds > MAX_HOLD_SECONDS) {
      throw new ConfigurationError(`holdSeconds must be an integer from 1 to ${MAX_HOLD_SECONDS}`);
    }
    if (options.jwks !== undefined && !isJwks(options.jwks)) {
      throw new ConfigurationError('jwks must be a JWK Set: {"keys": [...]}');
    }
    this.url = url;
    this.http = new Transport({
      baseUrl: url,
      token,
      timeoutMs: options.timeoutMs ?? 30_000,
      fetch: options.fetch ?? globalThis.fetch,
    });
    this.retry = options.retry ?? DEFAULT_RETRY;
    const reconnectMs = (options.reconnectForSeconds ?? 300) * 1000;
    this.reconnect = { attempts: null, giveUpAfterMs: reconnectMs, baseMs: 500, capMs: 5_000 };
    this.holdSeconds = holdSeconds;
    this.pinnedJwks = options.jwks ?? null;
    this.serverJwks = new JwksCache(() => this.send({ method: "GET", path: JWKS_PATH }));
  }

  private send<T>(call: Call, policy: RetryPolicy = this.retry, signal?: AbortSignal): Promise<T> {
    return this.http.send<T>(call, policy, signal);
  }

  // --- agent ---------------------------------------------------------------------------

  /** Create a breakpoint (`POST /api/breakpoints`); its representation. */
  create(body: CreateBody, options: CreateOptions = {}): Promise<Breakpoint> {
    const key = options.idempotencyKey ?? `bpm-${randomUUID()}`;
    const call: Call = { method: "POST", path: "/api/breakpoints", body, headers: { "Idempotency-Key": key } };
    return this.send(call, this.retry, options.signal);
  }

  /** The full representation. */
  get(breakpointId: string): Promise<Breakpoint> {
    return this.send({ method: "GET", path: path(breakpointId) });
  }

  /** The small status (the polling answer), at once. */
  status(breakpointId: string): Promise<Status> {
    return this.send({ method: "GET", path: path(breakpointId, "/status") });
  }

  /** Cancel (cancelling a cancelled one again is fine); the new status. */
  async cancel(breakpointId: string, reason?: string): Promise<StatusName> {
    const body = reason ? { reason } : {};
    const answer = await this.send<{ status: StatusName }>({ method: "POST", path: path(breakpointId, "/cancel"), body });
    return answer.status;
  }

  /** Its audit trail. */
  async events(breakpointId: string): Promise<Event[]> {
    const answer = await this.send<{ results: Event[] }>({ method: "GET", path: path(breakpointId, "/events") });
    return answer.results;
  }

  // --- waiting -------------------------------------------------------------------------

  /** Long-poll until the breakpoint is decided, reconnecting with backoff through network
   * failures and 503s (for `reconnectForSeconds`); its final status. WaitTimeout after
   * `timeoutSeconds`; an aborted `signal` rejects with its reason. */
  async wait(breakpointId: string, options: WaitOptions = {}): Promise<Status> {
    const deadline = this.deadline(options.timeoutSeconds);
    for (;;) {
      const hold = this.hold(deadline);
      const started = Date.now();
      const call: Call = {
        method: "GET",
        path: path(breakpointId, "/status"),
        query: [["wait", String(hold)]],
        timeoutMs: hold * 1000 + READ_MARGIN_MS,
      };
      const status = await this.send<Status>(call, this.reconnect, options.signal);
      if (isDone(status.status)) return status;
      if (deadline !== null && Date.now() >= deadline) {
        throw new WaitTimeout(breakpointId, options.timeoutSeconds ?? 0);
      }
      await this.pace(started, hold, status.pollAfterMs, deadline, options.signal);
    }
  }

  /** Long-poll up to 100 breakpoints at once until any is decided (or not visible to you):
   * every entry, in the order asked. */
  async waitAny(breakpointIds: string[], options: WaitOptions = {}): Promise<StatusEntry[]> {
    const ids = [...new Set(breakpointIds)];
    if (ids.length < 1 || ids.length > MAX_IDS_PER_WAIT) {
      throw new RangeError(`waitAny takes 1 to ${MAX_IDS_PER_WAIT} distinct ids`);
    }
    const deadline = this.deadline(options.timeoutSeconds);
    for (;;) {
      const hold = this.hold(deadline);
      const started = Date.now();
      const call: Call = {
        method: "GET",
        path: "/api/breakpoints/status",
        query: [...ids.map((id): [string, string] => ["id", id]), ["wait", String(hold)]],
        timeoutMs: hold * 1000 + READ_MARGIN_MS,
      };
      const answer = await this.send<{ results: StatusEntry[] }>(call, this.reconnect, options.signal);
      const entries = answer.results;
      if (entries.some((entry) => isDone(entry.status) || entry.error)) return entries;
      if (deadline !== null && Date.now() >= deadline) throw new WaitTimeout(ids, options.timeoutSeconds ?? 0);
      const hints = entries.map((entry) => entry.pollAfterMs ?? 0);
      await this.pace(started, hold, Math.min(...hints), deadline, options.signal);
    }
  }

  private deadline(timeoutSeconds: number | undefined): number | null {
    if (timeoutSeconds === undefined) return null;
    if (!(timeoutSeconds >= 0)) throw new RangeError("timeoutSeconds must be a number of seconds, 0 or more");
    return Date.now() + timeoutSeconds * 1000;
  }

  private hold(deadline: number | null): number {
    if (deadline === null) return this.holdSeconds;
    const remaining = Math.ceil((deadline - Date.now()) / 1000);
    return Math.max(1, Math.min(this.holdSeconds, remaining));
  }

  /** After an early "still waiting", pause as the server's pollAfterMs hint says. */
  private async pace(
    started: number,
    hold: number,
    pollAfterMs: number | null | undefined,
    deadline: number | null,
    signal?: AbortSignal,
  ): Promise<void> {
    if (Date.now() - started >= (hold - 1) * 1000 || !pollAfterMs) return;
    const pause = deadline === null ? pollAfterMs : Math.min(pollAfterMs, Math.max(0, deadline - Date.now()));
    if (pause > 0) await sleep(pause, signal);
  }

  // --- the one-call way ----------------------------------------------------------------

  /** Ask a human and wait for the answer (babysitter's `ctx.breakpoint()`): create (with an
   * idempotency key, so a retried or resumed ask finds the same breakpoint), wait, and
   * return the decision, its receipt checked (`verified`). */
  async ask(body: CreateBody, options: AskOptions = {}): Promise<Decision> {
    const idempotencyKey = options.idempotencyKey ?? `bpm-${randomUUID()}`;
    let created: Breakpoint | null = null;
    let final: Breakpoint | Status;
    try {
      created = await this.create(body, { idempotencyKey, signal: options.signal });
      options.onCreated?.(created);
      final = isDone(created.status) ? created : await this.wait(created.breakpointId, options);
    } catch (error) {
      if (options.cancelOnAbort && options.signal?.aborted) {
        // Aborted mid-create: the same key answers with the breakpoint if it was made (or
        // makes it), so there is always one to cancel.
        const target = created ?? (await this.create(body, { idempotencyKey }));
        await this.cancel(target.breakpointId, "the agent stopped waiting (aborted)");
      }
      throw error;
    }
    const decision: Decision = {
      ...(final.result ?? { approved: false }),
      breakpointId: created.breakpointId,
      status: final.status,
      verified: null,
    };
    return { ...decision, verified: await this.verified(decision, created) };
  }

  // --- receipts ------------------------------------------------------------------------

  /** The claims of `result.receipt` once it verifies (pinned JWKS, else the server's) and
   * states this result of this breakpoint, with its valuesDigest recomputed from the
   * values (`options.values`, else the result's) and its payloadDigest from what the
   * reviewers were shown (`options.content`, else the breakpoint as `get` returns it).
   * Throws ReceiptInvalid otherwise. */
  async verify(result: VerifiableResult, options: VerifyOptions = {}): Promise<ReceiptClaims> {
    const breakpointId = expectedBreakpoint(result, options.breakpointId); // before any request
    if (!result.receipt) throw new ReceiptInvalid("the result carries no receipt");
    const content = options.content ?? (await this.get(breakpointId));
    const jwks = this.pinnedJwks ?? (await this.serverJwks.get(receiptKid(result.receipt)));
    return checkResult(result, jwks, { breakpointId, values: options.values, content });
  }

  /** Whether `decision`'s receipt verifies (null without a receipt or a JWKS at hand). */
  private async verified(decision: Decision, content: ReviewedContent): Promise<boolean | null> {
    if (!decision.receipt) return null;
    try {
      await this.verify(decision, { content });
      return true;
    } catch (error) {
      if (error instanceof ReceiptInvalid) return false;
      if (error instanceof JwksUnavailable) return null;
      throw error;
    }
  }

  // --- reviewer ------------------------------------------------------------------------

  /** Comment without deciding (a reviewer's token). */
  feedback(breakpointId: string, comment: string): Promise<FeedbackCreated> {
    return this.postFeedback(breakpointId, { comment, release: false });
  }

  /** Decide (a reviewer's token): approve (default), reject with `approved: false`, pick an
   * `option`, or approve edited `values`. */
  release(breakpointId: string, options: ReleaseOptions = {}): Promise<FeedbackCreated> {
    const body: FeedbackBody = { comment: options.comment ?? "", release: true, approved: options.approved ?? true };
    if (options.option !== undefined) body.option = options.option;
    if (options.values !== undefined) body.values = options.values;
    return this.postFeedback(breakpointId, body);
  }

  /** Expire now (an admin's token). */
  async expire(breakpointId: string): Promise<StatusName> {
    const answer = await this.send<{ status: StatusName }>({ method: "POST", path: path(breakpointId, "/expire"), body: {} });
    return answer.status;
  }

  private postFeedback(breakpointId: string, body: FeedbackBody): Promise<FeedbackCreated> {
    // Never resent once it may have reached the server: a decision is not idempotent.
    return this.send({ method: "POST", path: path(breakpointId, "/feedback"), body, idempotent: false });
  }
}
