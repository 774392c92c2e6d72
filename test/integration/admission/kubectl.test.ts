/**
 * What a kubectl user sees, with the pinned kubectl against the real API server: the AIBOM digest and
 * location in the wide view, a reason column, one `kubectl get aibom` for everything of the project,
 * short names, Attestations without a duplicated id column and with short kinds, and a description on
 * every field of both CRDs (so `kubectl explain` is useful).
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { TRANSPARENCY_FIELD_MANAGER } from '../../../src/crd/reasons.ts';
import { ATTESTATION_TYPE, RUN_TYPE } from '../../../src/controller/run/kube-api.ts';
import { applyStatus, resourcePath } from '../../../src/kube/index.ts';
import { stack } from '../../helpers/stack.ts';
import {
  applyControllerStatus,
  applyPipelineStatus,
  client,
  createRun,
  freshNamespace,
  toolStep,
} from './helpers.ts';

const exec = promisify(execFile);
const kubectl = async (...args: string[]): Promise<string> =>
  (await exec(stack().tools.kubectl, [`--kubeconfig=${stack().kube.kubeconfigs.admin}`, ...args])).stdout;

/** `kubectl get` output as rows of cells, cut at the header's column offsets (cells may be empty). */
function table(out: string): string[][] {
  const lines = out.trimEnd().split('\n');
  const starts = [...lines[0]!.matchAll(/\S+/g)].map((m) => m.index);
  return lines.map((l) => starts.map((s, i) => l.slice(s, starts[i + 1]).trim()));
}

const DIGEST = `sha256:${'ab'.repeat(32)}`;
const KEY = 'runs/ns/uid/aibom.json';
const ATT_ID = '01a20a5f-b843-7529-a5c2-a8b1a8eea55b';
const PREDICATE = 'https://vault.service.dev/attestations/step/v1';

let ns: string;
beforeAll(async () => {
  ns = await freshNamespace('adm-kubectl');
  const run = await createRun(ns, 'shown', { steps: [toolStep('a')] });
  await applyPipelineStatus(ns, 'shown', { phase: 'Succeeded', steps: [{ id: 'a', phase: 'Succeeded' }] });
  const at = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  // What the controller writes for a Run whose AIBOM is stored.
  await applyControllerStatus(ns, 'shown', {
    conditions: [
      { type: 'AIBOMReady', status: 'True', reason: 'AIBOMRecorded', message: 'ok', lastTransitionTime: at },
    ],
    artifacts: { aibom: { digest: DIGEST, key: KEY, bucket: 'aibom-vault' } },
    attestations: { count: 3 },
  });
  // What the transparency projection writes once the records are in this deployment's own log.
  await applyStatus(
    client(),
    RUN_TYPE,
    { namespace: ns, name: 'shown' },
    {
      transparency: {
        state: 'published',
        mode: 'dry_run',
        published: 3,
        queued: 0,
        retrying: 0,
        notQueued: 0,
      },
    },
    { fieldManager: TRANSPARENCY_FIELD_MANAGER },
  );
  await createRun(ns, 'waiting', { steps: [toolStep('a')] });
  await applyControllerStatus(ns, 'waiting', {
    conditions: [
      {
        type: 'AIBOMReady',
        status: 'False',
        reason: 'VaultUnavailable',
        message: 'down',
        lastTransitionTime: at,
      },
    ],
  });
  await client().request({
    method: 'POST',
    path: resourcePath(ATTESTATION_TYPE, { namespace: ns }),
    body: {
      apiVersion: 'vault.service.dev/v1',
      kind: 'Attestation',
      metadata: { name: ATT_ID },
      spec: {
        id: ATT_ID,
        kind: 'step',
        predicateType: PREDICATE,
        subjects: [`step:${run.metadata.uid}:a`],
        digest: DIGEST,
        runId: run.metadata.uid,
      },
    },
  });
});

