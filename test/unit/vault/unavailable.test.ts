/**
 * Which PostgreSQL failures are an outage (503 UPSTREAM_UNAVAILABLE, VaultUnavailable) and which are
 * the request's own fault. The same errors come from a real server in
 * test/integration/operator/hung.test.ts (SIGSTOP) and faults.test.ts (stopped server).
 */
import { describe, expect, it } from 'vitest';
import { isVaultUnavailable } from '../../../src/vault/index.ts';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe('isVaultUnavailable', () => {
  it.each([
    ['a refused connection', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['a reset connection', withCode('read ECONNRESET', 'ECONNRESET')],
    ['the client-side statement deadline', new Error('Query read timeout')],
    ['the pool connect deadline', new Error('timeout exceeded when trying to connect')],
    ['the client connect deadline', new Error('Connection terminated due to connection timeout')],
    ['a dropped connection', new Error('Connection terminated unexpectedly')],
    ['statement_timeout (57014)', withCode('canceling statement due to statement timeout', '57014')],
    [
      'a shutting-down server (57P01)',
      withCode('terminating connection due to administrator command', '57P01'),
    ],
    ['a starting server (57P03)', withCode('the database system is starting up', '57P03')],
    ['a connection exception (08006)', withCode('connection failure', '08006')],
    ['too many connections (53300)', withCode('sorry, too many clients already', '53300')],
    ['an outage as the cause', new Error('append failed', { cause: withCode('x', 'ECONNREFUSED') })],
  ])('%s is an outage', (_what, err) => {
    expect(isVaultUnavailable(err)).toBe(true);
  });

  it.each([
    ['a unique violation', withCode('duplicate key value', '23505')],
    ['the append-only trigger', withCode('attestations are append-only', '23001')],
    ['a missing privilege', withCode('permission denied for table attestations', '42501')],
    ['bad input', withCode('invalid input syntax for type uuid', '22P02')],
    ['a plain error', new Error('something else')],
    ['not an error', 'ECONNREFUSED'],
  ])('%s is not', (_what, err) => {
    expect(isVaultUnavailable(err)).toBe(false);
  });
});
