/**
 * Errors: one class per code of the API's error envelope, plus the client's own.
 *
 * Every API error is `{"error": {"code", "message", "details"}}`; `apiError()` picks the
 * class by `code`, so `catch (e) { if (e instanceof NotFound) ... }` or
 * `e instanceof InvalidState && e.details.currentStatus` read naturally. The classes and
 * codes are the Python SDK's (bpm_client.errors).
 */

/** Base of everything this package throws. */
export class BpmError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** No token, or a server URL that is not http(s). */
export class ConfigurationError extends BpmError {}

/** An answer that does not have the shape the API documents (not JSON, say). */
export class DecodeError extends BpmError {}

/** The server could not be reached (after the retries the call allowed). */
export class ConnectionFailed extends BpmError {}

/** The breakpoint was still waiting when the caller's timeout ran out. */
export class WaitTimeout extends BpmError {
  constructor(
    readonly breakpointId: string | string[],
    readonly timeoutSeconds: number,
  ) {
    super(`${String(breakpointId)} still waiting after ${timeoutSeconds} s`);
  }
}

/** A receipt that does not verify (a bad signature, an unknown key, changed claims), or
 * that does not state the result it came with. */
export class ReceiptInvalid extends BpmError {}

/** Values no valuesDigest can be computed over (a number past ±(2^53 - 1), not finite):
 * the receipt cannot vouch for them, so they are refused like an invalid receipt's. */
export class ValuesNotRepresentable extends ReceiptInvalid {}

/** The JWKS could not be read (an unreachable server, not a JWK Set). */
export class JwksUnavailable extends BpmError {}

export interface ApiErrorInit {
  code?: string;
  details?: Record<string, unknown>;
  status?: number;
  requestId?: string | null;
}

/** An error answer from the API, with the envelope's code, message and details. */
export class ApiError extends BpmError {
  static readonly code: string = "error";
  readonly code: string;
  readonly details: Record<string, unknown>;
  /** The HTTP status of the answer. */
  readonly status: number;
  /** The answer's X-Request-ID (quote it when reporting a problem). */
  readonly requestId: string | null;

  constructor(message: string, init: ApiErrorInit = {}) {
    super(message);
    this.code = init.code ?? (new.target as typeof ApiError).code;
    this.details = init.details ?? {};
    this.status = init.status ?? 0;
    this.requestId = init.requestId ?? null;
  }
}

export class ValidationError extends ApiError {
  static override readonly code = "validation_error";
}
export class NotAuthenticated extends ApiError {
  static override readonly code = "not_authenticated";
}
export class PermissionDenied extends ApiError {
  static override readonly code = "permission_denied";
}
export class NotFound extends ApiError {
  static override readonly code = "not_found";
}
/** The breakpoint is no longer waiting (`details.currentStatus` says what it is). */
export class InvalidState extends ApiError {
  static override readonly code = "invalid_state";
}
export class IdempotencyConflict extends ApiError {
  static override readonly code = "idempotency_conflict";
}
export class Conflict extends ApiError {
  static override readonly code = "conflict";
}
export class PayloadTooLarge extends ApiError {
  static override readonly code = "payload_too_large";
}
export class Throttled extends ApiError {
  static override readonly code = "throttled";
}
export class ServerError extends ApiError {
  static override readonly code = "server_error";
}
export class Unavailable extends ApiError {
  static override readonly code = "unavailable";
}

const ERRORS: ReadonlyMap<string, typeof ApiError> = new Map(
  [
    ValidationError,
    NotAuthenticated,
    PermissionDenied,
    NotFound,
    InvalidState,
    IdempotencyConflict,
    Conflict,
    PayloadTooLarge,
    Throttled,
    ServerError,
    Unavailable,
  ].map((cls) => [cls.code, cls]),
);

// For answers without an envelope (a proxy's 502, say).
const STATUS_CODES: ReadonlyMap<number, string> = new Map([
  [400, "validation_error"],
  [401, "not_authenticated"],
  [403, "permission_denied"],
  [404, "not_found"],
  [413, "payload_too_large"],
  [429, "throttled"],
  [500, "server_error"],
  [502, "unavailable"],
  [503, "unavailable"],
  [504, "unavailable"],
]);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The error an answer with HTTP `status` and JSON `body` (or null) stands for. */
export function apiError(status: number, body: unknown, requestId: string | null = null): ApiError {
  const envelope = isObject(body) && isObject(body.error) ? body.error : null;
  const fallback = STATUS_CODES.get(status) ?? (envelope ? "error" : "server_error");
  const code = envelope && typeof envelope.code === "string" && envelope.code ? envelope.code : fallback;
  const message =
    envelope && typeof envelope.message === "string" && envelope.message ? envelope.message : `HTTP ${status}`;
  const details = envelope && isObject(envelope.details) ? envelope.details : {};
  const cls = ERRORS.get(code) ?? ApiError;
  return new cls(message, { code, details, status, requestId });
}