describe('kubectl get', () => {
  it('runs: phase, AIBOM, reason; -o wide adds the AIBOM digest and location', async () => {
    const [head, ...rows] = table(await kubectl('get', 'runs', '-n', ns));
    expect(head).toEqual(['NAME', 'PHASE', 'AIBOM', 'REASON', 'ATTESTATIONS', 'TRANSPARENCY', 'MODE', 'AGE']);
    // `published` beside `dry_run`: the records are in this deployment's own log, not a remote one.
    expect(rows.find((r) => r[0] === 'shown')?.slice(1, 7)).toEqual([
      'Succeeded',
      'True',
      'AIBOMRecorded',
      '3',
      'published',
      'dry_run',
    ]);
    expect(rows.find((r) => r[0] === 'waiting')?.slice(1, 4)).toEqual(['', 'False', 'VaultUnavailable']);
    const wide = table(await kubectl('get', 'runs', '-n', ns, '-o', 'wide'));
    expect(wide[0]).toEqual(expect.arrayContaining(['DIGEST', 'LOCATION']));
    const shown = wide.find((r) => r[0] === 'shown')!;
    expect(shown).toContain(DIGEST);
    expect(shown).toContain(KEY);
  });

  it('attestations: NAME is the id (no ID column), KIND instead of the predicate URL (wide view only)', async () => {
    const [head, row] = table(await kubectl('get', 'attestations', '-n', ns));
    expect(head).toEqual(['NAME', 'KIND', 'SUBJECT', 'TRANSPARENCY', 'MODE', 'RECORDS', 'AGE']);
    expect(row?.[0]).toBe(ATT_ID);
    expect(row?.[1]).toBe('step');
    expect(row).not.toContain(PREDICATE);
    const [wideHead, wideRow] = table(await kubectl('get', 'attestations', '-n', ns, '-o', 'wide'));
    expect(wideHead).toContain('PREDICATE');
    expect(wideRow).toContain(PREDICATE);
  });

  it('the category aibom lists Runs, Attestations and PolicyPacks; short names avr and att', async () => {
    const names = (await kubectl('get', 'aibom', '-n', ns, '-o', 'name')).trim().split('\n').sort();
    // PolicyPacks are cluster-scoped: listed with any namespace's Runs and Attestations.
    const packs = (await kubectl('get', 'policypacks', '-o', 'name')).trim().split('\n').filter(Boolean);
    expect(packs.length).toBeGreaterThan(0);
    expect(names).toEqual(
      [
        `attestation.vault.service.dev/${ATT_ID}`,
        ...packs,
        'run.vault.service.dev/shown',
        'run.vault.service.dev/waiting',
      ].sort(),
    );
    expect((await kubectl('get', 'avr', '-n', ns, '-o', 'name')).trim().split('\n')).toHaveLength(2);
    expect((await kubectl('get', 'att', '-n', ns, '-o', 'name')).trim()).toBe(
      `attestation.vault.service.dev/${ATT_ID}`,
    );
  });

  it('the short names collide with nothing the API server serves', async () => {
    const out = await kubectl('api-resources', '--no-headers');
    const owners = (short: string) =>
      out
        .split('\n')
        .filter((l) => l.split(/\s+/)[1]?.split(',').includes(short))
        .map((l) => l.split(/\s+/)[0]);
    expect(owners('avr')).toEqual(['runs']);
    expect(owners('att')).toEqual(['attestations']);
  });
});

describe('kubectl explain', () => {
  it('every field of both CRDs has a description', async () => {
    const missing: string[] = [];
    for (const file of ['vault.service.dev_runs.yaml', 'vault.service.dev_attestations.yaml']) {
      const crd = parseAllDocuments(await readFile(join(repoRoot, 'crds', file), 'utf8'))[0]!.toJS() as {
        spec: { versions: { schema: { openAPIV3Schema: Record<string, unknown> } }[] };
      };
      const walk = (s: Record<string, unknown>, path: string) => {
        const props = (s.properties ?? {}) as Record<string, Record<string, unknown>>;
        for (const [k, v] of Object.entries(props)) {
          if (path === '' && ['apiVersion', 'kind', 'metadata'].includes(k)) continue;
          const items = v.items as Record<string, unknown> | undefined;
          if (typeof v.description !== 'string' || v.description.length < 10)
            missing.push(`${file} ${path}${k}`);
          walk(v, `${path}${k}.`);
          if (items) walk(items, `${path}${k}[].`);
        }
      };
      walk(crd.spec.versions[0]!.schema.openAPIV3Schema, '');
    }
    expect(missing).toEqual([]);
  });

  it('serves them: run.spec.steps.tool.command explains the [] default', async () => {
    const out = (await kubectl('explain', 'run.spec.steps.tool.command')).replace(/\s+/g, ' ');
    expect(out).toContain('Absent is recorded as []');
    expect(await kubectl('explain', 'run.spec')).not.toContain('<no description>');
  });
});
