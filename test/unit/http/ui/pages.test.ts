import { describe, expect, it } from 'vitest';
import { escapeHtml } from '../../../../src/http/ui/html.ts';
import { runPage, exportPage, type RunView } from '../../../../src/http/ui/pages/run.ts';
import { runsPage } from '../../../../src/http/ui/pages/runs.ts';
import { runPolicyPack } from '../../../../src/policy/index.ts';

/**
 * Every free-text field a Run (or a PolicyPack) can carry, each holding markup. The pages must show
 * each as text: its escaped form is in the page, the markup itself nowhere.
 */
const hostile = {
  tool: '<img src=x onerror=alert(1)>',
  model: '<iframe src=javascript:alert(2)>',
  provider: '<svg onload=alert(3)>',
  version: '"><b>v</b>',
  command: `"><img src=x onerror=alert(4)>`,
  pack: '"><svg/onload=alert(5)>',
  packVersion: '<i>1</i>',
  guardrail: '<marquee>g</marquee>',
  scope: 'kb:<script>alert(6)</script>',
  grantedBy: 'user:<img/src=x/onerror=alert(7)>',
  approvedBy: "team:'><script>alert(8)</script>",
  runName: 'run-<x>',
  namespace: 'ns<y>',
  notice: '<script>alert(9)</script>\nkeep it',
  description: '<style>body{display:none}</style>',
  stepError: '<h1>error</h1>',
};

const run: RunView = {
  id: '0197a1b2-c3d4-4e5f-8a9b-0c1d2e3f4a5b',
  namespace: hostile.namespace,
  name: hostile.runName,
  phase: 'Succeeded',
  spec: {
    policyPack: { name: hostile.pack, version: hostile.packVersion, guardrails: [hostile.guardrail] },
    steps: [
      {
        id: 'fetch',
        tool: { name: hostile.tool, command: [hostile.command, 'plain'] },
        capabilities: [
          {
            scope: hostile.scope,
            grantedBy: hostile.grantedBy,
            approvedBy: hostile.approvedBy,
            delegatedFrom: [{ scope: 'kb', grantedBy: hostile.grantedBy }],
          },
        ],
      },
      {
        id: 'think',
        dependsOn: ['fetch'],
        model: { name: hostile.model, provider: hostile.provider, version: hostile.version },
      },
    ],
  },
  steps: [
    { id: 'fetch', phase: 'Succeeded' },
    { id: 'think', phase: 'Failed', error: hostile.stepError },
  ],
  artifacts: {
    aibom: {
      digest: 'sha256:00',
      signature: { algorithm: hostile.tool, key_id: hostile.model },
      c2pa_manifest: { label: hostile.scope },
    },
  },
  policy_pack: runPolicyPack(
    {
      policyPack: { name: hostile.pack, version: hostile.packVersion, guardrails: [hostile.guardrail] },
      steps: [],
    },
    [
      {
        metadata: { name: 'p' },
        spec: {
          pack: hostile.pack,
          description: hostile.description,
          guardrails: [hostile.guardrail, '<u>missing</u>'],
          minimumRetention: 'P7Y',
          notice: hostile.notice,
        },
      },
    ],
  ),
  created_at: '2026-11-24T10:00:00.000Z',
};

const viewer = { username: '<b>mallory</b>', via: 'session' as const, csrf: 'tok"en' };

/** Real tags of a page (escaped text has `&lt;`, never `<`). */
const tags = (page: string): string[] => page.match(/<[a-zA-Z][^>]*>/g) ?? [];

function expectText(page: string, values: readonly string[]): void {
  for (const v of values) {
    const firstLine = v.split('\n')[0]!;
    expect(page, v).toContain(escapeHtml(firstLine));
    // The raw value (markup) appears nowhere; values without `<` cannot open a tag anyway.
    if (firstLine.includes('<')) expect(page.includes(firstLine), v).toBe(false);
  }
}

describe('pages show user-controlled fields as text', () => {
  it('the run page (steps, DAG, capability chains, pack, drawer, export dialog)', () => {
    const page = runPage({ viewer, run, attestations: [], drawer: 'aibom' });
    expectText(page, [
      hostile.tool,
      hostile.model,
      hostile.provider,
      hostile.version,
      hostile.pack,
      hostile.packVersion,
      hostile.guardrail,
      hostile.scope,
      hostile.grantedBy,
      hostile.approvedBy,
      hostile.runName,
      hostile.namespace,
      hostile.notice,
      hostile.description,
      hostile.stepError,
      viewer.username,
    ]);
    // The only scripts are the sidecar's own module; no inline script, no style attribute.
    expect(tags(page).filter((t) => t.startsWith('<h1'))).toHaveLength(1);
    expect(page.match(/<script\b[^>]*>/g)).toEqual([
      expect.stringMatching(/^<script type="module" src="\/ui\/assets\/ui\.[0-9a-f]{12}\.js">$/),
    ]);
    expect(tags(page).filter((t) => /\s(style|on[a-z]+)=/i.test(t))).toEqual([]);
    expect(tags(page).filter((t) => /^<(img|iframe|svg onload|marquee|style|b>|i>|u>)/i.test(t))).toEqual([]);
  });

  it('opens a drawer for an artifact the run has, never for an inherited key of the object', () => {
    expect(runPage({ viewer, run, attestations: [], drawer: 'aibom' })).toContain('class="drawer"');
    for (const drawer of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'nope']) {
      expect(runPage({ viewer, run, attestations: [], drawer }), drawer).not.toContain('class="drawer"');
    }
  });

  it("shows the pack's retention notice in the drawer too, and the download asks for its acknowledgement", () => {
    // Export rule 4 on the drawer's "Export with receipts" (issue 22 item 12), as in the dialog.
    const page = runPage({ viewer, run, attestations: [], drawer: 'aibom' });
    const drawer = page.slice(page.indexOf('class="drawer"'));
    expect(drawer).toContain('id="evidence-retention-notice"');
    expect(drawer).toContain(escapeHtml(hostile.notice));
    expect(drawer).toMatch(/<form method="get" action="\/v1\/runs\/[^"]+\/artifacts\/aibom\/evidence"/);
    expect(drawer).toMatch(/<input type="checkbox" id="evidence-ack" required \/>/);
    // One element per id on the page: the dialog keeps its own.
    expect(page.match(/id="retention-notice"/g)).toHaveLength(1);
    expect(page.match(/id="evidence-retention-notice"/g)).toHaveLength(1);
  });

  it('the export confirmation page and the runs list', () => {
    expectText(exportPage(viewer, run, [run.id]), [hostile.notice, hostile.pack, hostile.packVersion]);
    const list = runsPage(
      viewer,
      { namespace: hostile.namespace, name_prefix: hostile.runName },
      {
        items: [
          {
            id: run.id,
            namespace: hostile.namespace,
            name: hostile.runName,
            phase: 'Running',
            policy_pack: { name: hostile.pack, version: hostile.packVersion },
            aibom: { state: 'none', digest: null },
            attestation_count: 3,
            transparency: null,
            created_at: run.created_at!,
            updated_at: run.created_at!,
          },
        ],
        next_cursor: '"><script>',
        excluded_namespace_count: 0,
      },
    );
    expectText(list, [hostile.namespace, hostile.runName, hostile.pack, hostile.packVersion]);
    expect(list).not.toContain('"><script>');
    expect(tags(list).filter((t) => /\s(style|on[a-z]+)=/i.test(t))).toEqual([]);
  });
});
