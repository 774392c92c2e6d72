import { decodeKeySet } from '../../cose/key.ts';
import { Paths } from '../../export/layout.ts';
import type { EntryHandler } from '../entry.ts';
import { trustedChainFile } from './chain-file.ts';

/**
 * The key material of the bundle, first in the archive: the SCITT log keys (a COSE Key Set) and
 * their certificate chains, the signers' certificate chains, and bare keys. None of it is trusted
 * because the bundle carries it: a signer chain or log key is used only once its chain leads to
 * the caller's anchors; a bare key only when the caller gave it (`--key`).
 */

/** `scitt/log-keys.cbor`: the keys of the exporting deployment's own log. */
export const logKeysEntry: EntryHandler = {
  name: 'log keys',
  pattern: /^scitt\/log-keys\.cbor$/,
  onEntry(state, entry) {
    try {
      state.bundleLogKeys = decodeKeySet(entry.content);
    } catch (err) {
      state.fail(entry.path, 'MALFORMED', (err as Error).message);
    }
  },
};

/** `scitt/log-certs/<kid>.pem`: a log key's chain; the key becomes trusted for receipts. */
export const logCertEntry: EntryHandler = {
  name: 'log key chain',
  pattern: /^scitt\/log-certs\/([0-9a-f]{64})\.pem$/,
  onEntry(state, entry) {
    const kid = entry.match[1]!;
    const chain = trustedChainFile(state, kid, entry.path, entry.content, 'log');
    const key = state.bundleLogKeys.find((k) => k.kid.toString('hex') === kid);
    if (chain !== undefined && key !== undefined && !state.logKeys.some((k) => k.kid.equals(key.kid))) {
      state.logKeys = [...state.logKeys, key];
    } else if (key === undefined) {
      state.fail(entry.path, 'RECORD_MISMATCH', `no key ${kid} in ${Paths.logKeys}`);
    }
  },
};

/** `certs/<ref>.pem`: a signer's chain, which records name by `cert_chain_ref`. */
export const signerCertEntry: EntryHandler = {
  name: 'signer chain',
  pattern: /^certs\/([0-9a-f]{64})\.pem$/,
  onEntry(state, entry) {
    const ref = entry.match[1]!;
    const chain = trustedChainFile(state, ref, entry.path, entry.content, 'signer');
    if (chain !== undefined) state.signerChains.set(ref, chain);
  },
};

/** `keys/<id>.pem`: informational; only keys given by the caller are trusted. */
export const bareKeyEntry: EntryHandler = {
  name: 'bare key',
  pattern: /^keys\/([0-9a-f]{64})\.pem$/,
  onEntry() {},
};
