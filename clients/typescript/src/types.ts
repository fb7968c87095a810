/**
 * The API's shapes by name, from the types openapi-typescript generates from the server's
 * OpenAPI schema (schema.ts: `make typescript-types` regenerates it, a test in
 * `make test` fails while it differs from the server's).
 */
import type { components } from "./schema.js";

type Schemas = components["schemas"];

/** The body of `POST /api/breakpoints`. */
export type CreateBody = Schemas["BreakpointCreateRequest"];
/** The full representation of a breakpoint. */
export type Breakpoint = Schemas["Breakpoint"];
/** The polling answer (`GET /api/breakpoints/{id}/status`). */
export type Status = Schemas["Status"];
/** One breakpoint of a many-status answer; `error` when it is not visible to you. */
export type StatusEntry = Schemas["ManyStatusEntry"];
export type StatusName = Schemas["StatusEnum"];
/** babysitter's BreakpointResult: what a decided breakpoint answered. */
export type BreakpointResult = Schemas["BreakpointResult"];
/** The body of `POST /api/breakpoints/{id}/feedback` (a reviewer's comment or decision). */
export type FeedbackBody = Schemas["FeedbackCreateRequest"];
export type FeedbackCreated = Schemas["FeedbackCreated"];
export type Event = Schemas["Event"];
/** The service's public receipt keys (`GET /.well-known/jwks.json`). */
export type Jwks = Schemas["Jwks"];
export type ErrorEnvelope = Schemas["Error"];

/** A decided breakpoint's result, with the breakpoint's id and final status added; and
 * `verified`: true once its signed receipt checked out as this breakpoint's, false when it
 * did not, null when not checked (no receipt, or no JWKS at hand). */
export type Decision = BreakpointResult & {
  breakpointId: string;
  status: StatusName;
  verified: boolean | null;
};

/** The claims of a verified receipt (docs/receipts.md). */
export interface ReceiptClaims {
  breakpointId: string;
  agentId: string;
  runId: string | null;
  status: StatusName;
  approved: boolean;
  option: string | null;
  respondedBy: string | string[] | null;
  via: string;
  decidedAt: string;
  payloadDigest: string | null;
  valuesDigest?: string | null;
  approvers?: Array<{ seat: string; respondedBy: string }>;
  /** Approved by a grant: its id, and the reviewer who gave it. */
  grantId?: string;
  grantedBy?: string;
}

/** What a breakpoint showed its reviewers: the payloadDigest covers exactly this. */
export interface ReviewedContent {
  question?: string | null;
  title?: string | null;
  payload: unknown;
}

/** A result to verify: a Decision, or any BreakpointResult (a webhook body's, a stored one). */
export type VerifiableResult = BreakpointResult & { breakpointId?: string | null; status?: StatusName | null };
