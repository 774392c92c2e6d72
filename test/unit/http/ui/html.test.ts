import { describe, expect, it } from 'vitest';
import { escapeHtml, html, trusted, url } from '../../../../src/http/ui/html.ts';

describe('the html tag (src/http/ui/html.ts)', () => {
  it('escapes every character that could open markup, close an attribute or start a template', () => {
    expect(escapeHtml(`<img src=x onerror="alert(1)"> & 'x' \`y\``)).toBe(
      '&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; &#39;x&#39; &#96;y&#96;',
    );
  });

  it('escapes interpolated text in content and in quoted attributes, and only the values', () => {
    const hostile = '"><script>alert(1)</script>';
    const out = html`<a title="${hostile}">${hostile}</a>`.toString();
    expect(out).toBe(
      '<a title="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;">&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;</a>',
    );
    expect(out).not.toContain('<script>');
  });

  it('shows format characters (bidi overrides, zero-width) as [U+XXXX]: a principal never reads as another', () => {
    const principal = 'user:\u202eecila';
    const page = html`<td title="${principal}">${principal}</td>
      <td>${['a\u200bb', 'c\u{e0041}']}</td>`.toString();
    expect(page.replace(/\s+</g, '<')).toBe(
      '<td title="user:[U+202E]ecila">user:[U+202E]ecila</td><td>a[U+200B]bc[U+E0041]</td>',
    );
    expect(page).not.toMatch(/\p{Cf}/u);
  });

  it('nests Html without escaping it twice, escapes strings inside arrays, drops null/undefined/false', () => {
    const inner = html`<b>${'<i>'}</b>`;
    expect(html`<p>${inner}${['<x>', html`<y></y>`]}${null}${undefined}${false}${0}</p>`.toString()).toBe(
      '<p><b>&lt;i&gt;</b>&lt;x&gt;<y></y>0</p>',
    );
  });

  it('passes a string through only when it is explicitly trusted (constants)', () => {
    expect(html`${trusted('<hr>')}${'<hr>'}`.toString()).toBe('<hr>&lt;hr&gt;');
  });

  it('percent-encodes query values and leaves out empty ones', () => {
    expect(url('/ui/runs', { name_prefix: 'a&b=c d', phase: '', cursor: undefined })).toBe(
      '/ui/runs?name_prefix=a%26b%3Dc%20d',
    );
    expect(html`<a href="${url('/ui/runs', { a: '1', b: '"2' })}"></a>`.toString()).toBe(
      '<a href="/ui/runs?a=1&amp;b=%222"></a>',
    );
  });
});
