/**
 * The web UI in a real browser (Debian's Chromium, driven by playwright-core) on the real stack: a
 * controller records Runs in two tenants' namespaces (with the local transparency log, so every
 * record has a receipt), the sidecar's app serves /v1 and /ui, alice and bob (static-token users of
 * the stack) are bound in one namespace each. What a user sees and downloads is compared with what
 * `service-ctl` writes. Screenshots go to a temp dir outside the repository, kept (path printed)
 * with KEEP_LOGS=1 and removed with the browser profiles otherwise.
 *
 * Needs /usr/bin/chromium (`bash hack/install.sh` installs it as root); skipped otherwise, saying so.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import type { Run, RunSpec } from '../../../src/crd/run.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import { kubeClient } from '../../../src/kube/index.ts';
import { policyPackSource } from '../../../src/http/sources/policy-packs.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { setupTransparency, type Transparency } from '../../../src/transparency/setup.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { tarEntries } from '../../helpers/export.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, kubeAccess, stack, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';

const CHROMIUM = '/usr/bin/chromium';
/** The flags of a headless Chromium on these machines (no sandbox as root, no network chatter). */
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) {
  console.warn(
    `SKIPPED test/integration/ui/browser.test.ts: ${CHROMIUM} is missing. Install it with \`bash hack/install.sh\` as root (apt-get install chromium), then run this file again.`,
  );
}

const exec = promisify(execFile);
const group = 'vault.service.dev';
const quiet = pino({ level: 'silent' });
const nsA = uniqueName('ui-alice');
const nsB = uniqueName('ui-bob');
const customPack = uniqueName('retention');
const XSS_TOOL = '<img src=x onerror=alert(1)>';
const XSS_MODEL = '<iframe src=javascript:alert(2)></iframe>';
const XSS_PRINCIPAL = 'user:<img/src=x/onerror=alert(3)>';
const CUSTOM_NOTICE = `Evidence of ${customPack} runs is kept for seven years (records policy RP-7).\nDo not edit the bundle.`;

let vault: Vault;
let signer: KeySigner;
let transparency: Transparency;
let app: FastifyInstance;
let url: string;
const controllers: RunningController[] = [];
let shots: string;
let dir: string;
const ids: Record<string, string> = {};
const contexts: BrowserContext[] = [];
/** Temp dirs outside the stack's (browser profiles, screenshots), removed in afterAll. */
const temps: string[] = [];

type User = 'alice' | 'bob';
const token = (u: User) => stack().kube.tokens[u];

/** service-ctl as a child process, as `user`; never throws. */
async function cli(args: string[], user: User) {
  return exec(process.execPath, [`${repoRoot}/src/bin/service-ctl.ts`, ...args], {
    env: { ...process.env, SERVICE_API_URL: url, SERVICE_TOKEN: token(user) },
    maxBuffer: 64 * 1024 * 1024,
  }).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
  );
}

async function createRun(namespace: string, name: string, spec: RunSpec): Promise<void> {
  await kubeConfig('admin')
    .makeApiClient(CustomObjectsApi)
    .createNamespacedCustomObject({
      group,
      version: 'v1',
      namespace,
      plural: 'runs',
      body: { apiVersion: `${group}/v1`, kind: 'Run', metadata: { name, namespace }, spec },
    });
}

async function settled(namespace: string, name: string): Promise<string> {
  const objects = kubeConfig('admin').makeApiClient(CustomObjectsApi);
  const run = await waitFor(`${namespace}/${name}: AIBOM ready and every record published`, async () => {
    const r = (await objects.getNamespacedCustomObject({
      group,
      version: 'v1',
      namespace,
      plural: 'runs',
      name,
    })) as Run;
    const ready = r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True');
    return ready && r.status?.transparency?.state === 'published' ? r : undefined;
  });
  return run.metadata.uid;
}

