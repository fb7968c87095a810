/**
 * The client's one way to send a request: `fetch`, a timeout, and resending where that is
 * safe (exponential backoff with jitter, `Retry-After` honoured), as the Python SDK does
 * (bpm_client.steps.send).
 */
import { ApiError, ConnectionFailed, DecodeError, apiError } from "./errors.js";

const MAX_RETRY_AFTER_MS = 120_000;
// Errors of a connection that never carried the request: resending cannot repeat it.
const NEVER_SENT = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/** When to send a failed call again: exponential backoff with jitter. */
export interface RetryPolicy {
  /** Resends allowed after the first try (null: no count). */
  attempts: number | null;
  /** Milliseconds of consecutive failures after which the call fails anyway (null: no limit). */
  giveUpAfterMs: number | null;
  baseMs: number;
  capMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, giveUpAfterMs: null, baseMs: 500, capMs: 10_000 };

/** One HTTP request. `idempotent`: safe to send again after it may have reached the server. */
export interface Call {
  method: "GET" | "POST";
  path: string;
  query?: Array<[string, string]>;
  body?: unknown;
  headers?: Record<string, string>;
  /** Milliseconds to wait for the whole answer (the client's default when left out). */
  timeoutMs?: number;
  idempotent?: boolean;
}

export interface TransportOptions {
  baseUrl: string;
  token: string;
  timeoutMs: number;
  fetch: typeof globalThis.fetch;
}

class RequestTimedOut extends Error {}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function backoff(policy: RetryPolicy, attempt: number, retryAfterMs: number | null): number {
  if (retryAfterMs !== null) return Math.min(Math.max(retryAfterMs, 0), MAX_RETRY_AFTER_MS);
  const ceiling = Math.min(policy.capMs, policy.baseMs * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function allows(policy: RetryPolicy, attempt: number, failingSince: number): boolean {
  if (policy.attempts !== null && attempt >= policy.attempts) return false;
  return policy.giveUpAfterMs === null || Date.now() - failingSince < policy.giveUpAfterMs;
}

/** `Retry-After` in milliseconds (seconds or an HTTP date), or null. */
export function retryAfterMs(value: string | null): number | null {
  if (!value) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : date - Date.now();
}

function causeCode(error: unknown): string | undefined {
  const cause = (error as { cause?: { code?: unknown } } | null)?.cause;
  return typeof cause?.code === "string" ? cause.code : undefined;
}

function describe(error: unknown): string {
  const code = causeCode(error);
  const reason = error instanceof Error ? error.message : String(error);
  return code ? `${reason} (${code})` : reason;
}

export class Transport {
  constructor(readonly options: TransportOptions) {}

  /** Send `call`, resending per `policy` where that is safe; the JSON body of the answer.
   *
   * Resent: connection failures (any call whose request never reached the server, and
   * idempotent calls otherwise), 429 and 503 (refused before any work: `Retry-After` is
   * honoured), and other 5xx answers to idempotent calls. Anything else throws at once;
   * an aborted `signal` throws its reason. */
  async send<T>(call: Call, policy: RetryPolicy, signal?: AbortSignal): Promise<T> {
    let attempt = 0;
    const failingSince = Date.now();
    for (;;) {
      signal?.throwIfAborted();
      let response: { status: number; text: string; headers: Headers };
      try {
        response = await this.once(call, signal);
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        const neverSent = NEVER_SENT.has(causeCode(error) ?? "");
        if (!(neverSent || call.idempotent !== false) || !allows(policy, attempt, failingSince)) {
          throw new ConnectionFailed(`cannot reach ${this.options.baseUrl}: ${describe(error)}`);
        }
        await sleep(backoff(policy, attempt, null), signal);
        attempt += 1;
        continue;
      }
      if (response.status < 400) return decode(response.status, response.text) as T;
      if (resendable(call, response.status) && allows(policy, attempt, failingSince)) {
        await sleep(backoff(policy, attempt, retryAfterMs(response.headers.get("retry-after"))), signal);
        attempt += 1;
        continue;
      }
      throw toApiError(response.status, response.text, response.headers.get("x-request-id"));
    }
  }

  /** One request, its whole answer read within the call's timeout. */
  private async once(call: Call, signal?: AbortSignal): Promise<{ status: number; text: string; headers: Headers }> {
    const url = new URL(this.options.baseUrl + call.path);
    for (const [name, value] of call.query ?? []) url.searchParams.append(name, value);
    const controller = new AbortController();
    const timeoutMs = call.timeoutMs ?? this.options.timeoutMs;
    const timer = setTimeout(() => controller.abort(new RequestTimedOut(`no answer within ${timeoutMs} ms`)), timeoutMs);
    const onAbort = (): void => controller.abort(signal?.reason);
    if (signal?.aborted) onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const headers: Record<string, string> = {
        Authorization: `Bearer ${this.options.token}`,
        Accept: "application/json",
        "User-Agent": "breakpoint-manager-js",
        ...call.headers,
      };
      const init: RequestInit = { method: call.method, headers, signal: controller.signal, redirect: "manual" };
      if (call.body !== undefined) {
        headers["Content-Type"] = "application/json";
        init.body = JSON.stringify(call.body);
      }
      const response = await this.options.fetch(url, init);
      return { status: response.status, text: await response.text(), headers: response.headers };
    } catch (error) {
      const reason = controller.signal.reason;
      throw reason instanceof RequestTimedOut ? new Error(reason.message, { cause: error }) : error;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }
}

function resendable(call: Call, status: number): boolean {
  if (status === 429 || status === 503) return true;
  return call.idempotent !== false && (status === 500 || status === 502 || status === 504);
}

function decode(status: number, text: string): unknown {
  if (status === 204 || text === "") return null;
  try {
    return JSON.parse(text);
  } catch {
    throw new DecodeError(`HTTP ${status}: the answer is not JSON`);
  }
}

function toApiError(status: number, text: string, requestId: string | null): ApiError {
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    // An answer without the envelope (a proxy's page): the status alone says what it is.
  }
  return apiError(status, body, requestId);
}
