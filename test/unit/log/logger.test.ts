/**
 * createLogger writes each key once per line whatever its children bind and its callers pass
 * (issue 22 item 18): a child's binding replaces its parent's value, and a call's object naming a
 * bound key replaces the bound value on that line. Checked on the raw text (JSON.parse keeps the
 * last of two equal keys) over generated chains of children and calls; the redaction still applies.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLogger, type Logger } from '../../../src/log/index.ts';
import { duplicateKeys } from '../../helpers/json-keys.ts';

function captured(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = createLogger('test', 'debug', { write: (s: string) => void lines.push(s.trimEnd()) });
  return { logger, lines };
}

const KEYS = ['component', 'identity', 'name', 'pid', 'reqId', 'run', 'err', 'msg2', 'level2'] as const;
const bindings = fc.dictionary(fc.constantFrom(...KEYS), fc.oneof(fc.string(), fc.integer()), {
  maxKeys: 4,
  noNullPrototype: true,
});

describe('createLogger', () => {
  it('the checkpointer under the controller: one component, the innermost', () => {
    const { logger, lines } = captured();
    const controller = logger.child({ component: 'controller', identity: 'c-1' });
    controller.child({ component: 'checkpointer' }).info('checkpoint signed');
    expect(duplicateKeys(lines[0]!)).toEqual([]);
    expect(JSON.parse(lines[0]!)).toMatchObject({ component: 'checkpointer', identity: 'c-1', name: 'test' });
  });

  it('a call naming a bound key: that line carries the call value once; the logger keeps its own', () => {
    const { logger, lines } = captured();
    const log = logger.child({ identity: 'a' });
    log.info({ identity: 'b', run: 'x' }, 'other');
    log.info('own');
    expect(lines.map(duplicateKeys)).toEqual([[], []]);
    expect(JSON.parse(lines[0]!)).toMatchObject({ identity: 'b', run: 'x', msg: 'other' });
    expect(JSON.parse(lines[1]!)).toMatchObject({ identity: 'a', msg: 'own' });
  });

  it('never writes a key twice, over any chain of children and calls', () => {
    fc.assert(
      fc.property(fc.array(bindings, { maxLength: 5 }), bindings, fc.boolean(), (chain, call, withObject) => {
        const { logger, lines } = captured();
        let log = logger;
        for (const b of chain) log = log.child(b);
        if (withObject) log.warn(call, 'line');
        else log.warn('line');
        log.child({ component: 'last' }).error(new Error('boom'));
        for (const l of lines) expect(duplicateKeys(l), l).toEqual([]);
        const parsed = JSON.parse(lines[0]!) as Record<string, unknown>;
        // The innermost value wins: the call's, else the last child's that bound the key.
        const expected: Record<string, unknown> = {};
        for (const b of chain) Object.assign(expected, b);
        if (withObject) Object.assign(expected, call);
        for (const [k, v] of Object.entries(expected)) expect(parsed[k], k).toEqual(v);
      }),
      { numRuns: 300 },
    );
  });

  it('still redacts credentials, in bindings and in calls', () => {
    const { logger, lines } = captured();
    logger.child({ req: { authorization: 'Bearer s3cret' } }).info({ cfg: { token: 't0k' } }, 'x');
    expect(lines[0]).not.toContain('s3cret');
    expect(lines[0]).not.toContain('t0k');
    expect(duplicateKeys(lines[0]!)).toEqual([]);
  });
});