beforeAll(async () => {
  if (!hasChromium) return;
  shots = mkdtempSync(join(tmpdir(), 'aibom-vault-ui-shots-'));
  if (process.env.KEEP_LOGS) console.log(`UI screenshots: ${shots}`);
  else temps.push(shots);
  const db = await freshDatabase('uibrowser');
  await migrate(db);
  vault = await openVault(createVaultPool(db));
  signer = signerFromPem(await generateDevPki());
  transparency = setupTransparency({
    vault,
    signer,
    caCertificates: signer.caCertificates,
    logSigner: signer,
    issuer: 'urn:test:ui',
    backend: 'local',
    logger: quiet,
  });
  app = await stackApp(vault, signer.caCertificates, {
    transparency,
    signer,
    policyPacks: policyPackSource(kubeClient(kubeAccess('aibom-vault')), { ttlMs: 0 }),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  dir = join(stack().root, nsA);
  await mkdir(dir, { recursive: true });
  await Promise.all([createNamespace(nsA), createNamespace(nsB)]);
  // alice audits namespace A (reads and exports there); bob reads namespace B. Nothing else.
  await bindUser('alice', 'aibom-vault-auditor', nsA);
  await bindUser('bob', 'aibom-vault-viewer', nsB);
  await kubeConfig('admin')
    .makeApiClient(CustomObjectsApi)
    .createClusterCustomObject({
      group,
      version: 'v1',
      plural: 'policypacks',
      body: {
        apiVersion: `${group}/v1`,
        kind: 'PolicyPack',
        metadata: { name: customPack },
        spec: {
          pack: customPack,
          version: '1',
          guardrails: ['pii-redaction'],
          minimumRetention: 'P7Y',
          notice: CUSTOM_NOTICE,
        },
      },
    });
  for (const ns of [nsA, nsB]) {
    controllers.push(
      startTestController({
        vault,
        signer,
        leasePrefix: 'ui',
        watchNamespace: ns,
        transparency,
      }),
    );
  }
  const sample = (
    parse(await readFile(join(repoRoot, 'manifests/samples/run.yaml'), 'utf8')) as { spec: RunSpec }
  ).spec;
  await createRun(nsA, 'sample-run', sample);
  await createRun(nsA, 'retention-run', {
    policyPack: { name: customPack, version: '1', guardrails: ['pii-redaction'] },
    steps: [{ id: 'answer', model: { name: 'm', provider: 'p', version: '1', temperature: 0 } }],
  });
  await createRun(nsA, 'hostile-run', {
    steps: [
      {
        id: 'fetch',
        tool: { name: XSS_TOOL, command: [XSS_TOOL, '--flag'] },
        capabilities: [{ scope: 'kb:read', grantedBy: XSS_PRINCIPAL, approvedBy: 'user:<b>boss</b>' }],
      },
      {
        id: 'think',
        dependsOn: ['fetch'],
        model: { name: XSS_MODEL, provider: '<svg onload=alert(4)>', version: '1' },
      },
    ],
  });
  await createRun(nsB, 'bob-private-run', {
    steps: [{ id: 'only', tool: { name: 'bob-secret-tool' } }],
  });
  await Promise.all([
    driveRun(kubeConfig('admin'), nsA, 'sample-run'),
    driveRun(kubeConfig('admin'), nsA, 'retention-run'),
    driveRun(kubeConfig('admin'), nsA, 'hostile-run'),
    driveRun(kubeConfig('admin'), nsB, 'bob-private-run'),
  ]);
  for (const [ns, name] of [
    [nsA, 'sample-run'],
    [nsA, 'retention-run'],
    [nsA, 'hostile-run'],
    [nsB, 'bob-private-run'],
  ] as const) {
    ids[name] = await settled(ns, name);
  }
}, 300_000);

afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => undefined);
  for (const t of temps) await rm(t, { recursive: true, force: true });
  for (const c of controllers) await c.stop();
  await kubeConfig('admin')
    .makeApiClient(CustomObjectsApi)
    .deleteClusterCustomObject({ group, version: 'v1', plural: 'policypacks', name: customPack })
    .catch(() => undefined);
  await app?.close();
  await vault?.close();
}, 120_000);

/** A fresh browser profile (its own user-data dir), with downloads on. */
async function browser(): Promise<BrowserContext> {
  const profile = mkdtempSync(join(tmpdir(), 'aibom-vault-chromium-'));
  temps.push(profile);
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    acceptDownloads: true,
    viewport: { width: 1280, height: 900 },
  });
  contexts.push(ctx);
  return ctx;
}

/** Console errors (CSP violations among them) and any JavaScript dialog the page opens. */
function watch(page: Page): { errors: string[]; dialogs: string[] } {
  const seen = { errors: [] as string[], dialogs: [] as string[] };
  page.on('console', (m) => {
    if (m.type() === 'error') seen.errors.push(m.text());
  });
  page.on('pageerror', (e) => seen.errors.push(e.message));
  page.on('dialog', (d) => {
    seen.dialogs.push(`${d.type()}: ${d.message()}`);
    void d.dismiss();
  });
  return seen;
}

async function signIn(page: Page, user: User): Promise<void> {
  await page.goto(`${url}/`);
  await page.waitForURL(/\/ui\/sign-in/);
  await page.fill('#token', token(user));
  await page.click('button[type=submit]');
  await page.waitForURL(/\/ui\/runs/);
}

