/**
 * RFC 8785 (JSON Canonicalization Scheme) and the digests the service signs with it.
 *
 * payloadDigest is "sha256:" + the hex SHA-256 of the canonical JSON of
 * `{question, title, payload}` as stored; valuesDigest the same over a result's values
 * alone (docs/receipts.md). The server computes both in Python; the same bytes here give
 * the same digests.
 */
import { createHash } from "node:crypto";

export const DIGEST_PREFIX = "sha256:";
const SAFE_INTEGER = Number.MAX_SAFE_INTEGER; // 2^53 - 1
// A UTF-16 surrogate without its pair: not a Unicode string, which RFC 8785 refuses.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A value RFC 8785 cannot write (a number that is not finite, a lone surrogate, a value
 * that is not JSON). `path` is its JSON pointer. */
export class CanonicalizationError extends Error {
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super(`${path || "/"}: ${reason}`);
    this.name = "CanonicalizationError";
  }
}

/** The RFC 8785 canonical JSON text of `value`. */
export function canonicalJson(value: unknown): string {
  return write(value, "");
}

function write(value: unknown, path: string): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new CanonicalizationError(path, `${value} is not a JSON number`);
      // ECMAScript's Number-to-string is the serialization RFC 8785 prescribes; -0 is "0".
      return Object.is(value, -0) ? "0" : String(value);
    case "string":
      if (LONE_SURROGATE.test(value)) throw new CanonicalizationError(path, "a lone surrogate is not text");
      return JSON.stringify(value); // the escapes RFC 8785 prescribes, and nothing else
    case "object":
      return Array.isArray(value) ? writeArray(value, path) : writeObject(value, path);
    default:
      throw new CanonicalizationError(path, `a ${typeof value} is not JSON`);
  }
}

function writeArray(items: unknown[], path: string): string {
  return `[${items.map((item, index) => write(item, `${path}/${index}`)).join(",")}]`;
}

function writeObject(object: object, path: string): string {
  const prototype = Object.getPrototypeOf(object);
  if (prototype !== Object.prototype && prototype !== null) {
    throw new CanonicalizationError(path, `a ${object.constructor?.name ?? "class instance"} is not JSON`);
  }
  // Sorted by UTF-16 code units, as RFC 8785 orders keys (and as JavaScript sorts strings).
  const keys = Object.keys(object).sort();
  const members = keys.map((key) => {
    const at = `${path}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`;
    if (LONE_SURROGATE.test(key)) throw new CanonicalizationError(at, "a lone surrogate is not text");
    return `${JSON.stringify(key)}:${write((object as Record<string, unknown>)[key], at)}`;
  });
  return `{${members.join(",")}}`;
}

/** "sha256:" + the hex SHA-256 of the canonical JSON of `value` (as UTF-8). */
export function digest(value: unknown): string {
  return DIGEST_PREFIX + createHash("sha256").update(canonicalJson(value), "utf8").digest("hex");
}

/** A breakpoint's payloadDigest, from its question, title and payload as stored. */
export function payloadDigest(content: { question?: string | null; title?: string | null; payload: unknown }): string {
  return digest({ question: content.question ?? null, title: content.title ?? null, payload: content.payload });
}

/** A number past ±(2^53 - 1): the server refuses such values, so no receipt covers them. */
export function unsafeNumberPath(value: unknown, path = ""): string | null {
  if (typeof value === "number") return Math.abs(value) > SAFE_INTEGER ? path || "/" : null;
  if (value === null || typeof value !== "object") return null;
  for (const [key, member] of Object.entries(value)) {
    const found = unsafeNumberPath(member, `${path}/${key}`);
    if (found) return found;
  }
  return null;
}
