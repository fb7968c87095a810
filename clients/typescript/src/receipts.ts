/**
 * Check the service's signed receipts with `jose`, as the Python SDK does
 * (bpm_client.receipts).
 *
 * A final result carries `receipt`: a compact JWS (EdDSA over Ed25519, header typ
 * `bpm-receipt+jws`) whose claims state the decision. It verifies with the key of the
 * service's JWKS (`GET /.well-known/jwks.json`) its header's kid names. Then the claims must
 * state this very result of this very breakpoint, and the digests are recomputed here:
 * valuesDigest from the values (the result's, or those the caller will run) and
 * payloadDigest from what the reviewers were shown (question, title and payload).
 */
import { compactVerify, decodeProtectedHeader, importJWK, type JWK } from "jose";

import { CanonicalizationError, canonicalJson, digest, payloadDigest, unsafeNumberPath } from "./canonical.js";
import { JwksUnavailable, ReceiptInvalid, ValuesNotRepresentable } from "./errors.js";
import type { Jwks, ReceiptClaims, ReviewedContent, VerifiableResult } from "./types.js";

export const ALGORITHM = "EdDSA";
export const RECEIPT_TYPE = "bpm-receipt+jws";
export const JWKS_PATH = "/.well-known/jwks.json";
// Compact JWS: three base64url segments without padding (RFC 7515 section 2), nothing else.
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const RECEIPT_CLAIMS = [
  "agentId",
  "approved",
  "breakpointId",
  "decidedAt",
  "option",
  "payloadDigest",
  "respondedBy",
  "runId",
  "status",
  "valuesDigest",
  "via",
];
// Receipts signed before forms existed state no valuesDigest (they approved no values).
const RECEIPT_CLAIMS_BEFORE_FORMS = RECEIPT_CLAIMS.filter((name) => name !== "valuesDigest");
// Claims only some receipts state: approvers (each approving seat of a collect-all or quorum
// decision, and who answered for it); grantId and grantedBy (the grant that approved it,
// and the reviewer who gave it).
const OPTIONAL_CLAIMS = ["approvers", "grantId", "grantedBy"];

/** A result's valuesDigest: "sha256:" + the hex SHA-256 of the RFC 8785 JSON of the
 * values; null when there are none. Values past ±(2^53 - 1) throw ValuesNotRepresentable. */
export function valuesDigest(values: unknown): string | null {
  if (values === null || values === undefined) return null;
  const unsafe = unsafeNumberPath(values);
  if (unsafe !== null) {
    throw new ValuesNotRepresentable(
      `cannot verify: the values hold a number past ±9007199254740991 (2^53 - 1) at ${unsafe}, ` +
        "which no digest covers (a larger number travels as a string)",
    );
  }
  try {
    return digest(values);
  } catch (error) {
    if (error instanceof CanonicalizationError) {
      throw new ValuesNotRepresentable(`cannot verify: the values hold what no digest covers (${error.message})`);
    }
    throw error;
  }
}

/** Whether `value` is a JWK Set (`{"keys": [...]}`). */
export function isJwks(value: unknown): value is Jwks {
  return typeof value === "object" && value !== null && Array.isArray((value as { keys?: unknown }).keys);
}

/** The kid a receipt's header names (null when it is not a JWS). */
export function receiptKid(receipt: string): string | null {
  try {
    const kid = decodeProtectedHeader(receipt).kid;
    return typeof kid === "string" ? kid : null;
  } catch {
    return null;
  }
}

/** The claims of `receipt` if a key of `jwks` signed it; else throw ReceiptInvalid. */
export async function verifyReceipt(receipt: string, jwks: Jwks): Promise<ReceiptClaims> {
  if (typeof receipt !== "string" || !COMPACT_JWS.test(receipt)) {
    throw new ReceiptInvalid("not a receipt: a compact JWS is base64url without padding");
  }
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(receipt);
  } catch (error) {
    throw new ReceiptInvalid(`not a receipt: ${(error as Error).message}`);
  }
  if (header.alg !== ALGORITHM || header.typ !== RECEIPT_TYPE) {
    throw new ReceiptInvalid(`not a receipt: alg must be ${ALGORITHM}, typ ${RECEIPT_TYPE}`);
  }
  const jwk = jwks.keys.find((key) => key.kid === header.kid);
  if (jwk === undefined) throw new ReceiptInvalid(`no key of the JWKS has kid ${JSON.stringify(header.kid)}`);
  let payload: Uint8Array;
  try {
    const key = await importJWK(jwk as JWK, ALGORITHM);
    ({ payload } = await compactVerify(receipt, key, { algorithms: [ALGORITHM] }));
  } catch (error) {
    throw new ReceiptInvalid(`the receipt does not verify: ${(error as Error).message}`);
  }
  const claims: unknown = JSON.parse(new TextDecoder().decode(payload));
  if (typeof claims !== "object" || claims === null || Array.isArray(claims)) {
    throw new ReceiptInvalid("the receipt's claims are not an object");
  }
  const names = Object.keys(claims)
    .filter((name) => !OPTIONAL_CLAIMS.includes(name))
    .sort();
  if (!sameList(names, RECEIPT_CLAIMS) && !sameList(names, RECEIPT_CLAIMS_BEFORE_FORMS)) {
    throw new ReceiptInvalid(
      `a receipt's claims are exactly: ${RECEIPT_CLAIMS.join(", ")} (and, on some, ${OPTIONAL_CLAIMS.join(", ")})`,
    );
  }
  return claims as ReceiptClaims;
}

