import type { FastifyInstance } from 'fastify';

/**
 * The methods each path answers, for 405 Method Not Allowed (RFC 9110 §15.5.6): a request to a
 * path the API serves, with a method it does not serve there (`DELETE /v1/attestations/{id}` of an
 * append-only vault), is told so with `Allow`, not "no such route".
 *
 * Invariant: collected by an `onRoute` hook added before any route (buildApp installs it first),
 * so every route of every plugin is in the table. The table is read only after the router found
 * no route for the method (the not-found handler), so it decides 404 against 405, never which
 * handler answers. Fastify offers no lookup of a concrete path (findRoute takes patterns), hence
 * the patterns here.
 */
export function trackAllowedMethods(app: FastifyInstance): (path: string) => readonly string[] {
  const routes: { pattern: RegExp; methods: readonly string[] }[] = [];
  app.addHook('onRoute', (route) => {
    if (route.config?.notFoundPage === true) return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    routes.push({ pattern: patternOf(route.url), methods: methods.map((m) => m.toUpperCase()) });
  });
  return (path) => {
    // The router ignores one trailing slash (routerOptions.ignoreTrailingSlash).
    const bare = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
    const allowed = new Set<string>();
    for (const r of routes) if (r.pattern.test(bare)) for (const m of r.methods) allowed.add(m);
    return [...allowed].sort();
  };
}

/**
 * A find-my-way route pattern as a regular expression over the raw path: `:name` matches one
 * segment (or its own `(regex)`), `*` the rest; everything else literally.
 */
export function patternOf(url: string): RegExp {
  let out = '';
  for (let i = 0; i < url.length;) {
    const c = url[i]!;
    if (c === '*') {
      out += '.*';
      i += 1;
    } else if (c === ':' && url[i + 1] !== ':') {
      let j = i + 1;
      while (j < url.length && /[\w$]/.test(url[j]!)) j += 1;
      if (url[j] === '(') {
        let depth = 0;
        let k = j;
        for (; k < url.length; k++) {
          if (url[k] === '\\') k += 1;
          else if (url[k] === '(') depth += 1;
          else if (url[k] === ')' && --depth === 0) break;
        }
        out += `(?:${url.slice(j + 1, k)})`;
        i = k + 1;
      } else {
        out += '[^/]+';
        i = j;
      }
    } else {
      // `::` is a literal colon in find-my-way.
      const literal = c === ':' ? ':' : c;
      out += literal.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
      i += c === ':' ? 2 : 1;
    }
  }
  return new RegExp(`^${out}$`);
}
