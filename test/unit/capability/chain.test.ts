import { describe, expect, it } from 'vitest';
import { chainOf, chainProblems } from '../../../src/capability/chain.ts';
import { covers, isPrincipal, isScope } from '../../../src/capability/scope.ts';

describe('scopes', () => {
  it.each([
    ['*', 'kb:read', true],
    ['kb', 'kb', true],
    ['kb', 'kb:read', true],
    ['kb', 'kb:read:draft', true],
    ['kb:read', 'kb:read:draft', true],
    ['kb:read', 'kb', false],
    ['kb:read', 'kb:write', false],
    ['kb', 'kbx:read', false],
    ['kb:read', '*', false],
    ['tickets:comment', 'tickets', false],
  ])('covers(%s, %s) is %s', (outer, inner, expected) => {
    expect(covers(outer, inner)).toBe(expected);
  });

  it.each([
    'kb:read',
    '*',
    'tickets:comment',
    'dataset:read:incidents-7',
    'models:invoke:openai/gpt-4o',
    'ü:ß',
  ])('accepts the scope %s', (s) => expect(isScope(s)).toBe(true));
  it.each(['', 'kb read', 'kb:', ':kb', 'kb::read', 'kb:*', '**', 'a\u0000b', 'a\u00a0b', 'x'.repeat(254)])(
    'refuses the scope %j',
    (s) => expect(isScope(s)).toBe(false),
  );
  it.each([
    'user:alice',
    'team:support-platform',
    'system:serviceaccount:ns:pipeline',
    'user:alice@example.com',
  ])('accepts the principal %s', (p) => expect(isPrincipal(p)).toBe(true));
  it.each([
    'alice',
    'User:alice',
    ':alice',
    'user:',
    'user:al ice',
    'user:a\nb',
    '1user:x',
    `user:${'a'.repeat(250)}`,
  ])('refuses the principal %j', (p) => expect(isPrincipal(p)).toBe(false));
});

describe('chains', () => {
  it('puts the delegations first and the step grant last', () => {
    expect(
      chainOf({
        scope: 'kb:read',
        grantedBy: 'team:a',
        approvedBy: 'user:alice',
        delegatedFrom: [{ scope: 'kb', grantedBy: 'org:acme' }],
      }),
    ).toEqual([
      { scope: 'kb', grantedBy: 'org:acme', approvedBy: null },
      { scope: 'kb:read', grantedBy: 'team:a', approvedBy: 'user:alice' },
    ]);
  });

  it('refuses a delegation that widens, naming the link', () => {
    const widened = {
      scope: 'kb',
      grantedBy: 'team:a',
      delegatedFrom: [{ scope: 'kb:read', grantedBy: 'org:acme' }],
    };
    expect(() => chainOf(widened)).toThrow(expect.objectContaining({ code: 'SCOPE_WIDENED' }));
    expect(() => chainOf({ ...widened, scope: 'tickets:comment' })).toThrow(
      /^link 1: team:a grants tickets:comment/,
    );
  });

  it('refuses an invalid approver, an empty or oversized scope, too many links', () => {
    expect(
      chainProblems([{ scope: 'kb', grantedBy: 'team:a', approvedBy: 'alice' }]).map((p) => p.code),
    ).toEqual(['PRINCIPAL_INVALID']);
    expect(chainProblems([{ scope: '', grantedBy: 'team:a', approvedBy: null }]).map((p) => p.code)).toEqual([
      'SCOPE_INVALID',
    ]);
    expect(chainProblems([{ scope: 'k'.repeat(254), grantedBy: 'team:a', approvedBy: null }])[0]?.code).toBe(
      'SCOPE_INVALID',
    );
    const link = { scope: 'kb', grantedBy: 'team:a', approvedBy: null };
    expect(chainProblems(Array.from({ length: 6 }, () => link)).map((p) => p.code)).toEqual([
      'CHAIN_INVALID',
    ]);
    expect(chainProblems([]).map((p) => p.code)).toEqual(['CHAIN_INVALID']);
  });
});