const axeSource = readFile(join(repoRoot, 'node_modules/axe-core/axe.min.js'), 'utf8');

/**
 * axe-core's serious and critical violations on the page as it is now (WCAG 2.x A and AA rules). It
 * is evaluated through the DevTools protocol, which the page's CSP does not govern (a <script> tag
 * would be refused, as it should be).
 */
async function axeViolations(page: Page): Promise<string[]> {
  await page.evaluate(await axeSource);
  // Runs in the page (no DOM types in this project's TypeScript: the page's globals are cast).
  const results = await page.evaluate(async () => {
    const g = globalThis as unknown as {
      document: unknown;
      axe: {
        run: (
          context: unknown,
          options: object,
        ) => Promise<{ violations: { id: string; impact: string | null; nodes: { target: unknown }[] }[] }>;
      };
    };
    return g.axe.run(g.document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
    });
  });
  return results.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${JSON.stringify(v.nodes.map((n) => n.target))}`);
}

describe.skipIf(!hasChromium)('the web UI in Chromium', () => {
  it('signs alice in, lists her runs and nothing of bob’s, and measures the page weight of the runs list', async () => {
    const ctx = await browser();
    const page = await ctx.newPage();
    const seen = watch(page);
    await page.goto(`${url}/`);
    await page.waitForURL(/\/ui\/sign-in/);
    await page.screenshot({ path: join(shots, '01-sign-in.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);
    await page.fill('#token', token('alice'));
    await page.click('button[type=submit]');
    await page.waitForURL(/\/ui\/runs/);
    const names = await page.locator('table tbody tr td:first-child').allTextContents();
    expect(names.map((n) => n.trim()).sort()).toEqual(['hostile-run', 'retention-run', 'sample-run']);
    const text = await page.locator('main').innerText();
    expect(text).not.toContain('bob-private-run');
    expect(text).not.toContain(nsB);
    expect(text).toContain('published');
    await page.screenshot({ path: join(shots, '02-runs.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);

    // Asking for bob's namespace shows nothing of it; his run's page is a 404 without its name.
    await page.goto(`${url}/ui/runs?namespace=${nsB}`);
    expect(await page.locator('table').count()).toBe(0);
    expect(await page.locator('main').innerText()).toContain('1 namespace(s)');
    const other = await page.goto(`${url}/ui/runs/${ids['bob-private-run']}`);
    expect(other?.status()).toBe(404);
    expect(await page.content()).not.toContain('bob-private-run');
    expect(await page.content()).not.toContain('bob-secret-tool');
    // That 404 is the one console error expected (Chromium logs every failed load).
    expect(seen.errors).toEqual([expect.stringContaining('404')]);
    seen.errors.length = 0;

    // Page weight: bytes on the wire for the runs list, with an empty cache and then a warm one.
    const cdp = await ctx.newCDPSession(page);
    await cdp.send('Network.enable');
    let bytes = 0;
    let requests = 0;
    const urls: string[] = [];
    cdp.on('Network.requestWillBeSent', (e: { request: { url: string } }) => urls.push(e.request.url));
    // Requests that crossed the network (an asset served from the cache has 0 bytes on the wire).
    cdp.on('Network.loadingFinished', (e: { encodedDataLength: number }) => {
      bytes += e.encodedDataLength;
      if (e.encodedDataLength > 0) requests++;
    });
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
    await page.goto(`${url}/ui/runs`, { waitUntil: 'networkidle' });
    const cold = { bytes, requests };
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: false });
    await page.goto(`${url}/ui/runs`, { waitUntil: 'networkidle' });
    bytes = 0;
    requests = 0;
    await page.goto(`${url}/ui/runs`, { waitUntil: 'networkidle' });
    console.log(
      `PAGE WEIGHT /ui/runs (3 runs): cold cache ${cold.bytes} bytes in ${cold.requests} requests; warm cache ${bytes} bytes in ${requests} request(s)`,
    );
    // The page and its own assets only: nothing from another origin.
    expect(urls.length).toBeGreaterThan(0);
    expect(urls.filter((u) => !u.startsWith(`${url}/`))).toEqual([]);
    expect(cold.requests).toBeLessThanOrEqual(4);
    expect(seen.dialogs).toEqual([]);
    expect(seen.errors).toEqual([]);

    // Control: the accessibility check does report a violation when there is one (the token
    // field of the sign-in form without its label).
    const control = await ctx.newPage();
    await control.goto(`${url}/ui/sign-in`);
    await control.evaluate(() => {
      const g = globalThis as unknown as {
        document: { querySelector(s: string): { remove(): void } | null };
      };
      g.document.querySelector('label[for=token]')?.remove();
    });
    expect((await axeViolations(control)).filter((v) => v.startsWith('label (critical)'))).toHaveLength(1);
  }, 180_000);

  it('renders a Run whose tool name is <img src=x onerror=alert(1)> as text, and no dialog fires', async () => {
    const ctx = await browser();
    const page = await ctx.newPage();
    const seen = watch(page);
    await signIn(page, 'alice');
    await page.click('text=hostile-run');
    await page.waitForURL(/\/ui\/runs\/[0-9a-f-]{36}$/);
    await page.waitForLoadState('networkidle');
    // The text is on the page, as text; no element came out of it.
    await expect(page.locator('main table').getByText(XSS_TOOL).first().isVisible()).resolves.toBe(true);
    expect(await page.locator('main').innerText()).toContain(XSS_TOOL);
    expect(await page.locator('main').innerText()).toContain(XSS_MODEL);
    expect(await page.locator('main').innerText()).toContain(XSS_PRINCIPAL);
    expect(await page.locator('img, iframe, main svg[onload], b:text("boss")').count()).toBe(0);
    await page.screenshot({ path: join(shots, '03-hostile-run.png'), fullPage: true });
    expect(seen.dialogs).toEqual([]);
    expect(seen.errors).toEqual([]);
    // Control: a dialog the page does open is seen.
    await page.evaluate(() => (globalThis as unknown as { alert(m: string): void }).alert('control'));
    expect(seen.dialogs).toEqual(['alert: control']);
  }, 180_000);

  it('downloads, from the AIBOM drawer, exactly the bytes of service-ctl audit export, which verify offline', async () => {
    const ctx = await browser();
    const page = await ctx.newPage();
    const seen = watch(page);
    await signIn(page, 'alice');
    await page.goto(`${url}/ui/runs/${ids['sample-run']}`);
    await page.screenshot({ path: join(shots, '04-run.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);
    // The step DAG and each step's model or tool, capability chains as attested.
    expect(await page.locator('.dag svg g').count()).toBe(3);
    const steps = await page.locator('main').innerText();
    expect(steps).toContain('vector-search');
    expect(steps).toContain('claude-sonnet');
    expect(steps).toContain('granted by org:acme-it, approved by user:ciso');
    // Every record of the sample Run (3 steps, 1 capability: 3·S + C + 6 = 16, docs/runs.md) verified.
    expect(await page.locator('text=signature valid').count()).toBe(3 * 3 + 1 + 6);
    await page.click('#artifact-aibom a');
    await page.waitForSelector('.drawer');
    await page.screenshot({ path: join(shots, '05-drawer.png') });
    expect(await axeViolations(page)).toEqual([]);
    const drawer = await page.locator('.drawer').innerText();
    expect(drawer).toContain('C2PA 1.4, claim version 1');
    // Export rule 4 on this path too (issue 22 item 12): the run's pack, its minimum retention and
    // its notice are shown, and the download waits for their acknowledgement.
    expect(drawer).toContain('1 year');
    expect(await page.locator('#evidence-retention-notice').innerText()).toContain(
      'Evidence exported under the baseline policy pack must be retained',
    );
    await page.click('#export-with-receipts');
    expect(await page.locator('#evidence-ack:invalid').count()).toBe(1);
    expect(await page.locator('.drawer').count()).toBe(1);
    await page.check('#evidence-ack');
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.click('#export-with-receipts'),
    ]);
    const fromUi = join(dir, 'evidence-ui.tar');
    await download.saveAs(fromUi);
    const fromCli = join(dir, 'evidence-cli.tar');
    const res = await cli(['audit', 'export', '--run', ids['sample-run']!, '--output', fromCli], 'alice');
    expect(res, res.err).toMatchObject({ code: 0 });
    const [ui, cliBytes] = await Promise.all([readFile(fromUi), readFile(fromCli)]);
    expect(ui.length).toBeGreaterThan(10_000);
    expect(ui.equals(cliBytes)).toBe(true);
    const paths = (await tarEntries(ui)).map((e) => e.path);
    expect(paths).toContain(`runs/${ids['sample-run']}/aibom.c2pa`);
    expect(paths.filter((p) => p.endsWith('/receipt.cose')).length).toBeGreaterThan(0);
    const keys = await cli(['keys', 'fetch', '--out', join(dir, 'trust')], 'alice');
    expect(keys, keys.err).toMatchObject({ code: 0 });
    const verified = await cli(['verify', fromUi, '--trust-anchor', join(dir, 'trust', 'ca.pem')], 'alice');
    expect(verified.out).toContain('bundle verified');
    expect(verified.code).toBe(0);
    expect(seen.dialogs).toEqual([]);
    expect(seen.errors).toEqual([]);
  }, 180_000);

  it("shows the retention notice and minimum retention of the run's own pack in the export dialog, then downloads the selection", async () => {
    const ctx = await browser();
    const page = await ctx.newPage();
    const seen = watch(page);
    await signIn(page, 'alice');
    for (const [run, notice, retention] of [
      ['retention-run', CUSTOM_NOTICE, '7 years'],
      ['sample-run', 'Evidence exported under the baseline policy pack must be retained', '1 year'],
    ] as const) {
      await page.goto(`${url}/ui/runs/${ids[run]}`);
      await page.check('#select-all');
      await page.click('#export-open');
      const dialog = page.locator('#export-dialog');
      await expect(dialog.isVisible()).resolves.toBe(true);
      const shown = await dialog.innerText();
      expect(shown).toContain(notice.split('\n')[0]);
      expect(shown).toContain(retention);
      expect(await page.locator('#retention-notice').innerText()).toContain(notice.split('\n')[0]);
      if (run === 'retention-run') {
        expect(shown).not.toContain('baseline policy pack');
        expect(await page.locator('#export-count').innerText()).toBe(
          String(await page.locator('input[name="ids"][type="checkbox"]').count()),
        );
        await page.screenshot({ path: join(shots, '06-export-dialog.png') });
        expect(await axeViolations(page)).toEqual([]);
        await page.check('input[name="ack"]');
        const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-download')]);
        const file = join(dir, 'selection-ui.tar');
        await download.saveAs(file);
        // The same export as POST /v1/attestations/export of those ids by the same user.
        const selected = await page
          .locator('#export-ids input[name="ids"]')
          .evaluateAll((els) => els.map((e) => (e as unknown as { value: string }).value));
        const api = await fetch(`${url}/v1/attestations/export`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token('alice')}`, 'content-type': 'application/json' },
          body: JSON.stringify({ ids: [...new Set(selected)], namespaces: [nsA] }),
        });
        expect(api.status).toBe(200);
        expect((await readFile(file)).equals(Buffer.from(await api.arrayBuffer()))).toBe(true);
      }
    }
    expect(seen.dialogs).toEqual([]);
    expect(seen.errors).toEqual([]);
  }, 180_000);

  it('refuses state-changing requests from the page without the CSRF token, and bob sees only his run', async () => {
    const ctx = await browser();
    const page = await ctx.newPage();
    await signIn(page, 'alice');
    await page.goto(`${url}/ui/runs/${ids['retention-run']}`);
    const record = await page.locator('input[name="ids"][type="checkbox"]').first().getAttribute('value');
    // Same origin, the session cookie attached by the browser, but no CSRF token.
    const statuses = await page.evaluate(
      async ({ run, id }) => {
        const form = new URLSearchParams({ run, ids: id, ack: 'yes' });
        const ui = await fetch('/ui/export', { method: 'POST', body: form });
        const out = await fetch('/ui/sign-out', { method: 'POST', body: new URLSearchParams() });
        const api = await fetch('/v1/attestations/export', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ ids: [id] }),
        });
        return [ui.status, out.status, api.status];
      },
      { run: ids['retention-run']!, id: record! },
    );
    expect(statuses).toEqual([403, 403, 403]);
    // Still signed in (the sign-out was refused); then the page's own sign-out works.
    await page.goto(`${url}/ui/runs`);
    expect(page.url()).toMatch(/\/ui\/runs$/);
    await page.click('text=Sign out');
    await page.waitForURL(/\/ui\/sign-in/);
    await page.goto(`${url}/ui/runs`);
    await page.waitForURL(/\/ui\/sign-in/);

    const bob = await (await browser()).newPage();
    await signIn(bob, 'bob');
    const names = await bob.locator('table tbody tr td:first-child').allTextContents();
    expect(names.map((n) => n.trim())).toEqual(['bob-private-run']);
    const text = await bob.locator('main').innerText();
    for (const hidden of ['sample-run', 'retention-run', 'hostile-run', nsA])
      expect(text).not.toContain(hidden);
    await bob.screenshot({ path: join(shots, '07-bob-runs.png'), fullPage: true });
  }, 180_000);
});
