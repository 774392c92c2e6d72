import { hash, randomBytes, verify, X509Certificate } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { validateChain } from '../signing/chain.ts';
import { TimestampError } from './errors.ts';

/**
 * RFC 3161 time-stamp requests and tokens, pure (no I/O): build a TimeStampReq, parse a
 * TimeStampResp (or a bare TimeStampToken), and verify a token for the data it is presented for.
 * `pkijs` reads and writes the ASN.1; every check (imprint, nonce, CMS signature, signing
 * certificate, chain, time) is done here with node:crypto, synchronously, so verifiers that are
 * synchronous (the C2PA manifest verifier) can use it.
 */

type HashName = 'sha256' | 'sha384' | 'sha512';

const HASH_OIDS: Readonly<Record<string, HashName>> = {
  '2.16.840.1.101.3.4.2.1': 'sha256',
  '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512',
};
const OID_OF: Readonly<Record<HashName, string>> = {
  sha256: '2.16.840.1.101.3.4.2.1',
  sha384: '2.16.840.1.101.3.4.2.2',
  sha512: '2.16.840.1.101.3.4.2.3',
};
const ED25519 = '1.3.101.112';
const ID_SIGNED_DATA = '1.2.840.113549.1.7.2';
const ID_CT_TST_INFO = '1.2.840.113549.1.9.16.1.4';
const ATTR_CONTENT_TYPE = '1.2.840.113549.1.9.3';
const ATTR_MESSAGE_DIGEST = '1.2.840.113549.1.9.4';
const ATTR_SIGNING_CERTIFICATE = '1.2.840.113549.1.9.16.2.12';
const ATTR_SIGNING_CERTIFICATE_V2 = '1.2.840.113549.1.9.16.2.47';
/** id-kp-timeStamping (RFC 3161 §2.3). */
export const EKU_TIME_STAMPING = '1.3.6.1.5.5.7.3.8';

/** A request as sent: its DER, and what the answer must echo. */
export interface TimestampRequest {
  readonly der: Buffer;
  readonly nonce: bigint;
  readonly hashAlgorithm: HashName;
  readonly imprint: Buffer;
}

/** What a time-stamp token states (TSTInfo), decoded. */
export interface TstInfo {
  readonly genTime: Date;
  readonly policy: string;
  /** Serial number, hex. */
  readonly serial: string;
  readonly hashAlgorithm: HashName;
  readonly imprint: Buffer;
  readonly nonce?: bigint;
}

/** A token that verified: the time it vouches for, who vouched, and the bytes to keep. */
export interface VerifiedTimestamp extends TstInfo {
  /** The DER TimeStampResp (what C2PA `sigTst` and Sigstore bundles store); the token alone when given one. */
  readonly response: Buffer;
  /** The DER TimeStampToken (CMS ContentInfo). */
  readonly token: Buffer;
  /** The TSA's signing certificate (leaf). */
  readonly tsaCertificate: X509Certificate;
  /** Subject of the TSA certificate, one line. */
  readonly tsa: string;
}

export interface VerifyTimestampOptions {
  /** The bytes that were time-stamped (their hash must be the token's message imprint). */
  readonly data: Uint8Array;
  /** Roots the TSA certificate must chain to, at genTime. */
  readonly trustAnchors: readonly X509Certificate[];
  /** The nonce of the request, when verifying a fresh answer. */
  readonly nonce?: bigint;
}

/** A random positive 63-bit nonce (RFC 3161 §2.4.1: large enough to make replay detectable). */
export function randomNonce(): bigint {
  const bytes = randomBytes(8);
  bytes[0]! &= 0x7f;
  return bytes.readBigUInt64BE();
}

/** Minimal two's-complement big-endian encoding of a non-negative integer (ASN.1 INTEGER content). */
function uintBytes(n: bigint): Uint8Array {
  let hex = n.toString(16);
  if (hex.length % 2 === 1) hex = `0${hex}`;
  const raw = Buffer.from(hex, 'hex');
  return raw[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), raw]) : raw;
}

