import { randomBytes } from 'node:crypto';
import { KubeConfig } from '@kubernetes/client-node';
import { inject } from 'vitest';
import pg from 'pg';
import type { StackUser } from '../../hack/stack/kube.ts';

export const stack = () => inject('stack');

export function kubeConfig(user: StackUser = 'admin'): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(stack().kube.kubeconfigs[user]);
  return kc;
}

/** A DNS-1123 name unique to this test run, for namespaces and other objects. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/** A fresh database on the stack's PostgreSQL; returns its superuser URL. */
export async function freshDatabase(prefix = 't'): Promise<string> {
  const base = stack().env.DATABASE_URL!;
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}