function sameList(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((item, index) => item === b[index]);
}

/** The breakpoint whose receipt this must be: given, or the result's (never guessed). */
export function expectedBreakpoint(result: VerifiableResult, breakpointId?: string | null): string {
  const given = breakpointId || result.breakpointId;
  if (!given) {
    throw new ReceiptInvalid(
      "which breakpoint's receipt is this? The result carries no breakpoint id: pass breakpointId " +
        "(a receipt is only valid for the breakpoint it names)",
    );
  }
  if (result.breakpointId && result.breakpointId !== given) {
    throw new ReceiptInvalid(`the result is breakpoint ${result.breakpointId}'s, not ${given}'s`);
  }
  return given;
}

export interface CheckOptions {
  /** The breakpoint the receipt must name (else the result's own breakpointId). */
  breakpointId?: string | null;
  /** The values about to be run (else the result's own): their digest must be signed. */
  values?: Record<string, unknown> | null;
  /** What the reviewers were shown: the signed payloadDigest must be its digest. */
  content?: ReviewedContent;
}

/** The receipt's claims, once it verifies and states this very result of this very
 * breakpoint (breakpointId, approved, option, respondedBy, payloadDigest; status when the
 * result has it; approvers when the receipt names them) and these values; the digests
 * recomputed (valuesDigest always, payloadDigest when `content` is given). Else throw
 * ReceiptInvalid. */
export async function checkResult(result: VerifiableResult, jwks: Jwks, options: CheckOptions = {}): Promise<ReceiptClaims> {
  if (!result.receipt) throw new ReceiptInvalid("the result carries no receipt");
  const expected = expectedBreakpoint(result, options.breakpointId);
  const claims = await verifyReceipt(result.receipt, jwks);
  const values = options.values !== undefined ? options.values : result.values;
  const stated: Array<[keyof ReceiptClaims, unknown]> = [
    ["breakpointId", expected],
    ["approved", result.approved],
    ["option", result.option ?? null],
    ["respondedBy", result.respondedBy ?? null],
    ["payloadDigest", result.payloadDigest ?? null],
    ["valuesDigest", valuesDigest(values)],
  ];
  if (options.content !== undefined) stated.push(["payloadDigest", payloadDigest(options.content)]);
  if (result.status) stated.push(["status", result.status]);
  if ("approvers" in claims) stated.push(["approvers", result.approvers ?? null]);
  const differing = new Set<string>();
  for (const [name, value] of stated) {
    if (!sameJson(claims[name] ?? null, value)) differing.add(name);
  }
  if (differing.size > 0) {
    throw new ReceiptInvalid(`the receipt does not state this result: ${[...differing].sort().join(", ")}`);
  }
  return claims;
}

function sameJson(a: unknown, b: unknown): boolean {
  try {
    return canonicalJson(a) === canonicalJson(b);
  } catch {
    return false;
  }
}

/** The server's JWKS, fetched once and kept `maxAgeMs` (a receipt whose kid it does not
 * list fetches it again: a key rotated in since). */
export class JwksCache {
  private cached: { at: number; jwks: Jwks } | null = null;

  constructor(
    private readonly fetchJwks: () => Promise<unknown>,
    private readonly maxAgeMs = 3_600_000,
  ) {}

  async get(kid: string | null): Promise<Jwks> {
    const cached = this.cached;
    if (cached && Date.now() - cached.at < this.maxAgeMs) {
      if (kid === null || cached.jwks.keys.some((key) => key.kid === kid)) return cached.jwks;
    }
    let jwks: unknown;
    try {
      jwks = await this.fetchJwks();
    } catch (error) {
      throw new JwksUnavailable(`cannot fetch the JWKS: ${(error as Error).message}`);
    }
    if (!isJwks(jwks)) throw new JwksUnavailable('not a JWK Set: expected {"keys": [...]}');
    this.cached = { at: Date.now(), jwks };
    return jwks;
  }
}
