import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createKeySigner } from '../../../src/signing/key-signer.ts';
import { createSignerRegistry } from '../../../src/signing/registry.ts';

const signer = () => createKeySigner({ privateKey: generateKeyPairSync('ed25519').privateKey });

describe('signer registry', () => {
  it('uses a namespace key when registered, the service signer otherwise', () => {
    const service = signer();
    const teamA = signer();
    const registry = createSignerRegistry(service, [['team-a', teamA]]);
    expect(registry.forNamespace('team-a')).toBe(teamA);
    expect(registry.hasCustomerKey('team-a')).toBe(true);
    expect(registry.forNamespace('team-b')).toBe(service);
    expect(registry.hasCustomerKey('team-b')).toBe(false);

    const teamB = signer();
    registry.set('team-b', teamB);
    expect(registry.forNamespace('team-b')).toBe(teamB);
    expect(registry.delete('team-a')).toBe(true);
    expect(registry.forNamespace('team-a')).toBe(service);
    expect(registry.serviceSigner).toBe(service);
  });
});