function bigintOf(int: asn1js.Integer): bigint {
  const bytes = Buffer.from(int.valueBlock.valueHexView);
  if (bytes.length === 0) return 0n;
  const value = BigInt(`0x${bytes.toString('hex')}`);
  // Negative numbers are never valid nonces; keep their magnitude distinct from positives.
  return bytes[0]! & 0x80 ? value - (1n << BigInt(bytes.length * 8)) : value;
}

/**
 * A TimeStampReq (RFC 3161 §2.4.1) for `data`: SHA-256 imprint, a fresh nonce, certReq true (the
 * answer must carry the TSA certificate, so a verifier years later needs nothing but the anchor).
 */
export function timestampRequest(data: Uint8Array, nonce: bigint = randomNonce()): TimestampRequest {
  const imprint = hash('sha256', data, 'buffer');
  const req = new pkijs.TimeStampReq({
    version: 1,
    messageImprint: new pkijs.MessageImprint({
      hashAlgorithm: new pkijs.AlgorithmIdentifier({ algorithmId: OID_OF.sha256 }),
      hashedMessage: new asn1js.OctetString({ valueHex: imprint }),
    }),
    nonce: new asn1js.Integer({ valueHex: uintBytes(nonce) }),
    certReq: true,
  });
  return {
    der: Buffer.from(req.toSchema().toBER(false)),
    nonce,
    hashAlgorithm: 'sha256',
    imprint,
  };
}

function malformed(message: string, cause?: unknown): TimestampError {
  return new TimestampError('MALFORMED_TIMESTAMP', message, cause !== undefined ? { cause } : {});
}

interface Parsed {
  response: Buffer;
  token: Buffer;
  signedData: pkijs.SignedData;
  tstInfo: TstInfo;
  eContent: Buffer;
}

const STATUS_NAMES = ['granted', 'grantedWithMods', 'rejection', 'waiting', 'revocationWarning'];

/** Parses a DER TimeStampResp, or a bare TimeStampToken (ContentInfo); checks status and shape. */
function parse(der: Uint8Array): Parsed {
  const bytes = Buffer.from(der);
  let contentInfo: pkijs.ContentInfo;
  let token: Buffer;
  try {
    const resp = pkijs.TimeStampResp.fromBER(bytes);
    const status = resp.status.status;
    if (status !== pkijs.PKIStatus.granted && status !== pkijs.PKIStatus.grantedWithMods) {
      const text = (resp.status.statusStrings ?? []).map((s) => s.valueBlock.value).join('; ');
      throw new TimestampError(
        'TSA_REJECTED',
        `the TSA refused the request: ${STATUS_NAMES[status] ?? `status ${status}`}${text ? ` (${text})` : ''}`,
      );
    }
    if (resp.timeStampToken === undefined) throw malformed('granted TimeStampResp without a token');
    contentInfo = resp.timeStampToken;
    token = Buffer.from(contentInfo.toSchema().toBER(false));
  } catch (err) {
    if (err instanceof TimestampError) throw err;
    try {
      contentInfo = pkijs.ContentInfo.fromBER(bytes);
      token = bytes;
    } catch (cause) {
      throw malformed('neither a TimeStampResp nor a TimeStampToken', cause);
    }
  }
  if (contentInfo.contentType !== ID_SIGNED_DATA) throw malformed('token is not CMS SignedData');
  let signedData: pkijs.SignedData;
  try {
    signedData = new pkijs.SignedData({ schema: contentInfo.content });
  } catch (cause) {
    throw malformed('token SignedData does not parse', cause);
  }
  if (signedData.encapContentInfo.eContentType !== ID_CT_TST_INFO) {
    throw malformed('token content is not a TSTInfo');
  }
  const eContentValue = signedData.encapContentInfo.eContent;
  if (eContentValue === undefined) throw malformed('token has no encapsulated TSTInfo');
  const eContent = Buffer.from(octets(eContentValue));
  let info: pkijs.TSTInfo;
  try {
    info = pkijs.TSTInfo.fromBER(eContent);
  } catch (cause) {
    throw malformed('TSTInfo does not parse', cause);
  }
  const hashAlgorithm = HASH_OIDS[info.messageImprint.hashAlgorithm.algorithmId];
  if (hashAlgorithm === undefined) {
    throw new TimestampError(
      'UNSUPPORTED_TIMESTAMP',
      `message imprint algorithm ${info.messageImprint.hashAlgorithm.algorithmId} (SHA-256/384/512 are accepted)`,
    );
  }
  return {
    response: bytes,
    token,
    signedData,
    eContent,
    tstInfo: {
      genTime: info.genTime,
      policy: info.policy,
      serial: Buffer.from(info.serialNumber.valueBlock.valueHexView).toString('hex'),
      hashAlgorithm,
      imprint: Buffer.from(info.messageImprint.hashedMessage.valueBlock.valueHexView),
      ...(info.nonce !== undefined ? { nonce: bigintOf(info.nonce) } : {}),
    },
  };
}

