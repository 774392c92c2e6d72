import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hasCode } from '../../../src/errors.ts';
import {
  checkpointText,
  openCheckpoint,
  parseCheckpointText,
  signCheckpoint,
  withSignatures,
} from '../../../src/tlog/checkpoint.ts';
import {
  cosigner,
  cosignatureTimestamp,
  cosignatureVerifier,
  parseWitnessVkey,
} from '../../../src/tlog/cosignature.ts';
import {
  ed25519NoteSigner,
  ed25519NoteVerifier,
  openNote,
  parseNote,
  parseVkey,
} from '../../../src/tlog/note.ts';

const code = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
};

/** The example of c2sp.org/signed-note@v1 ("Verifier keys", "Example"): an independent vector. */
const SPEC_VKEY = 'example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k';
const SPEC_NOTE =
  'This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n';

const ed25519 = () => generateKeyPairSync('ed25519').privateKey;

describe('signed notes (c2sp.org/signed-note)', () => {
  it("verifies the spec's example note with the spec's example key", () => {
    const { note, verified } = openNote(SPEC_NOTE, [ed25519NoteVerifier(SPEC_VKEY)]);
    expect(note.text).toBe('This is an example message.\n');
    expect(verified.map((s) => s.name)).toEqual(['example.com/foo']);
    expect(parseVkey(SPEC_VKEY)).toMatchObject({ name: 'example.com/foo', keyId: 0x530d903a, type: 1 });
  });

  it('rejects the example with one changed letter, and a note no known key signed', () => {
    const changed = SPEC_NOTE.replace('example message', 'example massage');
    expect(code(() => openNote(changed, [ed25519NoteVerifier(SPEC_VKEY)]))).toBe('NOTE_SIGNATURE_INVALID');
    const other = ed25519NoteSigner('example.com/other', ed25519());
    expect(code(() => openNote(SPEC_NOTE, [ed25519NoteVerifier(other.vkey)]))).toBe('NOTE_SIGNATURE_INVALID');
  });

  it('ignores signatures of unknown keys, even under a known name', () => {
    const signer = ed25519NoteSigner('log.example/a', ed25519());
    const impostor = ed25519NoteSigner('log.example/a', ed25519()); // same name, another key id
    const text = 'hello\n';
    const note = `${text}\n${impostor.sign(text)}${signer.sign(text)}`;
    const { verified } = openNote(note, [ed25519NoteVerifier(signer.vkey)]);
    expect(verified).toHaveLength(1);
  });

  it('refuses malformed notes and vkeys with a code', () => {
    expect(code(() => parseNote('no blank line\n— a AAAAAAA=\n'))).toBe('MALFORMED_NOTE');
    expect(code(() => parseNote('text\n\n'))).toBe('MALFORMED_NOTE');
    expect(code(() => parseNote('a\u0007b\n\n— a AAAAAAA=\n'))).toBe('MALFORMED_NOTE');
    expect(code(() => parseNote('text\n\n- a AAAAAAA=\n'))).toBe('MALFORMED_NOTE');
    expect(code(() => parseNote(new Uint8Array([0xff, 0x0a, 0x0a])))).toBe('MALFORMED_NOTE');
    expect(
      code(() => parseVkey('example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k')),
    ).toBe('MALFORMED_VKEY');
    expect(code(() => parseVkey('a b+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k'))).toBe(
      'MALFORMED_VKEY',
    );
    expect(code(() => parseVkey('nonsense'))).toBe('MALFORMED_VKEY');
  });

  it('signs deterministically: the same checkpoint under the same key is the same bytes', () => {
    const key = ed25519();
    const signer = ed25519NoteSigner('log.example/vault', key);
    const body = { origin: 'log.example/vault', treeSize: 7, rootHash: Buffer.alloc(32, 9) };
    expect(signCheckpoint(body, signer)).toBe(
      signCheckpoint(body, ed25519NoteSigner('log.example/vault', key)),
    );
  });
});

