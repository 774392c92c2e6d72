import { generateKeyPairSync } from 'node:crypto';
import { verifyConsistency } from '../../../src/transparency/merkle.ts';
import { parseCheckpointText } from '../../../src/tlog/checkpoint.ts';
import { cosigner } from '../../../src/tlog/cosignature.ts';
import { ed25519NoteVerifier, openNote, parseNote } from '../../../src/tlog/note.ts';

/**
 * An in-memory tlog-witness for unit tests of the client and the push logic, written from
 * c2sp.org/tlog-witness ("add-checkpoint"): as a `fetch`. The integration tests use litewitness.
 */
export function fakeWitness(name = 'witness.test/w1') {
  const w = cosigner(name, generateKeyPairSync('ed25519').privateKey);
  const logs = new Map<string, { vkey: string; size: number; root: Buffer }>();
  const requests: string[] = [];
  let now = 1_700_000_000n;
  const answer = (status: number, body: string, type = 'text/plain') =>
    new Response(body, { status, headers: { 'content-type': type } });
  const handle = (init?: RequestInit): Response => {
    const body = init?.body as string;
    requests.push(body);
    const cut = body.indexOf('\n\n');
    if (cut < 0) return answer(400, 'bad request');
    const head = body.slice(0, cut).split('\n');
    const m = /^old (0|[1-9][0-9]*)$/.exec(head[0] ?? '');
    if (m === null) return answer(400, 'bad old line');
    const oldSize = Number(m[1]);
    const proof = head.slice(1).map((l) => Buffer.from(l, 'base64'));
    const noteText = body.slice(cut + 2);
    const origin = noteText.split('\n', 1)[0]!;
    const log = logs.get(origin);
    if (log === undefined) return answer(404, 'unknown log');
    let text: string;
    try {
      text = openNote(noteText, [ed25519NoteVerifier(log.vkey)]).note.text;
    } catch {
      return answer(403, 'invalid signature');
    }
    const cp = parseCheckpointText(text);
    if (oldSize > cp.treeSize) return answer(400, 'old size above checkpoint size');
    if (oldSize !== log.size) return answer(409, `${log.size}\n`, 'text/x.tlog.size');
    if (
      oldSize === 0
        ? proof.length !== 0
        : !verifyConsistency(oldSize, cp.treeSize, log.root, cp.rootHash, proof)
    ) {
      return answer(422, 'bad consistency proof');
    }
    log.size = cp.treeSize;
    log.root = cp.rootHash;
    now += 1n;
    return answer(200, w.cosign(parseNote(noteText).text, now));
  };
  const fetchImpl = ((_url: string | URL | Request, init?: RequestInit) =>
    Promise.resolve(handle(init))) as typeof fetch;
  return {
    name,
    vkey: w.vkey,
    fetch: fetchImpl,
    requests,
    addLog(origin: string, logVkey: string) {
      logs.set(origin, { vkey: logVkey, size: 0, root: Buffer.alloc(32) });
    },
    state: (origin: string) => logs.get(origin),
  };
}