/** Content octets of an OCTET STRING, constructed (BER) or primitive. */
function octets(value: asn1js.OctetString): Uint8Array {
  if (!value.idBlock.isConstructed) return value.valueBlock.valueHexView;
  return Buffer.concat(
    (value.valueBlock.value as asn1js.OctetString[]).map((part) => Buffer.from(octets(part))),
  );
}

/** What a token states, without verifying it (for display). Throws MALFORMED_TIMESTAMP / TSA_REJECTED. */
export function readTimestamp(der: Uint8Array): TstInfo {
  return parse(der).tstInfo;
}

function oneLine(dn: string): string {
  return dn.replaceAll('\n', ', ');
}

function certificatesOf(signedData: pkijs.SignedData): { pkijs: pkijs.Certificate; node: X509Certificate }[] {
  const out: { pkijs: pkijs.Certificate; node: X509Certificate }[] = [];
  for (const c of signedData.certificates ?? []) {
    if (!(c instanceof pkijs.Certificate)) continue;
    try {
      out.push({ pkijs: c, node: new X509Certificate(Buffer.from(c.toSchema().toBER(false))) });
    } catch (cause) {
      throw malformed('a certificate in the token does not parse', cause);
    }
  }
  return out;
}

/** The certificate the SignerInfo names (issuer and serial, or subject key identifier). */
function signerCertificate(
  signerInfo: pkijs.SignerInfo,
  certs: { pkijs: pkijs.Certificate; node: X509Certificate }[],
): { pkijs: pkijs.Certificate; node: X509Certificate } | undefined {
  const sid: unknown = signerInfo.sid;
  if (sid instanceof pkijs.IssuerAndSerialNumber) {
    return certs.find(
      (c) => c.pkijs.issuer.isEqual(sid.issuer) && c.pkijs.serialNumber.isEqual(sid.serialNumber),
    );
  }
  if (sid instanceof asn1js.Constructed || sid instanceof asn1js.Primitive) {
    const ski = Buffer.from(
      sid instanceof asn1js.Constructed
        ? octets(sid.valueBlock.value[0] as asn1js.OctetString)
        : sid.valueBlock.valueHexView,
    );
    return certs.find((c) => {
      const ext = c.pkijs.extensions?.find((e) => e.extnID === '2.5.29.14');
      return ext !== undefined && Buffer.from(octets(ext.parsedValue as asn1js.OctetString)).equals(ski);
    });
  }
  return undefined;
}

function attribute(signerInfo: pkijs.SignerInfo, oid: string): asn1js.AsnType | undefined {
  return signerInfo.signedAttrs?.attributes.find((a) => a.type === oid)?.values[0] as
    asn1js.AsnType | undefined;
}