describe('checkpoints (c2sp.org/tlog-checkpoint)', () => {
  const signer = ed25519NoteSigner('log.example/vault', ed25519());
  const body = { origin: 'log.example/vault', treeSize: 20852163, rootHash: Buffer.alloc(32, 1) };

  it('writes origin, size and base64 root, and opens what it signed', () => {
    const note = signCheckpoint(body, signer);
    expect(note.split('\n').slice(0, 4)).toEqual([
      'log.example/vault',
      '20852163',
      Buffer.alloc(32, 1).toString('base64'),
      '',
    ]);
    const { checkpoint } = openCheckpoint(note, [ed25519NoteVerifier(signer.vkey)], 'log.example/vault');
    expect(checkpoint).toMatchObject({ treeSize: 20852163, extension: '' });
    expect(checkpoint.rootHash.equals(body.rootHash)).toBe(true);
  });

  it('refuses another origin, a leading zero, a short root, an empty extension line', () => {
    const note = signCheckpoint(body, signer);
    expect(code(() => openCheckpoint(note, [ed25519NoteVerifier(signer.vkey)], 'log.example/scitt'))).toBe(
      'ORIGIN_MISMATCH',
    );
    const root = Buffer.alloc(32).toString('base64');
    expect(code(() => parseCheckpointText(`o\n01\n${root}\n`))).toBe('MALFORMED_CHECKPOINT');
    expect(code(() => parseCheckpointText(`o\n1\nAAAA\n`))).toBe('MALFORMED_CHECKPOINT');
    expect(code(() => parseCheckpointText(`o\n1\n${root}\n\n`))).toBe('MALFORMED_CHECKPOINT');
    expect(parseCheckpointText(`o\n0\n${root}\next one\n`).extension).toBe('ext one\n');
    expect(code(() => checkpointText({ ...body, origin: 'a\nb' }))).toBe('MALFORMED_CHECKPOINT');
    expect(code(() => signCheckpoint({ ...body, origin: 'log.example/other' }, signer))).toBe(
      'ORIGIN_MISMATCH',
    );
  });
});

describe('cosignatures (c2sp.org/tlog-cosignature cosignature/v1)', () => {
  const log = ed25519NoteSigner('log.example/vault', ed25519());
  const note = signCheckpoint(
    { origin: 'log.example/vault', treeSize: 3, rootHash: Buffer.alloc(32, 2) },
    log,
  );
  const text = parseNote(note).text;
  const witness = cosigner('witness.example/w1', ed25519());

  it('verifies a cosignature over the checkpoint text with its timestamp', () => {
    const line = witness.cosign(text, 1679315147n);
    const cosigned = withSignatures(parseNote(note), [line]);
    const { verified } = openNote(cosigned, [cosignatureVerifier(witness.vkey)]);
    expect(verified).toHaveLength(1);
    expect(cosignatureTimestamp(verified[0]!.signature)).toBe(1679315147n);
    // Both the log and the witness: the log's line still verifies with the log's key.
    expect(openNote(cosigned, [ed25519NoteVerifier(log.vkey)]).verified).toHaveLength(1);
  });

  it('fails a cosignature whose timestamp or checkpoint changed', () => {
    const line = witness.cosign(text, 1679315147n);
    const sig = parseNote(`x\n\n${line}`).signatures[0]!;
    const moved = Buffer.from(sig.signature);
    moved.writeBigUInt64BE(1679315148n, 0);
    expect(cosignatureVerifier(witness.vkey).verify(text, moved)).toBe(false);
    expect(cosignatureVerifier(witness.vkey).verify(text.replace('\n3\n', '\n4\n'), sig.signature)).toBe(
      false,
    );
    expect(cosignatureVerifier(witness.vkey).verify(text, sig.signature)).toBe(true);
  });

  it('takes only type-0x04 witness keys', () => {
    expect(parseWitnessVkey(witness.vkey).name).toBe('witness.example/w1');
    expect(code(() => parseWitnessVkey(log.vkey))).toBe('MALFORMED_VKEY');
    expect(hasCode(new Error('x'), 'MALFORMED_VKEY')).toBe(false);
  });
});
