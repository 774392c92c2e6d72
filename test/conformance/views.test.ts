/**
 * The AIBOM's standard views checked by implementations that share none of our code:
 * - CycloneDX 1.7: the CycloneDX project's Python library (PyPI cyclonedx-python-lib,
 *   `JsonStrictValidator(SchemaVersion.V1_7)`) and its JavaScript library
 *   (`@cyclonedx/cyclonedx-library`, `JsonStrictValidator(Spec.Version.v1dot7)`);
 * - SPDX 3.0.1: the SPDX project's tools-java (`java -jar tools-java.jar Verify FILE JSONLD`), which
 *   does not check profile conformance: the AI and Dataset profiles are checked by
 *   spdxProfileProblems (src/aibom/views/check.ts), tested to fail in test/unit/aibom/views.test.ts.
 * On the views of the sample Run (succeeded and failed) and of fuzzed Runs (the admission property
 * test's generator, admissible specs). Each check is shown to fail on a broken view. The validators
 * are installed by hack/ensure-verifiers.sh (hack/install.sh runs it) into the cache.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Spec, Validation } from '@cyclonedx/cyclonedx-library';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { repoRoot } from '../../hack/stack/stack.ts';
import {
  buildViews,
  declarationProblems,
  spdxProfileProblems,
  type BuiltView,
} from '../../src/aibom/views/index.ts';
import type { RunSpec } from '../../src/crd/run.ts';
import { runSpecs } from '../integration/admission/arbitraries.ts';
import { madeRun, terminalRun, type MadeRun } from '../helpers/views.ts';
import { p256Signer } from '../unit/attest/keys.ts';

const run = promisify(execFile);
const strict17 = new Validation.JsonStrictValidator(Spec.Version.v1dot7);
const signer = p256Signer();
let dir: string;
let python: string;
let spdxJar: string;
let spdxAll: string;

/** A view written to a file, with the run it came from. */
interface Written {
  readonly label: string;
  readonly made: MadeRun;
  readonly cdx: string;
  readonly spdx: string;
  readonly views: BuiltView[];
}
const written: Written[] = [];

async function write(label: string, made: MadeRun): Promise<Written> {
  const views = buildViews(made.input);
  const cdx = join(dir, `${label}.cdx.json`);
  const spdx = join(dir, `${label}.spdx.json`);
  await writeFile(cdx, views[0]!.bytes);
  await writeFile(spdx, views[1]!.bytes);
  const w = { label, made, cdx, spdx, views };
  written.push(w);
  return w;
}

/** Runs a validator; its exit status and stdout, whatever the status. */
async function outcome(file: string, args: string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout } = await run(file, args, { maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, out: stdout };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; message?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, out: e.stdout ?? e.message ?? '' };
  }
}

// Four fuzzed runs per execution (a fresh seed each time, printed): SHACL validation in tools-java
// costs tens of seconds per document on a loaded 2-core machine, and the suite must fit CI's limit.
const FUZZED = 4;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'views-conformance-'));
  const { stdout } = await run('bash', [join(repoRoot, 'hack/ensure-verifiers.sh')]);
  const paths = Object.fromEntries(
    stdout
      .trim()
      .split('\n')
      .map((l) => l.split('=') as [string, string]),
  );
  python = paths['cyclonedx-python']!;
  spdxJar = paths['spdx-tools-java']!;
  spdxAll = paths['spdx-verify-all']!;
  const sample = (
    parse(await readFile(join(repoRoot, 'manifests/samples/run.yaml'), 'utf8')) as { spec: RunSpec }
  ).spec;
  await write(
    'sample-succeeded',
    madeRun(terminalRun(sample, { name: 'sample-run', namespace: 'demo' }), signer),
  );
  await write(
    'sample-failed',
    madeRun(
      terminalRun(sample, {
        name: 'sample-run',
        namespace: 'demo',
        phase: 'Failed',
        unfinished: ['post-comment'],
      }),
      signer,
    ),
  );
  const seed = Date.now() % 2 ** 31;
  console.log(`fuzzed runs: fast-check seed ${seed}`);
  const specs = fc.sample(
    fc.tuple(
      runSpecs.filter((g) => g.ok && g.v.steps.length > 0),
      fc.constantFrom('Succeeded' as const, 'Failed' as const),
    ),
    { numRuns: FUZZED, seed },
  );
  for (const [i, [spec, phase]] of specs.entries()) {
    await write(
      `fuzzed-${i}`,
      madeRun(
        terminalRun(spec.v, { phase, uid: `0190f3a0-7c1e-7a4b-9d2e-${String(i).padStart(12, '0')}` }),
        signer,
      ),
    );
  }
}, 600_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('CycloneDX 1.7 view: both CycloneDX libraries accept every view', () => {
  it('cyclonedx-python-lib (PyPI) strict 1.7: sample succeeded, sample failed, fuzzed runs', async () => {
    const files = written.map((w) => w.cdx);
    const { code, out } = await outcome(python, [
      join(repoRoot, 'test/conformance/views/cdx_validate.py'),
      ...files,
    ]);
    expect(out.trim().split('\n')).toEqual(files.map((f) => `valid ${f}`));
    expect(code).toBe(0);
    console.log(`cyclonedx-python-lib: ${files.length} CycloneDX 1.7 views valid (${FUZZED} fuzzed)`);
  }, 900_000);

  it('@cyclonedx/cyclonedx-library (npm) strict 1.7 accepts the same bytes', async () => {
    for (const w of written)
      expect(await strict17.validate(w.views[0]!.bytes.toString('utf8')), w.label).toBeNull();
  });

  it('every declarations reference resolves and every evidence digest is a record of the run', () => {
    for (const w of written) {
      const bundle = new Map(w.made.records.map((r) => [r.id, r.digest]));
      expect(declarationProblems(w.views[0]!.document, bundle), w.label).toEqual([]);
    }
  });

  it('the Python validator rejects a broken view (the check can fail)', async () => {
    const doc = JSON.parse(written[0]!.views[0]!.bytes.toString('utf8')) as {
      declarations: { attestations: { map: { conformance: { score?: number } }[] }[] };
    };
    doc.declarations.attestations[0]!.map[0]!.conformance.score = 2;
    const file = join(dir, 'broken.cdx.json');
    await writeFile(file, JSON.stringify(doc));
    const { code, out } = await outcome(python, [
      join(repoRoot, 'test/conformance/views/cdx_validate.py'),
      file,
    ]);
    expect(code).toBe(1);
    expect(out).toMatch(/^invalid .*broken\.cdx\.json: 2 is greater than the maximum of 1/);
  }, 120_000);
});