/**
 * RFC 5035 / RFC 2634 signing-certificate attribute: the hash of the TSA certificate the TSA
 * meant to sign with. Checked when present (RFC 3161 §2.4.2 requires it), so a token cannot be
 * re-attributed to another certificate carrying the same key.
 */
function checkSigningCertificate(signerInfo: pkijs.SignerInfo, cert: X509Certificate): void {
  const v2 = attribute(signerInfo, ATTR_SIGNING_CERTIFICATE_V2);
  const v1 = attribute(signerInfo, ATTR_SIGNING_CERTIFICATE);
  const value = v2 ?? v1;
  if (value === undefined) return;
  const bad = (why: string) =>
    new TimestampError('TIMESTAMP_SIGNATURE_INVALID', `signing-certificate attribute: ${why}`);
  const certs = (value as asn1js.Sequence).valueBlock?.value?.[0] as asn1js.Sequence | undefined;
  const first = certs?.valueBlock?.value?.[0] as asn1js.Sequence | undefined;
  const parts = first?.valueBlock?.value;
  if (parts === undefined || parts.length === 0) throw bad('no ESSCertID');
  let alg: string = v2 !== undefined ? 'sha256' : 'sha1';
  let certHash: asn1js.AsnType | undefined = parts[0];
  if (v2 !== undefined && parts[0] instanceof asn1js.Sequence) {
    const oid = (parts[0].valueBlock.value[0] as asn1js.ObjectIdentifier | undefined)?.valueBlock.toString();
    const name = oid !== undefined ? HASH_OIDS[oid] : undefined;
    if (name === undefined) throw bad(`unsupported hash ${String(oid)}`);
    alg = name;
    certHash = parts[1];
  }
  if (!(certHash instanceof asn1js.OctetString)) throw bad('no certHash');
  if (!Buffer.from(octets(certHash)).equals(hash(alg, cert.raw, 'buffer'))) {
    throw bad('it names another certificate than the one that signed');
  }
}

/** Verifies the CMS signature of the token over its signed attributes (or its content). */
function checkSignature(parsed: Parsed, cert: X509Certificate, signerInfo: pkijs.SignerInfo): void {
  const digestName = HASH_OIDS[signerInfo.digestAlgorithm.algorithmId];
  const sigAlg = signerInfo.signatureAlgorithm.algorithmId;
  if (digestName === undefined && sigAlg !== ED25519) {
    throw new TimestampError(
      'UNSUPPORTED_TIMESTAMP',
      `SignerInfo digest algorithm ${signerInfo.digestAlgorithm.algorithmId}`,
    );
  }
  const invalid = (why: string) => new TimestampError('TIMESTAMP_SIGNATURE_INVALID', why);
  let signed: Buffer;
  if (signerInfo.signedAttrs !== undefined) {
    const contentType = attribute(signerInfo, ATTR_CONTENT_TYPE);
    if (
      !(contentType instanceof asn1js.ObjectIdentifier) ||
      contentType.valueBlock.toString() !== ID_CT_TST_INFO
    ) {
      throw invalid('signed content-type attribute is not id-ct-TSTInfo');
    }
    const digest = attribute(signerInfo, ATTR_MESSAGE_DIGEST);
    if (!(digest instanceof asn1js.OctetString)) throw invalid('no messageDigest attribute');
    if (!Buffer.from(octets(digest)).equals(hash(digestName ?? 'sha512', parsed.eContent, 'buffer'))) {
      throw invalid('messageDigest attribute is not the digest of the TSTInfo');
    }
    // pkijs keeps the attributes as received, retagged as SET OF (RFC 5652 §5.4).
    signed = Buffer.from(signerInfo.signedAttrs.encodedValue);
  } else {
    signed = parsed.eContent;
  }
  const signature = Buffer.from(signerInfo.signature.valueBlock.valueHexView);
  let ok: boolean;
  try {
    ok = verify(sigAlg === ED25519 ? null : (digestName ?? null), signed, cert.publicKey, signature);
  } catch (cause) {
    throw new TimestampError('TIMESTAMP_SIGNATURE_INVALID', 'the token signature cannot be checked', {
      cause,
    });
  }
  if (!ok) throw invalid('the token signature does not verify with the TSA certificate');
}

