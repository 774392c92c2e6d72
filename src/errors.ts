/**
 * The one base of every typed failure in the service, in the shape of sigstore-js
 * `verify/src/error.ts`: callers, tests and the HTTP error handler branch on `code` (a string-literal
 * union per module; for `KubeApiError` the HTTP status the API server answered), never on the
 * message; the underlying failure, if any, is `cause`.
 *
 * A module declares its codes and a one-line subclass:
 *
 *   export type VaultErrorCode = 'CURSOR_INVALID' | 'INVALID_INPUT';
 *   export class VaultError extends BaseError<VaultErrorCode> {}
 *
 * `name` is taken from the subclass, so logs and stack traces say which module failed.
 */
export class BaseError<Code extends string | number = string> extends Error {
  readonly code: Code;

  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** True when `err` is a BaseError (of any module) carrying `code`. */
export function hasCode<Code extends string | number>(err: unknown, code: Code): err is BaseError<Code> {
  return err instanceof BaseError && err.code === code;
}

/**
 * A broken invariant of this code base: a state the code around it makes impossible (a bug, never
 * bad input, a peer's answer or a failed dependency, which have their module's error and code).
 */
export class InvariantError extends BaseError<'INVARIANT'> {
  constructor(message: string) {
    super('INVARIANT', message);
  }
}
