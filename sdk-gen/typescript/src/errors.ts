// The errors of the Kiln API: one class per Connect code, with the field violations and
// the retry delay the server sends as google.rpc.BadRequest and google.rpc.RetryInfo.

import { Code, ConnectError } from "@connectrpc/connect";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/** A field of a request that is wrong, e.g. `train_job.spec.nodes`. */
export interface FieldViolation {
  field: string;
  description: string;
}

/** An error of the Kiln API; `code` is the Connect code, e.g. `invalid_argument`. */
export class KilnError extends Error {
  override name = "KilnError";
  readonly code: string = "unknown";
  /** The request's fields that are wrong. */
  fieldViolations: FieldViolation[] = [];
  /** Seconds the server asks to wait before retrying. */
  retryAfter?: number;
  /** The Connect error this came from, if any. */
  cause?: ConnectError;
  constructor(message: string) {
    super(message);
  }
}

function codeClass(code: string, className: string) {
  return class extends KilnError {
    override name = className;
    override readonly code = code;
  };
}

export class CanceledError extends codeClass("canceled", "CanceledError") {}
export class UnknownError extends codeClass("unknown", "UnknownError") {}
export class InvalidArgumentError extends codeClass("invalid_argument", "InvalidArgumentError") {}
export class DeadlineExceededError extends codeClass("deadline_exceeded", "DeadlineExceededError") {}
export class NotFoundError extends codeClass("not_found", "NotFoundError") {}
export class AlreadyExistsError extends codeClass("already_exists", "AlreadyExistsError") {}
export class PermissionDeniedError extends codeClass("permission_denied", "PermissionDeniedError") {}
export class ResourceExhaustedError extends codeClass("resource_exhausted", "ResourceExhaustedError") {}
export class FailedPreconditionError extends codeClass("failed_precondition", "FailedPreconditionError") {}
export class AbortedError extends codeClass("aborted", "AbortedError") {}
export class OutOfRangeError extends codeClass("out_of_range", "OutOfRangeError") {}
export class UnimplementedError extends codeClass("unimplemented", "UnimplementedError") {}
export class InternalError extends codeClass("internal", "InternalError") {}
export class UnavailableError extends codeClass("unavailable", "UnavailableError") {}
export class DataLossError extends codeClass("data_loss", "DataLossError") {}
export class UnauthenticatedError extends codeClass("unauthenticated", "UnauthenticatedError") {}

const byCode: Record<Code, new (message: string) => KilnError> = {
  [Code.Canceled]: CanceledError,
  [Code.Unknown]: UnknownError,
  [Code.InvalidArgument]: InvalidArgumentError,
  [Code.DeadlineExceeded]: DeadlineExceededError,
  [Code.NotFound]: NotFoundError,
  [Code.AlreadyExists]: AlreadyExistsError,
  [Code.PermissionDenied]: PermissionDeniedError,
  [Code.ResourceExhausted]: ResourceExhaustedError,
  [Code.FailedPrecondition]: FailedPreconditionError,
  [Code.Aborted]: AbortedError,
  [Code.OutOfRange]: OutOfRangeError,
  [Code.Unimplemented]: UnimplementedError,
  [Code.Internal]: InternalError,
  [Code.Unavailable]: UnavailableError,
  [Code.DataLoss]: DataLossError,
  [Code.Unauthenticated]: UnauthenticatedError,
};

/** The KilnError of an error a call threw (other errors pass unchanged). */
export function toKilnError(err: unknown): unknown {
  if (err instanceof KilnError) return err;
  if (!(err instanceof ConnectError)) return err;
  // A connection that broke or never opened is the server being unavailable, whatever code
  // the transport gave it (Node reports a dropped answer as "socket hang up", aborted).
  const sys = systemError(err);
  const e = sys ? new UnavailableError(`cannot reach the Kiln API server: ${sys}`) : new byCode[err.code](err.rawMessage);
  e.cause = err;
  for (const d of err.details) {
    if (!("type" in d) || !(d.value instanceof Uint8Array)) continue;
    try {
      if (d.type === "google.rpc.BadRequest") e.fieldViolations.push(...badRequest(d.value));
      if (d.type === "google.rpc.RetryInfo") e.retryAfter = retryInfo(d.value);
    } catch {
      // A detail this SDK cannot read does not hide the error itself.
    }
  }
  return e;
}

function systemError(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^E[A-Z]+$/.test(code)) return `${(e as Error).message} (${code})`;
  }
  return undefined;
}

function* fields(buf: Uint8Array): Generator<[number, Uint8Array | bigint]> {
  const r = new BinaryReader(buf);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (wt === WireType.LengthDelimited) yield [no, r.bytes()];
    else if (wt === WireType.Varint) yield [no, BigInt(r.uint64())];
    else r.skip(wt);
  }
}

function badRequest(buf: Uint8Array): FieldViolation[] {
  const out: FieldViolation[] = [];
  const text = new TextDecoder();
  for (const [no, v] of fields(buf)) {
    if (no !== 1 || !(v instanceof Uint8Array)) continue;
    const fv: FieldViolation = { field: "", description: "" };
    for (const [n, x] of fields(v)) {
      if (x instanceof Uint8Array && n === 1) fv.field = text.decode(x);
      if (x instanceof Uint8Array && n === 2) fv.description = text.decode(x);
    }
    out.push(fv);
  }
  return out;
}

function retryInfo(buf: Uint8Array): number | undefined {
  for (const [no, v] of fields(buf)) {
    if (no !== 1 || !(v instanceof Uint8Array)) continue;
    let s = 0;
    for (const [n, x] of fields(v)) {
      if (n === 1 && typeof x === "bigint") s += Number(x);
      if (n === 2 && typeof x === "bigint") s += Number(x) / 1e9;
    }
    return s;
  }
  return undefined;
}

/** The Kiln configuration is missing, unreadable or wrong; the message says what to do. */
export class ConfigError extends Error {
  override name = "ConfigError";
}