/** Issuers of `leaf` found among `pool`, in order (leaf first): what validateChain wants. */
function orderChain(leaf: X509Certificate, pool: readonly X509Certificate[]): X509Certificate[] {
  const chain = [leaf];
  for (let current = leaf; chain.length < pool.length + 1;) {
    const issuer = pool.find(
      (c) => !chain.includes(c) && c.ca && current.checkIssued(c) && current.verify(c.publicKey),
    );
    if (issuer === undefined) break;
    chain.push(issuer);
    current = issuer;
  }
  return chain;
}

/**
 * Verifies a time-stamp token (inside a TimeStampResp, or bare) for `data`: the message imprint is
 * the hash of `data`, the nonce (when given) is the request's, the CMS signature verifies with the
 * TSA certificate the token carries, that certificate has the timeStamping EKU, and its chain
 * leads to one of `trustAnchors` with every certificate valid at genTime. Throws TimestampError
 * with the first failure's code; returns what the token vouches for.
 */
export function verifyTimestamp(der: Uint8Array, options: VerifyTimestampOptions): VerifiedTimestamp {
  const parsed = parse(der);
  const { tstInfo } = parsed;
  if (!hash(tstInfo.hashAlgorithm, options.data, 'buffer').equals(tstInfo.imprint)) {
    throw new TimestampError(
      'IMPRINT_MISMATCH',
      'the time-stamp token was issued for other data (its message imprint does not match)',
    );
  }
  if (options.nonce !== undefined && tstInfo.nonce !== options.nonce) {
    throw new TimestampError(
      'NONCE_MISMATCH',
      `the answer's nonce ${tstInfo.nonce?.toString() ?? '(none)'} is not the request's ${options.nonce.toString()}`,
    );
  }
  const signerInfos = parsed.signedData.signerInfos;
  if (signerInfos.length !== 1) throw malformed(`token has ${signerInfos.length} signers (RFC 3161: one)`);
  const signerInfo = signerInfos[0]!;
  const certs = certificatesOf(parsed.signedData);
  const signer = signerCertificate(signerInfo, certs);
  if (signer === undefined) {
    throw new TimestampError('UNTRUSTED_TSA', 'the token does not carry the TSA certificate (certReq)');
  }
  checkSignature(parsed, signer.node, signerInfo);
  checkSigningCertificate(signerInfo, signer.node);
  const tsa = signer.node;
  // Node lists the extended key usages as `keyUsage`; RFC 3161 §2.3: exactly timeStamping, critical.
  const ekus = tsa.keyUsage as string[] | undefined;
  const ekuExtension = signer.pkijs.extensions?.find((e) => e.extnID === '2.5.29.37');
  if (ekus?.length !== 1 || ekus[0] !== EKU_TIME_STAMPING || ekuExtension?.critical !== true) {
    throw new TimestampError(
      'UNTRUSTED_TSA',
      `TSA certificate "${oneLine(tsa.subject)}" is not a time-stamping certificate (RFC 3161 §2.3: only the timeStamping EKU, critical)`,
    );
  }
  const chain = validateChain(
    orderChain(
      tsa,
      certs.map((c) => c.node).filter((c) => c !== tsa),
    ),
    options.trustAnchors,
    tstInfo.genTime,
  );
  if (!chain.ok) {
    throw new TimestampError(
      chain.failure === 'EXPIRED' || chain.failure === 'NOT_YET_VALID'
        ? 'TSA_CERTIFICATE_EXPIRED'
        : 'UNTRUSTED_TSA',
      `TSA ${chain.message} (at genTime ${tstInfo.genTime.toISOString()})`,
    );
  }
  return {
    ...tstInfo,
    response: parsed.response,
    token: parsed.token,
    tsaCertificate: tsa,
    tsa: oneLine(tsa.subject),
  };
}
