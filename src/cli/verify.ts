import { X509Certificate, createPublicKey, type KeyObject } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { verifyRecord, type Trust } from '../attest/index.ts';
import { loadConfig } from '../config/index.ts';
import { verifyAibomDir } from './aibom.ts';
import { loadLogKeys, receiptProblems } from './receipts.ts';
import type { ApiClient } from './client.ts';
import { CliError, type Command } from './command.ts';
import { apiOptions, clientFrom } from './options.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function readPem(path: string, what: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

/** Every PEM block of a file: public keys, or certificates (their public key is used). */
function keysFromPem(pem: string, path: string): KeyObject[] {
  const blocks = pem.match(/-----BEGIN [A-Z ]+-----[\s\S]+?-----END [A-Z ]+-----/g) ?? [];
  if (blocks.length === 0) throw new CliError(`${path}: no PEM public key or certificate`);
  return blocks.map((b) => {
    try {
      return b.includes('CERTIFICATE') ? new X509Certificate(b).publicKey : createPublicKey(b);
    } catch (err) {
      throw new CliError(`${path}: ${(err as Error).message}`);
    }
  });
}

function certsFromPem(pem: string, path: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new CliError(`${path}: no PEM certificate`);
  return blocks.map((b) => new X509Certificate(b));
}

export async function trustFrom(values: {
  key?: string[] | undefined;
  'cert-chain'?: string | undefined;
  'trust-anchor'?: string | undefined;
}): Promise<Trust> {
  const chain = values['cert-chain'];
  const anchor = values['trust-anchor'];
  if (chain !== undefined || anchor !== undefined) {
    if (chain === undefined || anchor === undefined)
      throw new CliError('--cert-chain and --trust-anchor go together', 2);
    return {
      certificateChain: certsFromPem(await readPem(chain, 'certificate chain'), chain),
      trustAnchors: certsFromPem(await readPem(anchor, 'trust anchor'), anchor),
    };
  }
  if (!values.key?.length)
    throw new CliError('give --key <public key or certificate PEM>, or --cert-chain with --trust-anchor', 2);
  const keys: KeyObject[] = [];
  for (const k of values.key) keys.push(...keysFromPem(await readPem(k, 'key'), k));
  return { publicKeys: keys };
}

/** Records in a file: one JSON envelope, a JSON array of them, or NDJSON (as the query streams). */
export function recordsFromText(text: string, path: string): unknown[] {
  const trimmed = text.trim();
  try {
    const parsed: unknown = JSON.parse(trimmed);
    return Array.isArray(parsed) ? parsed : [parsed];
  } catch {
    try {
      return trimmed
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as unknown);
    } catch {
      throw new CliError(`${path}: not JSON or NDJSON`);
    }
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

export const verifyCommand: Command = {
  path: ['verify'],
  summary:
    'verify attestation envelopes offline (file, NDJSON or attestation id): digest, signature, predicate',
  usage:
    '<envelope.json|records.ndjson|attestation-id>... (--key PEM... | --cert-chain PEM --trust-anchor PEM) [--log-keys FILE] [--json] | --aibom DIR [--trust-anchor PEM]',
  async run(args) {
    const { values, positionals } = parseArgs({
      args: [...args],
      allowPositionals: true,
      options: {
        key: { type: 'string', multiple: true },
        'cert-chain': { type: 'string' },
        'trust-anchor': { type: 'string' },
        json: { type: 'boolean', default: false },
        aibom: { type: 'string' },
        'log-keys': { type: 'string' },
        ...apiOptions,
      },
    });
    if (values.aibom !== undefined) {
      const anchor = values['trust-anchor'] ?? loadConfig('cli').SERVICE_TRUST_ANCHOR;
      if (anchor === undefined)
        throw new CliError('--aibom needs --trust-anchor <ca.crt> (or SERVICE_TRUST_ANCHOR)', 2);
      const { lines, problems } = await verifyAibomDir(values.aibom, await readPem(anchor, 'trust anchor'));
      for (const l of lines) process.stdout.write(`OK    ${l}\n`);
      for (const p of problems) process.stdout.write(`FAIL  ${p}\n`);
      process.stdout.write(
        problems.length === 0 ? 'AIBOM verified\n' : `AIBOM NOT verified (${problems.length} problem(s))\n`,
      );
      return problems.length === 0 ? 0 : 1;
    }
    if (positionals.length === 0) {
      throw new CliError(
        'usage: service-ctl verify <envelope.json|records.ndjson|attestation-id>... --key PEM',
        2,
      );
    }
    const trust = await trustFrom(values);
    const logKeys = values['log-keys'] !== undefined ? await loadLogKeys(values['log-keys']) : undefined;
    let client: ApiClient | undefined;
    const records: { source: string; record: unknown }[] = [];
    for (const p of positionals) {
      if (await isFile(p)) {
        for (const record of recordsFromText(await readFile(p, 'utf8'), p))
          records.push({ source: p, record });
      } else if (UUID.test(p)) {
        client ??= clientFrom(values);
        records.push({ source: p, record: await client.getAttestation(p) });
      } else {
        throw new CliError(`${p}: neither a file nor an attestation id`, 2);
      }
    }
    let failed = 0;
    for (const { source, record } of records) {
      const result = verifyRecord(record, trust);
      // With --log-keys, the SCITT receipt is part of the verdict.
      if (logKeys) {
        for (const p of receiptProblems(record as Record<string, unknown>, logKeys)) {
          const [code, ...rest] = p.split(': ');
          result.problems.push({ code: code as never, message: rest.join(': ') });
          result.ok = false;
        }
      }
      const id = (record as { id?: unknown }).id;
      const label = typeof id === 'string' ? id : source;
      if (!result.ok) failed++;
      if (values.json) {
        process.stdout.write(
          `${JSON.stringify({ id: label, ok: result.ok, predicate_type: result.predicateType, key_id: result.keyId, problems: result.problems })}\n`,
        );
      } else if (result.ok) {
        process.stdout.write(
          `OK    ${label}  ${result.predicateType ?? ''}  key ${result.keyId ?? ''}${logKeys ? '  receipt ok' : ''}\n`,
        );
      } else {
        for (const p of result.problems) process.stdout.write(`FAIL  ${label}  ${p.code}: ${p.message}\n`);
      }
    }
    if (!values.json) process.stdout.write(`${records.length - failed} verified, ${failed} failed\n`);
    return failed === 0 ? 0 : 1;
  },
};