describe('the sample views shown in docs/aibom.md (docs/examples/aibom-views/)', () => {
  const examples = join(repoRoot, 'docs/examples/aibom-views');
  const files = (suffix: string) =>
    ['succeeded', 'failed'].map((l) => join(examples, `sample-run-${l}.${suffix}.json`));

  it('pass cyclonedx-python-lib and tools-java too', async () => {
    const cdx = files('cdx-1.7');
    const py = await outcome(python, [join(repoRoot, 'test/conformance/views/cdx_validate.py'), ...cdx]);
    expect(py.out.trim().split('\n')).toEqual(cdx.map((f) => `valid ${f}`));
    const spdx = files('spdx-3.0.1');
    const java = await outcome('java', ['-cp', `${spdxAll}:${spdxJar}`, 'SpdxVerifyAll', ...spdx]);
    expect(java.out.trim().split('\n')).toEqual(spdx.map((f) => `valid ${f}`));
    for (const f of spdx) expect(spdxProfileProblems(JSON.parse(await readFile(f, 'utf8')))).toEqual([]);
  }, 600_000);
});

describe('SPDX 3.0.1 view: tools-java accepts every view and rejects a broken one', () => {
  it('`java -jar tools-java.jar Verify FILE JSONLD` on the sample run, succeeded and failed', async () => {
    for (const w of written.filter((x) => x.label.startsWith('sample-'))) {
      const { code, out } = await outcome('java', ['-jar', spdxJar, 'Verify', w.spdx, 'JSONLD']);
      expect(out.trim(), w.label).toBe('This SPDX Document is valid.');
      expect(code).toBe(0);
    }
  }, 900_000);

  it('rejects a broken view: exit 1 and the problem named', async () => {
    const doc = JSON.parse(written[0]!.views[1]!.bytes.toString('utf8')) as {
      '@graph': Record<string, unknown>[];
    };
    const ai = doc['@graph'].find((e) => e.type === 'ai_AIPackage')!;
    ai.suppliedBy = 'urn:nowhere:agent';
    const file = join(dir, 'broken.spdx.json');
    await writeFile(file, JSON.stringify(doc));
    const { code, out } = await outcome('java', ['-jar', spdxJar, 'Verify', file, 'JSONLD']);
    expect(code).toBe(1);
    expect(out).toMatch(/suppliedBy/);

    const badType = JSON.parse(written[0]!.views[1]!.bytes.toString('utf8')) as {
      '@graph': Record<string, unknown>[];
    };
    badType['@graph'].find((e) => e.type === 'dataset_DatasetPackage')!.dataset_datasetType = ['tabular'];
    const file2 = join(dir, 'broken2.spdx.json');
    await writeFile(file2, JSON.stringify(badType));
    expect((await outcome('java', ['-jar', spdxJar, 'Verify', file2, 'JSONLD'])).code).toBe(1);
  }, 900_000);

  it('the same Verify call accepts the fuzzed runs, and our profile check passes every view', async () => {
    const files = written.map((w) => w.spdx);
    const started = process.hrtime.bigint();
    const { code, out } = await outcome('java', ['-cp', `${spdxAll}:${spdxJar}`, 'SpdxVerifyAll', ...files]);
    expect(out.trim().split('\n')).toEqual(files.map((f) => `valid ${f}`));
    expect(code).toBe(0);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    console.log(
      `tools-java: ${files.length} SPDX 3.0.1 views valid (${FUZZED} fuzzed) in ${seconds.toFixed(1)} s`,
    );
    for (const w of written) expect(spdxProfileProblems(w.views[1]!.document), w.label).toEqual([]);
  }, 1_200_000);
});
