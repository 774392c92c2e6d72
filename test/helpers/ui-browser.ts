import { expect } from 'vitest';
import { stack } from './stack.ts';

/**
 * A browser-like client of the UI over HTTP: keeps cookies (what Set-Cookie sets, dropped on
 * Max-Age=0), sends forms, never follows redirects. `base` is the app's URL; it can be changed to
 * send the same cookies to another replica.
 */
export class UiBrowser {
  readonly jar = new Map<string, string>();
  lastSetCookies: string[] = [];

  base: string;

  constructor(base: string) {
    this.base = base;
  }

  async request(
    path: string,
    init: {
      method?: string;
      form?: Record<string, string | string[]>;
      headers?: Record<string, string>;
      json?: unknown;
    } = {},
  ): Promise<{ status: number; location: string | null; headers: Headers; text: string }> {
    const headers: Record<string, string> = { ...init.headers };
    if (this.jar.size > 0) headers.cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    let body: string | undefined;
    if (init.form !== undefined) {
      const p = new URLSearchParams();
      for (const [k, v] of Object.entries(init.form)) for (const x of [v].flat()) p.append(k, x);
      body = p.toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    } else if (init.json !== undefined) {
      body = JSON.stringify(init.json);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(`${this.base}${path}`, {
      method: init.method ?? 'GET',
      headers,
      ...(body !== undefined ? { body } : {}),
      redirect: 'manual',
    });
    this.lastSetCookies = res.headers.getSetCookie();
    for (const c of this.lastSetCookies) {
      const [pair] = c.split(';');
      const eq = pair!.indexOf('=');
      const [k, v] = [pair!.slice(0, eq), pair!.slice(eq + 1)];
      if (/Max-Age=0/.test(c)) this.jar.delete(k);
      else this.jar.set(k, v);
    }
    return {
      status: res.status,
      location: res.headers.get('location'),
      headers: res.headers,
      text: await res.text(),
    };
  }

  static csrfOf(html: string): string {
    const m = /name="_csrf" value="([^"]+)"/.exec(html);
    if (!m) throw new Error('no CSRF field in the page');
    return m[1]!;
  }

  /** Signs in with a static-token user of the stack, as the sign-in form does. */
  async signIn(user: 'admin' | 'alice' | 'bob'): Promise<void> {
    const form = await this.request('/ui/sign-in');
    const res = await this.request('/ui/sign-in', {
      method: 'POST',
      form: { _csrf: UiBrowser.csrfOf(form.text), token: stack().kube.tokens[user], next: '/ui/runs' },
    });
    expect(res.status).toBe(303);
  }
}
