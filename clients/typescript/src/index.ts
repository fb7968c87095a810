/**
 * Breakpoint Manager's TypeScript SDK: ask a human from an AI agent, wait for the decision,
 * and check its signed receipt.
 */
export { Client, DEFAULT_URL } from "./client.js";
export type { AskOptions, ClientOptions, CreateOptions, ReleaseOptions, VerifyOptions, WaitOptions } from "./client.js";
export {
  ApiError,
  BpmError,
  ConfigurationError,
  Conflict,
  ConnectionFailed,
  DecodeError,
  IdempotencyConflict,
  InvalidState,
  JwksUnavailable,
  NotAuthenticated,
  NotFound,
  PayloadTooLarge,
  PermissionDenied,
  ReceiptInvalid,
  ServerError,
  Throttled,
  Unavailable,
  ValidationError,
  ValuesNotRepresentable,
  WaitTimeout,
  apiError,
} from "./errors.js";
export type { RetryPolicy } from "./http.js";
export { CanonicalizationError, canonicalJson, payloadDigest } from "./canonical.js";
export { checkResult, valuesDigest, verifyReceipt } from "./receipts.js";
export type * from "./types.js";
export type { components, operations, paths } from "./schema.js";
