import { Decoder } from 'cbor-x';
import { describe, expect, it } from 'vitest';
import { backoffDelay, DEFAULT_RETRY_POLICY, transparencyView } from '../../../src/transparency/jobs.ts';
import { decodeProblemDetails, encodeProblemDetails } from '../../../src/transparency/problem-details.ts';
import { parseRetryAfter } from '../../../src/transparency/scrapi-client.ts';

describe('SCRAPI wire helpers', () => {
  it('parses Retry-After as delta-seconds or HTTP-date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('7', now)).toBe(7000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });

  it('encodes RFC 9290 concise problem details with integer keys', () => {
    const bytes = encodeProblemDetails({
      title: 'Bad Request',
      detail: 'no',
      extra: new Map([['code', 'X']]),
    });
    const raw = new Decoder({ mapsAsObjects: false, useRecords: false }).decode(bytes) as Map<
      unknown,
      unknown
    >;
    expect([...raw.entries()]).toEqual([
      [-1, 'Bad Request'],
      [-2, 'no'],
      ['code', 'X'],
    ]);
    expect(decodeProblemDetails(bytes)).toMatchObject({ title: 'Bad Request', detail: 'no' });
    expect(decodeProblemDetails(Buffer.from('{}'))).toBeUndefined();
  });

  it('backs off exponentially with bounded, jittered delays', () => {
    const p = { ...DEFAULT_RETRY_POLICY, baseDelayMs: 1000, maxDelayMs: 8000 };
    expect([1, 2, 3, 4, 5, 9].map((a) => backoffDelay(a, p, () => 1))).toEqual([
      1000, 2000, 4000, 8000, 8000, 8000,
    ]);
    expect([1, 2, 3].map((a) => backoffDelay(a, p, () => 0))).toEqual([500, 1000, 2000]);
  });

  it('shows the job id while queued and the receipt once published', () => {
    const base = {
      id: 'job-1',
      attestationId: 'att-1',
      attempts: 1,
      lastError: null,
      nextAttemptAt: new Date(0),
      leaseToken: null,
      statement: null,
      entryId: null,
      logIndex: null,
      receipt: null,
      backend: null,
      publishedAt: null,
      createdAt: new Date(0),
      updatedAt: new Date(0),
    };
    expect(transparencyView({ ...base, state: 'queued' })).toEqual({
      job_id: 'job-1',
      status: 'queued',
      attempts: 1,
      next_attempt_at: '1970-01-01T00:00:00.000Z',
    });
    // A failed attempt: still queued, with the error and when it is tried next.
    expect(
      transparencyView({
        ...base,
        state: 'queued',
        lastError: 'REMOTE_REJECTED: 400',
        nextAttemptAt: new Date(5),
      }),
    ).toEqual({
      job_id: 'job-1',
      status: 'queued',
      attempts: 1,
      last_error: 'REMOTE_REJECTED: 400',
      next_attempt_at: '1970-01-01T00:00:00.005Z',
    });
    const published = {
      ...base,
      state: 'published' as const,
      backend: 'scrapi' as const,
      entryId: 'e',
      logIndex: 4,
      receipt: Buffer.from([1, 2]),
      statement: Buffer.from([3]),
      publishedAt: new Date(1000),
    };
    const tenantView = {
      job_id: 'job-1',
      status: 'published',
      attempts: 1,
      backend: 'scrapi',
      mode: 'published',
      entry_id: 'e',
      receipt: 'AQI=',
      receipt_media_type: 'application/cose',
      statement: 'Aw==',
      published_at: '1970-01-01T00:00:01.000Z',
    };
    // The shared log's position only for a reader who may see positions (issue 28).
    expect(transparencyView(published)).toEqual(tenantView);
    expect(transparencyView(published, { position: true })).toEqual({ ...tenantView, log_index: 4 });
  });
});
